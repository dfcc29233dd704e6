"""``llmbench results NAME [-n NS]``: an ``LLMBenchmark``'s results, read through the kubeconfig.

What the operator wrote, shown as ``analyze`` shows a sweep: the latest run from ``status``
(phase, progress, knee, max load under SLO, the per-point table, validity, the regression
verdict and the conditions that are not met), or an older run from its results ConfigMap
(``<name>-run-<N>``: ``digest.json`` and ``summary.csv``, see :mod:`llmbench.api.job`).

``--history`` lists ``status.history``; ``-o csv`` prints the run's summary CSV byte for byte;
``-o json``/``-o yaml`` the status (or the run's digest); ``--plot out.png`` draws OTT against
p99 TTFT of the last runs over each other; ``--compare RUN`` compares the run with run RUN
through ``llmbench compare``'s rows and verdicts (exit 1 on a regression, as ``compare``).
``--timeseries`` prints the per-slice time series of a saved run instead: NAME is then the run's
folder (one profile's point folder, or an analyze folder with one table per point; for an
``LLMBenchmark``, its folder on ``spec.artifacts.pvc``), read from disk, no cluster needed;
``-o csv`` prints ``<stem>_timeseries.csv``'s columns, ``-o json``/``-o yaml`` the documents.

Exit codes (:mod:`llmbench.cli.output`): 0 shown; 1 ``--compare`` found a regression; 2 bad
flags; 3 the benchmark, the run or what was asked for is not there; 4 no access to the cluster
(one line naming the API server, the kubeconfig and the context used), or the Kubernetes
client is not installed (one line naming the ``[operator]`` extra: the client is imported only
when the command runs, so ``llmbench`` without the extra runs everything else).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import ValidationError

from llmbench.api import GROUP, PLURAL, VERSION
from llmbench.api.job import DIGEST_KEY, SUMMARY_KEY, results_configmap_name
from llmbench.api.status import (
    BenchmarkStatus,
    Condition,
    HistoryEntry,
    KneeStatus,
    MaxUnderSloStatus,
    PointStatus,
    RunDigest,
)
from llmbench.cli.flags import positive_int
from llmbench.cli.output import (
    NO_CLUSTER,
    NOT_FOUND,
    REGRESSED,
    USAGE,
    add_output_argument,
    output_format,
    stdout_console,
    write_data,
)
from llmbench.runner.labels import METRIC_LABELS, format_value

if TYPE_CHECKING:
    from rich.console import Console


__all__ = ["add_arguments", "run"]

PROG = "llmbench results"
#: Seconds to connect and to read one answer: an unreachable server fails in seconds.
_TIMEOUT = (10.0, 30.0)


class Failure(Exception):
    """One line for the user, and the exit code."""

    def __init__(self, message: str, code: int = NOT_FOUND) -> None:
        super().__init__(message)
        self.code = code


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``llmbench results NAME [-n NS] [--run N] [--history|--plot PNG|--compare RUN]
    [-o table|json|yaml|csv]``."""
    p.add_argument(
        "name", help="the LLMBenchmark's name (with --timeseries: a saved run's folder)"
    )
    p.add_argument(
        "-n", "--namespace", default=None,
        help="its namespace (default: the kubeconfig context's, else 'default')",
    )
    p.add_argument(
        "--kubeconfig", default=None,
        help="kubeconfig file (default: $KUBECONFIG, else ~/.kube/config)",
    )
    p.add_argument("--context", default=None, help="kubeconfig context (default: the current)")
    p.add_argument(
        "--run", type=positive_int("--run"), default=None, metavar="N",
        help="show run N from its results ConfigMap <name>-run-<N> (default: the latest run, "
        "from status)",
    )
    view = p.add_mutually_exclusive_group()
    view.add_argument("--history", action="store_true", help="list the last runs")
    view.add_argument(
        "--plot", type=Path, default=None, metavar="OUT.png",
        help="draw OTT against p99 TTFT of the last runs over each other into a PNG",
    )
    view.add_argument(
        "--compare", type=positive_int("--compare"), default=None, metavar="RUN",
        help="compare the run (B) with run RUN (A), as llmbench compare does; exit 1 on a "
        "regression",
    )
    view.add_argument(
        "--timeseries", action="store_true",
        help="print the per-slice time series of a saved run (NAME: its folder, a profile's "
        "point folder or an analyze folder): requests, TTFT/ITL p50/p99 and tokens/s per "
        "slice next to the server's queue and KV-cache use and the GPUs' power",
    )
    add_output_argument(
        p, "json/yaml: the status (with --run: the run's digest; with --history: the history; "
        "with --compare: the comparison); csv: the run's summary CSV (or the comparison's)",
        {"--json": "json", "--csv": "csv"},
    )
    p.add_argument(
        "--last", type=positive_int("--last"), default=5, metavar="K",
        help="with --plot: how many of the last runs to draw (default 5)",
    )
    p.add_argument(
        "--tolerance", nargs="+", default=None, metavar="METRIC:±N%",
        help="with --compare: allowed bad-way change per metric, as llmbench compare takes it",
    )


def _usage_error(args: argparse.Namespace, fmt: str) -> str | None:
    if args.run is not None and (args.history or args.plot is not None):
        return "--run shows one run; --history and --plot show the last runs"
    if fmt == "csv" and (args.history or args.plot is not None):
        return "-o csv prints a run's summary CSV (or a comparison); not with --history or --plot"
    if fmt != "table" and args.plot is not None:
        return f"--plot writes a PNG; not with -o {fmt}"
    if args.tolerance is not None and args.compare is None:
        return "--tolerance applies to --compare"
    if args.timeseries and args.run is not None:
        return "--timeseries reads a saved run's folder (NAME); --run reads the cluster"
    return None


def run(args: argparse.Namespace) -> int:
    """Reads the benchmark and prints what was asked for; see the module's exit codes."""
    fmt = output_format(args, PROG)
    if fmt is None:
        return USAGE
    problem = _usage_error(args, fmt)
    if problem is not None:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return USAGE
    try:
        if args.timeseries:
            from llmbench.cli.saved_timeseries import NoSeries, show_saved

            try:
                return show_saved(Path(args.name), fmt)
            except NoSeries as exc:
                raise Failure(str(exc)) from None
        cluster = _Cluster.connect(args.kubeconfig, args.context, args.namespace)
        return _show(cluster, args, fmt)
    except Failure as exc:
        print(f"{PROG}: {exc}", file=sys.stderr)
        return exc.code


# ----------------------------------------------------------------------------------------------
# the cluster
# ----------------------------------------------------------------------------------------------


def _reason(exc: BaseException) -> str:
    """A connection error's reason without urllib3's object reprs and retry wrapping."""
    inner = getattr(exc, "reason", None)
    text = str(inner if isinstance(inner, BaseException) else exc)
    text = re.sub(r"<[^<>]*object at 0x[0-9a-f]+>:?\s*", "", text)
    text = re.sub(r"^\(?'?Connection aborted\.'?,?\s*", "", text)
    return " ".join(text.split()) or type(exc).__name__


@dataclass
class _Cluster:
    """The API client for one kubeconfig context, and the names that go into error lines."""

    api: Any
    kubeconfig: str
    context: str
    server: str
    namespace: str
    _core: Any = field(default=None, repr=False)

    @classmethod
    def connect(cls, kubeconfig: str | None, context: str | None, namespace: str | None
                ) -> _Cluster:
        # without the [operator] extra: one line naming it (llmbench.cli.main), exit 4
        from kubernetes import client, config
        from kubernetes.config.config_exception import ConfigException

        path = kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
        shown = path
        try:
            contexts, active = config.list_kube_config_contexts(config_file=path)
            chosen = next((c for c in contexts if c.get("name") == context), None) if context \
                else active
            if chosen is None:
                names = ", ".join(str(c.get("name")) for c in contexts) or "none"
                raise Failure(
                    f"no context {context!r} in kubeconfig {shown} (contexts: {names})",
                    NO_CLUSTER,
                )
            cfg = client.Configuration()
            config.load_kube_config(
                config_file=path, context=chosen["name"], client_configuration=cfg
            )
        except (ConfigException, OSError, ValueError, TypeError, KeyError) as exc:
            where = f"kubeconfig {shown}" + (f", context {context}" if context else "")
            raise Failure(f"cannot load {where}: {_reason(exc)}", NO_CLUSTER) from None
        cfg.retries = 0  # one attempt: an unreachable server answers in seconds, not minutes
        ns = namespace or (chosen.get("context") or {}).get("namespace") or "default"
        return cls(client.ApiClient(cfg), shown, str(chosen["name"]), str(cfg.host), ns)

    def _call(self, fn: Any, *args: Any, missing: str) -> Any:
        """One API call; 404 -> Failure(missing, NOT_FOUND); no access -> NO_CLUSTER."""
        from kubernetes.client.rest import ApiException
        from urllib3.exceptions import HTTPError

        where = f"(kubeconfig {self.kubeconfig}, context {self.context})"
        try:
            return fn(*args, _request_timeout=_TIMEOUT)
        except ApiException as exc:
            if exc.status == 404:
                raise Failure(missing, NOT_FOUND) from None
            if exc.status in (401, 403):
                raise Failure(
                    f"the API server at {self.server} refused the request {where}: "
                    f"{exc.status} {exc.reason}", NO_CLUSTER,
                ) from None
            raise Failure(
                f"the API server at {self.server} answered {exc.status} {exc.reason} {where}",
                NO_CLUSTER,
            ) from None
        except (HTTPError, OSError) as exc:
            raise Failure(
                f"cannot reach the API server at {self.server} {where}: {_reason(exc)}",
                NO_CLUSTER,
            ) from None

    def benchmark(self, name: str) -> dict[str, Any]:
        from kubernetes import client

        api = client.CustomObjectsApi(self.api)
        obj: dict[str, Any] = self._call(
            api.get_namespaced_custom_object, GROUP, VERSION, self.namespace, PLURAL, name,
            missing=f"LLMBenchmark {self.namespace}/{name} not found (context {self.context})",
        )
        return obj

    def run_data(self, name: str, run: int, config_map: str | None = None) -> dict[str, str]:
        """The data of run ``run``'s results ConfigMap; Failure when it was pruned."""
        from kubernetes import client

        if self._core is None:
            self._core = client.CoreV1Api(self.api)
        cm_name = config_map or results_configmap_name(name, run)
        cm = self._call(
            self._core.read_namespaced_config_map, cm_name, self.namespace,
            missing=f"run {run} of {self.namespace}/{name}: its results ConfigMap {cm_name} is "
            "gone (pruned by spec.historyLimit, or never written)",
        )
        return dict(cm.data or {})


# ----------------------------------------------------------------------------------------------
# one run, from status or from its ConfigMap
# ----------------------------------------------------------------------------------------------


@dataclass
class _Run:
    """What is shown of one run, whichever object it came from."""

    number: int | None
    phase: str | None
    progress: str | None
    points: list[PointStatus]
    knee: KneeStatus | None
    best: MaxUnderSloStatus | None
    summary_csv: str | None
    source: Literal["status", "configmap"]
    raw: Any  # status dict, or digest.json text
    valid: bool | None = None
    invalid_reasons: list[str] = field(default_factory=list)
    conditions: list[Condition] = field(default_factory=list)
    message: str | None = None
    artifacts: str | None = None  # the run's folder on spec.artifacts.pvc


def _status(obj: dict[str, Any]) -> BenchmarkStatus:
    try:
        return BenchmarkStatus.model_validate(obj.get("status") or {})
    except ValidationError as exc:
        meta = obj.get("metadata") or {}
        raise Failure(
            f"LLMBenchmark {meta.get('namespace')}/{meta.get('name')}: status not readable "
            f"({exc.error_count()} errors; first: {exc.errors()[0]['msg']})"
        ) from None


def _latest(obj: dict[str, Any], status: BenchmarkStatus) -> _Run:
    return _Run(
        number=status.run, phase=status.phase, progress=status.progress,
        points=list(status.points), knee=status.knee, best=status.max_under_slo,
        summary_csv=status.summary_csv, source="status", raw=obj.get("status") or {},
        conditions=list(status.conditions), message=status.message,
        artifacts=(h.artifacts if status.run is not None and (h := _entry(status, status.run))
                   else None),
    )


def _entry(status: BenchmarkStatus, run: int) -> HistoryEntry | None:
    return next((h for h in status.history if h.run == run), None)


def _from_configmap(cluster: _Cluster, name: str, status: BenchmarkStatus, run: int) -> _Run:
    where = f"run {run} of {cluster.namespace}/{name}"
    if status.run is None or run > status.run:
        latest = f"the latest is run {status.run}" if status.run else "none has started"
        raise Failure(f"{where} does not exist ({latest})")
    entry = _entry(status, run)
    data = cluster.run_data(name, run, entry.config_map if entry is not None else None)
    text = data.get(DIGEST_KEY)
    if text is None:
        raise Failure(f"{where}: its results ConfigMap has no {DIGEST_KEY} (no point finished)")
    try:
        digest = RunDigest.model_validate_json(text)
    except ValidationError as exc:
        raise Failure(f"{where}: {DIGEST_KEY} not readable ({exc.errors()[0]['msg']})") from None
    if entry is not None:
        phase: str | None = entry.phase
    elif run == status.run:
        phase = status.phase
    else:
        phase = "Failed" if digest.failed else ("Finished" if digest.finished else None)
    return _Run(
        number=run, phase=phase, progress=f"{digest.done}/{digest.total}",
        points=list(digest.points), knee=digest.knee, best=digest.max_under_slo,
        summary_csv=data.get(SUMMARY_KEY), source="configmap", raw=text,
        valid=digest.valid if entry is None or entry.valid is None else entry.valid,
        invalid_reasons=list(digest.invalid_reasons),
        message=digest.failed or (entry.message if entry is not None else None),
        artifacts=entry.artifacts if entry is not None else None,
    )


# ----------------------------------------------------------------------------------------------
# output
# ----------------------------------------------------------------------------------------------


def _yes_no(v: bool | None) -> str:
    return "N/A" if v is None else ("yes" if v else "[red]no[/red]")


def _point_table(run: _Run, title: str) -> Any:
    from rich.table import Table

    lab = METRIC_LABELS
    ott = lab["output_token_throughput"]
    columns = (
        "value",
        lab["time_to_first_token"].stat("p99"),
        lab["inter_token_latency"].stat("p99"),
        f"p99 {lab['request_latency'].terse} ({lab['request_latency'].unit})",
        f"{ott.terse} ({ott.unit})",
        f"{lab['request_throughput'].terse} ({lab['request_throughput'].unit})",
        f"{lab['goodput'].name} ({lab['goodput'].unit})",
        "SLO met",
        "GPU power (W)",
        "valid",
    )
    table = Table(title=title)
    for c in columns:
        table.add_column(c, justify="right")
    for p in run.points:
        value = f"{p.value:g} {p.workload}" if p.workload else f"{p.value:g}"  # two axes
        if p.state == "Failed":
            table.add_row(value, f"[red]failed: {p.reason or 'no reason given'}[/red]",
                          *[""] * (len(columns) - 2))
            continue
        table.add_row(
            value, format_value(p.ttft_p99_ms), format_value(p.itl_p99_ms),
            format_value(p.e2e_p99_ms), format_value(p.ott), format_value(p.rps),
            format_value(p.goodput), _yes_no(p.slo_met), format_value(p.gpu_power_w),
            _yes_no(p.valid),
        )
    return table


def _print_run(console: Console, namespace: str, name: str, run: _Run) -> None:
    shown = f"run {run.number}" if run.number is not None else "no run yet"
    head = f"[bold]LLMBenchmark {namespace}/{name}[/bold] · {shown} · {run.phase or 'N/A'}"
    if run.progress:
        head += f" · {run.progress} points"
    if run.source == "configmap":
        head += f" (from ConfigMap {results_configmap_name(name, run.number or 0)})"
    console.print(head)
    # The runner's sentences name themselves ("knee at ...", "max OTT under SLO ...").
    if run.knee is not None:
        k = run.knee
        console.print(k.message or (f"knee at {k.label}" if k.reached else "knee not reached"))
    if run.best is not None:
        console.print(run.best.message or "max OTT under SLO: N/A")
    if run.points:
        console.print(_point_table(run, f"{name} run {run.number}"))
        for p in run.points:
            for w in p.warnings:
                where = f"{p.value:g} {p.workload}" if p.workload else f"{p.value:g}"
                console.print(f"[yellow]point {where}: {w}[/yellow]")
    else:
        console.print("no point has finished yet")
    conds = {c.type: c for c in run.conditions}
    valid = conds.get("MeasurementValid")
    if valid is not None:
        colour = {"True": "green", "False": "red"}.get(valid.status, "yellow")
        console.print(f"validity: [{colour}]{valid.status}[/{colour}] {valid.reason}: "
                      f"{valid.message}")
    elif run.source == "configmap" and (run.valid is not None or run.invalid_reasons):
        if run.valid is False or run.invalid_reasons:
            reasons = "; ".join(run.invalid_reasons) or "a point reported a validity warning"
            console.print(f"validity: [red]False[/red] {reasons}")
        else:
            console.print("validity: [green]True[/green] no validity warning")
    regressed = conds.get("Regressed")
    if regressed is not None:
        colour = {"True": "red", "False": "green"}.get(regressed.status, "yellow")
        console.print(f"regressed: [{colour}]{regressed.status}[/{colour}] {regressed.reason}: "
                      f"{regressed.message}")
    for c in run.conditions:
        if c.status == "False" and c.type not in ("MeasurementValid", "Regressed"):
            console.print(f"[yellow]{c.type}=False[/yellow] {c.reason}: {c.message}")
    if run.message:
        console.print(f"message: {run.message}")
    if run.artifacts:
        console.print(f"artefacts: {run.artifacts}")


def _print_history(console: Console, namespace: str, name: str, status: BenchmarkStatus) -> None:
    from rich.table import Table

    if not status.history:
        console.print(f"LLMBenchmark {namespace}/{name}: no finished run yet")
        return
    ott = METRIC_LABELS["output_token_throughput"]
    table = Table(title=f"{namespace}/{name}: last {len(status.history)} runs")
    for c in ("run", "finished", "phase", "points", "knee", f"max {ott.terse} under SLO "
              f"({ott.unit})", METRIC_LABELS["time_to_first_token"].stat("p99"), "valid",
              "regressed"):
        table.add_column(c, justify="right" if c not in ("finished", "phase") else "left")
    for h in status.history:
        phase = h.phase if h.phase == "Succeeded" else f"[red]{h.phase}[/red]"
        table.add_row(
            str(h.run), h.finished_time or "N/A", phase,
            "N/A" if h.points is None else str(h.points), h.knee or "none",
            format_value(h.max_ott_under_slo), format_value(h.ttft_p99_ms), _yes_no(h.valid),
            "N/A" if h.regressed is None else "[red]yes[/red]" if h.regressed else "no",
        )
    console.print(table)


# ----------------------------------------------------------------------------------------------
# the views
# ----------------------------------------------------------------------------------------------


def _sweep_type(obj: dict[str, Any]) -> str:
    sweep = (obj.get("spec") or {}).get("sweep") or {}
    return str(sweep.get("type") or "concurrency")


def _figures(run: _Run, sweep_type: str) -> Any:
    from llmbench.runner.sweep.compare import figures_from_points

    return figures_from_points(
        run.points, run.best.ott if run.best is not None else None, sweep_type
    )


def _compare(cluster: _Cluster, args: argparse.Namespace, obj: dict[str, Any],
             status: BenchmarkStatus, candidate: _Run, fmt: str) -> int:
    from llmbench.cli.compare import print_table
    from llmbench.runner.sweep.compare import (
        DEFAULT_TOLERANCES,
        compare_sweeps,
        parse_tolerances,
        render,
    )

    try:
        tolerances = (
            parse_tolerances(args.tolerance) if args.tolerance is not None
            else dict(DEFAULT_TOLERANCES)
        )
    except ValueError as exc:
        raise Failure(f"error: {exc}", USAGE) from None
    if candidate.number is None:
        raise Failure(f"LLMBenchmark {cluster.namespace}/{args.name}: no run yet to compare")
    baseline = _from_configmap(cluster, args.name, status, args.compare)
    sweep_type = _sweep_type(obj)
    rows = compare_sweeps(_figures(baseline, sweep_type), _figures(candidate, sweep_type),
                          tolerances)
    if fmt == "csv":
        sys.stdout.write(render(rows, "csv"))
    elif fmt != "table":
        write_data(json.loads(render(rows, "json")), fmt)
    else:
        print_table(rows, f"run {baseline.number}", f"run {candidate.number}", stdout_console())
    bad = [r for r in rows if r.verdict in ("regression", "missing")]
    if bad:
        names = ", ".join(f"{r.scope} {r.metric}" for r in bad)
        print(f"{PROG}: run {candidate.number} regressed against run {baseline.number}: "
              f"{names}", file=sys.stderr)
        return REGRESSED
    return 0


def _plot(cluster: _Cluster, args: argparse.Namespace, obj: dict[str, Any],
          status: BenchmarkStatus) -> int:
    from llmbench.runner.report.plots import runs_latency_throughput_plot

    curves: list[tuple[str, Sequence[tuple[float, float, float]]]] = []
    entries = status.history[-args.last:]
    for h in entries:
        try:
            data = _from_configmap(cluster, args.name, status, h.run)
        except Failure as exc:
            if exc.code != NOT_FOUND:
                raise
            print(f"{PROG}: {exc}; not drawn", file=sys.stderr)
            continue
        label = f"run {h.run}" + (f" ({h.finished_time[:10]})" if h.finished_time else "")
        curves.append((label, _curve(data.points)))
    finished = {h.run for h in status.history}
    if status.run is not None and status.run not in finished and status.points:
        curves.append((f"run {status.run} ({status.phase or 'running'})", _curve(status.points)))
        curves = curves[-args.last:]
    limit = ((obj.get("spec") or {}).get("slo") or {}).get("ttftP99Ms")
    out = runs_latency_throughput_plot(
        curves, args.plot, f"{cluster.namespace}/{args.name}: throughput vs p99 TTFT, last runs",
        float(limit) if isinstance(limit, (int, float)) else None,
    )
    if out is None:
        raise Failure(f"LLMBenchmark {cluster.namespace}/{args.name}: no run has a point with "
                      "p99 TTFT and OTT to draw")
    print(f"wrote {out} ({len([c for c in curves if c[1]])} runs)")
    return 0


def _curve(points: Sequence[PointStatus]) -> list[tuple[float, float, float]]:
    return [(p.value, p.ttft_p99_ms, p.ott) for p in points
            if p.ttft_p99_ms is not None and p.ott is not None]


def _show(cluster: _Cluster, args: argparse.Namespace, fmt: str) -> int:
    obj = cluster.benchmark(args.name)
    status = _status(obj)
    ns, name = cluster.namespace, args.name
    if args.history:
        if fmt != "table":
            write_data([h.model_dump(by_alias=True, exclude_none=True, mode="json")
                        for h in status.history], fmt)
        else:
            _print_history(stdout_console(), ns, name, status)
        return 0
    if args.plot is not None:
        return _plot(cluster, args, obj, status)
    run = (_from_configmap(cluster, name, status, args.run) if args.run is not None
           else _latest(obj, status))
    if args.compare is not None:
        return _compare(cluster, args, obj, status, run, fmt)
    if fmt == "csv":
        if not run.summary_csv:
            what = f"run {run.number}" if run.number is not None else "no run yet"
            raise Failure(f"LLMBenchmark {ns}/{name} ({what}): no summary CSV yet")
        sys.stdout.write(run.summary_csv)
        return 0
    if fmt != "table":
        write_data(json.loads(run.raw) if isinstance(run.raw, str) else run.raw, fmt)
        return 0
    _print_run(stdout_console(), ns, name, run)
    return 0
