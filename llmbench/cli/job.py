"""``llmbench job``: the runner inside the operator's Job (or a local stand-in for it).

Why a subcommand of its own: the Job's container runs exactly this, with the run's ConfigMap
as its only input and output (``llmbench.api.job`` lists the keys). Everything else comes from
the pod: the service-account token and CA (the one grant: this ConfigMap), the API server's
address (``KUBERNETES_SERVICE_HOST``/``_PORT``), the API key (``LLMBENCH_API_KEY`` from the
benchmark's Secret, as ``context.json`` names it) and the node (``LLMBENCH_NODE_NAME``).
``--store-dir`` reads and writes a folder with the same keys instead, for a run without a
cluster.

Exit codes: 0 the sweep finished, 1 the run failed (see the digest's ``failed``), 2 usage
error, 130 interrupted (SIGTERM; a new pod resumes from the ConfigMap).
"""

from __future__ import annotations

import argparse
from pathlib import Path

__all__ = ["add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Where the run's store is, where artefacts go, where the termination message goes."""
    from llmbench.runner.job.main import DEFAULT_ARTIFACT_DIR, DEFAULT_TERMINATION_LOG
    from llmbench.runner.job.store import DEFAULT_SERVICE_ACCOUNT_DIR

    p.add_argument("--configmap", metavar="NAME", help="the run's results ConfigMap")
    p.add_argument("--namespace", metavar="NS", help="its namespace")
    p.add_argument(
        "--service-account-dir",
        type=Path,
        default=DEFAULT_SERVICE_ACCOUNT_DIR,
        metavar="DIR",
        help=f"token and ca.crt (default {DEFAULT_SERVICE_ACCOUNT_DIR})",
    )
    p.add_argument(
        "--server",
        metavar="URL",
        help="API server URL (default https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT)",
    )
    p.add_argument(
        "--artifact-dir",
        type=Path,
        default=DEFAULT_ARTIFACT_DIR,
        metavar="DIR",
        help=f"per-point GenAI-Perf folders and checkpoint (default {DEFAULT_ARTIFACT_DIR})",
    )
    p.add_argument(
        "--persist-dir",
        type=Path,
        metavar="DIR",
        help="shard 0 writes the run's folder here instead (a persistent volume), as "
        "llmbench analyze lays it out, HTML report included",
    )
    p.add_argument(
        "--termination-log",
        type=Path,
        metavar="PATH",
        help=f"where the digest goes when the store cannot take it (default "
        f"{DEFAULT_TERMINATION_LOG}; none with --store-dir)",
    )
    p.add_argument(
        "--store-dir",
        type=Path,
        metavar="DIR",
        help="use a folder (one file per ConfigMap key) instead of the ConfigMap: a local run",
    )


def run(args: argparse.Namespace) -> int:
    """The ``job`` subcommand (see the module docstring for exit codes)."""
    import sys

    from llmbench.runner.job.main import DEFAULT_TERMINATION_LOG, run_job
    from llmbench.runner.job.store import ConfigMapStore, DirStore, ResultsStore

    prog = "llmbench job"
    store: ResultsStore
    termination_log: Path | None = args.termination_log
    if args.store_dir is not None:
        if args.configmap or args.server:
            print(f"{prog}: error: --store-dir replaces --configmap/--server; give one",
                  file=sys.stderr)
            return 2
        store = DirStore(args.store_dir)
    else:
        missing = [f for f, v in (("--configmap", args.configmap),
                                  ("--namespace", args.namespace)) if not v]
        if missing:
            print(f"{prog}: error: {' and '.join(missing)} required (or --store-dir DIR)",
                  file=sys.stderr)
            return 2
        store = ConfigMapStore(
            args.configmap, args.namespace, server=args.server,
            service_account_dir=args.service_account_dir,
        )
        if termination_log is None:
            termination_log = DEFAULT_TERMINATION_LOG
    return run_job(store, args.artifact_dir, termination_log=termination_log,
                   persist_dir=args.persist_dir)
