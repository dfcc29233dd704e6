"""``llmbench analyze``: sweep a load dimension and answer "how much load before the SLO breaks".

The benchmark definition is the one spec model, built either from the ``profile`` flags plus
the sweep, SLO and cost flags, or from an ``LLMBenchmark`` manifest (``-f``), so a file that
runs in the cluster runs here too. Running the sweep is :mod:`llmbench.runner.sweep.run`; what
it means (knee, SLO, cost, tables) is :mod:`llmbench.runner.sweep.analysis`.

Outputs in the run folder: one GenAI-Perf folder per point, ``checkpoint.json``,
``analyze_export_genai_perf.csv``, ``analyze_export_genai_perf.json``, PNG plots and
``report.html``.

Exit codes: 0 every point measured; 1 a point failed (or the target is unreachable);
2 usage error; 130 interrupted (run the same command again to resume).
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from llmbench.api import (
    SWEEP_TYPES,
    Slo,
    Spec,
    SpecError,
    parse_sweep_list,
    sweep_values,
)
from llmbench.api.results import SweepAnalysis
from llmbench.api.sweep_values import parse_workloads
from llmbench.cli import profile as profile_cli
from llmbench.cli import telemetry as telemetry_flags
from llmbench.cli.flags import parse_headers, parse_limits, read_api_key
from llmbench.cli.spec_flags import ANALYZE_FLAGS, add_analyze_arguments
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.labels import METRIC_LABELS, format_value
from llmbench.runner.sweep.analysis import (
    ANALYZE_CSV,
    METRIC_COLUMNS,
    analysis,
    findings,
    table1_columns,
    table1_row,
    write_exports,
)
from llmbench.runner.sweep.run import DONE, CheckpointError, SweepResult

__all__ = ["add_arguments", "run", "spec_from_args", "spec_from_file"]

#: ``--slo`` keys → the manifest key of the Slo field.
SLO_FLAG_KEYS = {k: Slo.model_fields[f].alias or f for k, f in Slo.LIMITS.items()}

#: Analyze-only flags → spec field paths, for error messages (profile's are in SPEC_FLAGS);
#: a sweep's own rules (exactly one of range and values) name both flags.
_SWEEP_FLAGS = {
    **{f"spec.{path}": flag for path, flag in ANALYZE_FLAGS.values()},
    "spec.sweep": "--sweep-range/--sweep-list",
    "spec.sweep.search": "--search",
}

#: ``--search`` goals as typed → the spec's ``sweep.search.goal``.
SEARCH_GOALS = {"max-under-slo": "maxUnderSlo", "maxUnderSlo": "maxUnderSlo"}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``profile``'s flags (applied to every point) plus the sweep, SLO and cost flags."""
    add_analyze_arguments(p)


def parse_slo_flag(items: Sequence[str]) -> dict[str, float]:
    """``ttft_p99:500 itl_p99:50`` -> the spec's ``slo`` mapping; ValueError naming ``--slo``."""
    values = parse_limits(items, "--slo", tuple(SLO_FLAG_KEYS))
    if values.get("goodput_ratio", 0) > 1:
        raise ValueError("--slo goodput_ratio: a fraction of requests, at most 1")
    return {SLO_FLAG_KEYS[k]: v for k, v in values.items()}


def spec_from_args(args: argparse.Namespace) -> Spec:
    """The spec of a flag-driven analyze: the profile flags plus sweep, SLO and cost.

    Raises ValueError naming the flag.
    """
    sweep_type = args.sweep_type
    if sweep_type in ("batch_size", "num_dataset_entries"):
        raise ValueError(
            f"--sweep-type {sweep_type}: this GenAI-Perf sweep is not supported by llmbench; "
            f"it sweeps {', '.join(SWEEP_TYPES)}"
        )
    if sweep_type not in SWEEP_TYPES:
        raise ValueError(f"--sweep-type {sweep_type!r}: expected one of {', '.join(SWEEP_TYPES)}")
    if args.sweep_range is not None and args.sweep_list is not None:
        raise ValueError("--sweep-range and --sweep-list: give only one")
    values = parse_sweep_list(args.sweep_list) if args.sweep_list is not None else None
    rng = args.sweep_range
    if rng is None and values is None:
        if sweep_type != "concurrency":
            raise ValueError(f"--sweep-type {sweep_type} needs --sweep-range or --sweep-list")
        rng = "1:256"
    sweep_values(sweep_type, rng, values)  # the precise message, naming the flag and the value
    if sweep_type == "concurrency" and args.concurrency is not None:
        raise ValueError("--concurrency: the sweep sets it; drop it or sweep something else")
    if sweep_type == "concurrency" and args.request_rate is not None:
        raise ValueError("--request-rate cannot be combined with --sweep-type concurrency")
    ns = argparse.Namespace(**vars(args))
    if sweep_type == "request_rate" and ns.request_rate is None:
        ns.request_rate = 1.0  # a placeholder: each point sets its own rate
    doc = profile_cli.spec_document(ns)
    slo = parse_slo_flag(args.slo)
    # --slo latency limits replace --goodput's; without them, --goodput's limits count.
    doc["slo"] = slo if set(slo) - {"goodputRatio"} else {**doc.get("slo", {}), **slo}
    doc["sweep"] = {
        "type": sweep_type,
        "stopAfterKnee": args.stop_after_knee,
        "onPointFailure": args.on_point_failure,
        **({"range": rng} if values is None else {"values": values}),
    }
    if args.sweep_workloads is not None:
        doc["sweep"]["workloads"] = parse_workloads(args.sweep_workloads)
    search = search_document(args)
    if search is not None:
        doc["sweep"]["search"] = search
    doc["repetitions"] = args.repetitions
    doc["cost"] = {"currency": args.currency}
    if args.price_per_hour is not None:
        doc["cost"]["pricePerHour"] = args.price_per_hour
    try:
        return Spec.from_manifest(doc)
    except SpecError as exc:
        raise profile_cli.flag_error(exc, _SWEEP_FLAGS) from None


def search_document(args: argparse.Namespace) -> dict[str, Any] | None:
    """``--search max-under-slo [--search-resolution N]`` -> ``sweep.search``; ValueError
    naming the flag."""
    if args.search is None:
        if args.search_resolution is not None:
            raise ValueError("--search-resolution: needs --search max-under-slo")
        return None
    goal = SEARCH_GOALS.get(args.search)
    if goal is None:
        raise ValueError(f"--search {args.search!r}: expected max-under-slo")
    out: dict[str, Any] = {"goal": goal}
    if args.search_resolution is not None:
        out["resolution"] = args.search_resolution
    return out


def spec_from_file(path: Path) -> tuple[Spec, str | None]:
    """Reads a manifest (the first ``LLMBenchmark`` document) and its ``metadata.name``."""
    import yaml

    try:
        docs = [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d]
    except OSError as exc:
        raise ValueError(f"-f {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"-f {path}: not valid YAML: {exc}") from None
    if not docs:
        raise ValueError(f"-f {path}: the file is empty")
    doc = next((d for d in docs if isinstance(d, dict) and d.get("kind") == "LLMBenchmark"), None)
    doc = doc if doc is not None else docs[0]
    try:
        spec = Spec.from_manifest(doc)
    except SpecError as exc:
        raise ValueError(f"-f {path}:\n{exc}") from None
    name = None
    if isinstance(doc, dict) and isinstance(doc.get("metadata"), dict):
        name = doc["metadata"].get("name")
    return spec, name





def _short_header(column: str) -> str:
    """A table 1 column's console header (the terminal is narrower than a CSV).

    Metric columns are spelled from the one label table (``TTFT p99`` over ``ms``); the others
    are listed here.
    """
    if column in METRIC_COLUMNS:
        field, attr = METRIC_COLUMNS[column]
        label = METRIC_LABELS[field]
        if attr.endswith("_p99_ms"):
            return f"{label.terse} p99\n{label.unit}"
        return label.terse if column == label.name else f"{label.terse}\n{label.unit}"
    return _SHORT.get(column, column)


#: Console headers of the table 1 columns that show no metric.
_SHORT = {
    "Concurrency": "conc",
    "Workload": "workload",
    "Output Tokens/s per User": "tok/s\n/user",
    "Output Tokens/s per GPU": "tok/s\n/GPU",
    "Output Tokens/s per Run": "tok/s\n/run",
    "Pareto Frontier": "pareto",
    "ISL": "ISL",
    "Request Rate (req/s)": "rate\n/s",
    "Request Rate": "rate\n/s",
    "Num Dataset Entries": "prompts",
    "p99 Output Sequence Length (tokens)": "OSL p99\ntokens",
    "Knee": "knee",
    "Achieved Rate (req/s)": "achieved\n/s",
    "OSL": "OSL",
    "Meets SLO": "SLO",
    "Energy per Output Token (J)": "J/tok",
    "Repetitions": "reps",
    "Max Spread (%)": "spread\n%",
}


def print_summary(data: SweepAnalysis, console: Any) -> None:
    """The sweep table (knee and SLO marked), then the knee, SLO and spread lines."""
    from rich.table import Table

    skip = ("Config Name", "Status", "Unstable Metrics")
    cols = [c for c in table1_columns(data) if c not in skip]
    axes = f"{data.sweep_type} x workloads" if data.workloads is not None else data.sweep_type
    table = Table(title=f"llmbench analyze | {data.model} | {axes} sweep")
    for c in cols:
        label = (
            "cost/1M\n" + data.cost.currency if c.startswith("Cost per 1M") else _short_header(c)
        )
        table.add_column(label, justify="right", no_wrap=True)
    table.add_column("note")
    knee = data.knee
    slo = data.slo
    # two axes: each workload's knee and best point under SLO
    knees = {w.knee.name for w in data.workloads or () if w.knee is not None}
    bests = {w.slo.best for w in data.workloads or () if w.slo is not None and w.slo.best}
    for i, p in enumerate(data.points):
        row = table1_row(data, p)
        marks = []
        if (knee is not None and knee.index == i) or p.name in knees:
            marks.append("[yellow]knee[/yellow]")
        if (slo is not None and slo.best_index == i and data.workloads is None) or (
            p.name in bests
        ):
            marks.append("[green]best under SLO[/green]")
        if p.status != "ok":
            marks.append(f"[red]failed: {p.reason}[/red]")
        if p.unstable:
            marks.append(f"[yellow]spread > 10%: {' '.join(p.unstable)}[/yellow]")
        if data.sweep_type == "concurrency":
            row["Concurrency"] = f"[cyan]{row['Concurrency']}[/cyan]"
        table.add_row(*(row[c] for c in cols), " ".join(marks))
    console.print(table)
    style = {"info": "", "warn": "yellow", "error": "red"}
    for severity, line in findings(data):
        s = style[severity]
        console.print(f"[{s}]{line}[/{s}]" if s else line, highlight=False)


def collector_for_spec(spec: Spec, args: argparse.Namespace) -> Any:
    """The telemetry collector a manifest asks for, run locally.

    ``telemetry.dcgm`` as a URL is scraped; ``auto`` needs the operator (it finds the node's
    exporter), so locally it means none. ``telemetry.serverMetrics`` maps onto
    ``--target-metrics``. Interval, timeout and GPU filters come from the telemetry flags.
    """
    ns = argparse.Namespace(**vars(args))
    dcgm = spec.telemetry.dcgm
    ns.server_metrics_url = [
        *(getattr(args, "server_metrics_url", []) or []),
        *([dcgm] if dcgm not in ("auto", "off") else []),
    ]
    ns.target_metrics = spec.telemetry.server_metrics
    url = spec.target.base_url(spec.namespace)
    return telemetry_flags.collector_from_args(ns, url)


def _run_dir(args: argparse.Namespace, spec: Spec, model: str, name: str | None) -> Path:
    if args.artifact_dir is not None:
        return Path(args.artifact_dir)
    if name:
        return Path("artifacts") / re.sub(r"[^A-Za-z0-9._-]+", "_", name)
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", model)
    st = spec.sweep.type if spec.sweep is not None else spec.load.mode
    return Path("artifacts") / f"{safe}-{spec.target.endpoint_type}-analyze-{st}"


async def _main(
    spec: Spec, run_dir: Path, model: str, restart: bool, api_key: str | None,
    headers: dict[str, str], console: Any, preflight: bool = True,
    point_options: dict[str, Any] | None = None,
    records: dict[str, list[RequestRecord]] | None = None,
) -> SweepResult:
    """Runs the sweep with a progress bar per point; ``records`` (for the report's plots)
    receives each measured run's request records by its folder name."""
    from llmbench.runner.load.config import expected_total
    from llmbench.runner.load.result import Progress
    from llmbench.runner.point.profile import install_stop_signals, run_profile
    from llmbench.runner.report.console import show_progress, validity_lines
    from llmbench.runner.report.telemetry_plot import plot_point_telemetry
    from llmbench.runner.report.timeseries_plot import plot_point_timeseries
    from llmbench.runner.sweep.run import run_sweep

    stop = asyncio.Event()
    undo = install_stop_signals(stop)

    async def point(cfg: Any, stop_ev: asyncio.Event) -> Any:
        counters = Progress()
        mode, value = cfg.load_label()
        bar = asyncio.ensure_future(
            show_progress(counters, expected_total(cfg.load), f"{mode} {value:g}", console)
        )
        try:
            pr = await run_profile(cfg, stop=stop_ev, progress=counters)
        finally:
            bar.cancel()
        if pr.artifact_dir is not None:
            await asyncio.to_thread(plot_point_telemetry, pr.summary, pr.artifact_dir)
            if records is not None:  # plots wanted (no --no-plots)
                await asyncio.to_thread(plot_point_timeseries, pr.timeseries, pr.artifact_dir)
                records[pr.artifact_dir.name] = pr.records
        return pr

    def on_point(res: SweepResult) -> None:
        last = res.runs[-1]
        if last.status == DONE:
            m = last.metrics()
            console.print(
                f"  {last.name}: OTT {format_value(m.ott)} tok/s, "
                f"p99 TTFT {format_value(m.ttft_p99_ms)} ms, "
                f"p99 ITL {format_value(m.itl_p99_ms)} ms, RPS {format_value(m.rps)}"
            )
            for line in validity_lines(last.summary) if last.summary is not None else []:
                console.print(f"    {line}")
        write_exports(res.run_dir, analysis(res))

    try:
        return await run_sweep(
            spec, run_dir, model=model, run_point=point, stop=stop, notify=console.print,
            restart=restart, api_key=api_key, headers=headers, on_point=on_point,
            preflight=preflight, point_options=point_options,
        )
    finally:
        undo()


def run(args: argparse.Namespace) -> int:
    """The ``analyze`` subcommand (see the module docstring for exit codes)."""
    from llmbench.runner.client import eventloop
    from llmbench.runner.point.config import point_config
    from llmbench.runner.point.preflight import ProfileError, preflight
    from llmbench.runner.report.console import stderr_console

    console = stderr_console()
    prog = "llmbench analyze"
    name = None
    options: dict[str, Any] = {}
    try:
        for note in profile_cli.check_genai_perf_flags(args):
            print(f"{prog}: note: {note}", file=sys.stderr)
        if args.profile_export_file is not None:
            raise ValueError(
                "--profile-export-file: applies to llmbench profile; analyze keeps GenAI-Perf's "
                "default file names in each point folder (the sweep reads them back)"
            )
        api_key = read_api_key(args)
        headers = parse_headers(args.header)
        if args.file is not None:
            spec, name = spec_from_file(args.file)
            collector = collector_for_spec(spec, args)
            if spec.target.api_key_secret_ref is not None and api_key is None:
                console.print(
                    "[yellow]target.apiKeySecretRef is set; locally pass the key with "
                    "--api-key-env NAME or --api-key-file PATH[/yellow]"
                )
        else:
            spec = spec_from_args(args)
            collector = telemetry_flags.collector_from_args(args, spec.target.base_url())
        if collector is not None:
            options["telemetry"] = collector
        cfg0 = point_config(spec, spec.points()[0], api_key=api_key, headers=headers)
        cfg0.preflight_timeout_s = options["preflight_timeout_s"] = args.preflight_timeout
        eventloop.loop_factory(args.event_loop)
    except ValueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    plots = not args.no_plots
    # the request records of the runs measured here, for the plots (resumed runs' are read
    # from their folders)
    measured: dict[str, list[RequestRecord]] | None = {} if plots else None
    try:
        if args.preflight:
            model = preflight(cfg0)
        elif cfg0.model is None:
            print(f"{prog}: error: --no-preflight needs -m/--model", file=sys.stderr)
            return 2
        else:
            model = cfg0.model
        run_dir = _run_dir(args, spec, model, name)
        result = eventloop.run(
            _main(
                spec, run_dir, model, args.restart, api_key, headers, console, args.preflight,
                options, measured,
            ),
            args.event_loop,
        )
    except ProfileError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    except CheckpointError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # bad workload input found while preparing a point
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    data = analysis(result)
    write_exports(run_dir, data)
    print_summary(data, console)
    console.print(f"results: {run_dir / ANALYZE_CSV}")
    if plots and result.runs:
        try:
            from llmbench.runner.report.html import REPORT_HTML, render_report, saved_records

            saved = saved_records(run_dir)
            kept = measured or {}
            html = render_report(
                result, data, lambda name: kept[name] if name in kept else saved(name),
                run_dir / REPORT_HTML,
            )
            console.print(f"report: {html}")
        except Exception as exc:  # plots are a convenience; the CSV/JSON are the results
            console.print(f"[yellow]plots/report skipped: {type(exc).__name__}: {exc}[/yellow]")
    if result.interrupted:
        console.print("[yellow]interrupted: run the same command again to resume[/yellow]")
        return 130
    return 1 if data.failed_points else 0
