"""``llmbench operator``: the kopf operator that turns ``LLMBenchmark`` resources into runner
Jobs and their results into status.

Needs the ``operator`` extra (``pip install 'llmbench[operator]'``: kopf and kubernetes).
Credentials: the pod's service account in a cluster, else ``KUBECONFIG`` / ``~/.kube/config``.

Exit codes: 0 stopped by a signal, 2 usage error (e.g. neither ``--namespace`` nor
``--all-namespaces``).
"""

from __future__ import annotations

import argparse
import logging
import sys

__all__ = ["add_arguments", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The operator's flags."""
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "-n", "--namespace", action="append", default=[], metavar="NS",
        help="watch this namespace (repeatable)",
    )
    where.add_argument(
        "-A", "--all-namespaces", action="store_true", help="watch every namespace"
    )
    parser.add_argument(
        "--runner-image", default=None, metavar="IMAGE",
        help="image of the runner Jobs (default: this version's published image); "
        "spec.runner.image overrides it per benchmark",
    )
    parser.add_argument(
        "--runner-pod-defaults", default=None, metavar="JSON",
        help="the runner pods' defaults, a JSON object of spec.runner's imagePullSecrets, "
        "podLabels, podAnnotations, priorityClassName and nodeSelector, each benchmark's "
        "merged over it (default: sidecar injection off, "
        '{"podAnnotations": {"sidecar.istio.io/inject": "false", "linkerd.io/inject": '
        '"disabled"}}; the chart passes its runner.* values)',
    )
    parser.add_argument(
        "--exporter-namespace", action="append", default=[], metavar="NS",
        help="with -n: also look for dcgm-exporter pods in this namespace (repeatable); "
        "pods are then listed only in these, the watched and the target's namespaces",
    )
    parser.add_argument(
        "--allowed-runner-images", action="append", default=[], metavar="IMAGE",
        help="a runner image any creator may name in spec.runner.image (repeatable; a "
        "trailing '*' matches a prefix); other images need the admission policy's check",
    )
    parser.add_argument(
        "--admission-policy", default="", metavar="NAME",
        help="the ValidatingAdmissionPolicy (and binding of the same name) that checks a "
        "benchmark creator's rights; while it is not in force, benchmarks naming an API key "
        "Secret, another runner image or another namespace's Service are refused "
        "(docs/security.md)",
    )
    parser.add_argument(
        "--trust-namespace", action="append", default=[], metavar="NS",
        help="run those fields in this namespace without the admission policy (its creators "
        "are trusted; repeatable)",
    )
    parser.add_argument(
        "--liveness", default="http://0.0.0.0:8080/healthz", metavar="URL|off",
        help="liveness endpoint (default http://0.0.0.0:8080/healthz)",
    )
    parser.add_argument(
        "--retry-delay", type=float, default=3.0, metavar="S",
        help="first wait before a benchmark whose target is not ready tries again; doubles "
        "up to 10x (default 3)",
    )
    parser.add_argument(
        "--resync-interval", type=float, default=30.0, metavar="S",
        help="seconds between two checks of every Running benchmark: a deleted Job, a runner "
        "pod that cannot start or be scheduled, a quota refusing it fail the run, a live "
        "run's endpoint Lease is renewed (default 30)",
    )
    parser.add_argument(
        "--unschedulable-deadline", type=float, default=600.0, metavar="S",
        help="seconds a runner pod may stay unschedulable before its run fails (default 600)",
    )
    parser.add_argument(
        "--leader-election-namespace", default=None, metavar="NS",
        help="run as one of several replicas: only the holder of the Lease NS/NAME acts, the "
        "others stand by and take over 15 s after it stops renewing (default: no election, "
        "act at once)",
    )
    parser.add_argument(
        "--leader-election-name", default="llmbench-operator", metavar="NAME",
        help="the leader-election Lease's name (default llmbench-operator)",
    )
    parser.add_argument(
        "--metrics-port", type=int, default=9090, metavar="PORT",
        help="serve Prometheus gauges of each benchmark's last valid run on "
        "http://0.0.0.0:PORT/metrics (default 9090; 0: off)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    # Tests move the schedules' clock forward through this file instead of sleeping minutes.
    parser.add_argument("--clock-offset-file", default=None, help=argparse.SUPPRESS)


def run(args: argparse.Namespace) -> int:
    """Starts kopf with the handlers of :mod:`llmbench.operator.handlers`, handing them the
    flags through kopf's memo; returns on a signal."""
    if not args.namespace and not args.all_namespaces:
        print(
            "llmbench operator: error: name the namespaces to watch (-n NS, repeatable) or "
            "pass --all-namespaces",
            file=sys.stderr,
        )
        return 2
    if args.retry_delay <= 0:
        print("llmbench operator: error: --retry-delay must be > 0", file=sys.stderr)
        return 2
    if args.resync_interval <= 0:
        print("llmbench operator: error: --resync-interval must be > 0", file=sys.stderr)
        return 2
    if args.unschedulable_deadline <= 0:
        print("llmbench operator: error: --unschedulable-deadline must be > 0", file=sys.stderr)
        return 2
    if not 0 <= args.metrics_port <= 65535:
        print("llmbench operator: error: --metrics-port must be 0..65535", file=sys.stderr)
        return 2
    try:
        import kopf

        from llmbench.operator import exporter, handlers, leader  # noqa: F401 - registers them
        from llmbench.operator.admission import Guard
        from llmbench.operator.build import (
            DEFAULT_RUNNER_IMAGE,
            DEFAULT_RUNNER_POD,
            runner_pod_defaults,
        )
        from llmbench.operator.state import CONFIG_KEY, OperatorConfig, connect
    except ImportError as exc:
        print(
            f"llmbench operator: error: {exc.name} is not installed; install the operator "
            "extra: pip install 'llmbench[operator]'",
            file=sys.stderr,
        )
        return 2
    try:
        pod = (DEFAULT_RUNNER_POD if args.runner_pod_defaults is None
               else runner_pod_defaults(args.runner_pod_defaults))
    except ValueError as exc:
        print(f"llmbench operator: error: {exc}", file=sys.stderr)
        return 2
    config = OperatorConfig(
        runner_image=args.runner_image or DEFAULT_RUNNER_IMAGE,
        runner_pod=pod,
        namespaces=tuple(args.namespace),
        exporter_namespaces=tuple(args.exporter_namespace),
        retry_delay=args.retry_delay,
        clock_offset_file=args.clock_offset_file,
        guard=Guard(
            policy=args.admission_policy,
            allowed_images=tuple(args.allowed_runner_images),
            trusted_namespaces=tuple(args.trust_namespace),
        ),
        resync_interval=args.resync_interval,
        unschedulable_seconds=args.unschedulable_deadline,
        leader_namespace=args.leader_election_namespace,
        leader_name=args.leader_election_name,
    )
    exporter.METRICS.port = args.metrics_port
    # kopf.configure() would add a second handler to the root logger that `llmbench` already
    # configured (every line twice); only the levels are set here.
    logging.getLogger("kopf").setLevel(logging.DEBUG if args.verbose else logging.INFO)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)  # a line per liveness probe
    if not args.verbose:
        # "Handler ... succeeded" for every child event (and each waiting benchmark's retry
        # tick) drowns what matters; failures are warnings and still show.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    exporter.serve_metrics()  # from the start: a standby answers scrapes too
    election = leader.of(config)
    if election is not None:  # a standby waits here: kopf starts once it leads
        leader.stand_by(connect(), election, None if args.liveness == "off" else args.liveness)
    kopf.run(
        standalone=True,
        clusterwide=args.all_namespaces,
        namespaces=list(args.namespace),
        liveness_endpoint=None if args.liveness == "off" else args.liveness,
        memo=kopf.Memo({CONFIG_KEY: config}),  # the startup handler builds the state from it
    )
    return 0
