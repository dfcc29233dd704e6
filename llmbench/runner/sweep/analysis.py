"""``llmbench analyze``: sweep a load dimension and answer "how much load before the SLO breaks".

GenAI-Perf's ``analyze`` with the questions people run it for answered in the output: the knee
(:mod:`.knee`), the highest-throughput point that meets every SLO and the first one that does
not, the spread of repeated points, and the cost per million output tokens. The sweep itself
is :mod:`.sweep`; the benchmark definition is the one spec model (:mod:`.spec`), built either
from the ``profile`` flags plus sweep flags or from an ``LLMBenchmark`` manifest (``-f``), so a
file that runs in the cluster runs here too.

Outputs in the run folder: one GenAI-Perf folder per point, ``checkpoint.json``,
``analyze_export_genai_perf.csv`` (table 1, and table 2 per GPU when telemetry exists),
``analyze_export_genai_perf.json`` (everything, read back by ``report`` and ``compare``), PNG
plots and ``report.html``.

Exit codes: 0 every point measured; 1 a point failed (or the target is unreachable);
2 usage error; 130 interrupted (run the same command again to resume).
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import io
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from llmbench.runner.point.artifacts import write_atomic
from llmbench.runner.spec import SWEEP_TYPES, Cost, Slo, Spec, SpecError, Sweep
from llmbench.runner.sweep.knee import (
    SloResult,
    find_knee,
    knee_message,
    max_under_slo,
    slo_message,
    value_label,
)
from llmbench.runner.sweep.run import (
    CHECKPOINT,
    DONE,
    PointRun,
    SweepError,
    SweepResult,
    parse_sweep_list,
    point_name,
    read_checkpoint,
    sweep_values,
)
from llmbench.runner.telemetry import GPU_SUMMARY_COLUMNS, format_gpu_row

__all__ = [
    "ANALYZE_CSV",
    "ANALYZE_JSON",
    "TABLE1_COLUMNS",
    "add_arguments",
    "analysis",
    "analyze_csv",
    "load_sweep",
    "run",
    "write_outputs",
]

ANALYZE_CSV = "analyze_export_genai_perf.csv"
ANALYZE_JSON = "analyze_export_genai_perf.json"

#: GenAI-Perf's table 1 columns, always first and in this order.
TABLE1_COLUMNS = (
    "Config Name",
    "Concurrency",
    "ISL",
    "p99 TTFT (ms)",
    "p99 ITL (ms)",
    "p99 Request Latency (ms)",
    "Avg. OTT (tok/s)",
    "RPS",
)

#: ``--slo`` keys → Slo attribute.
SLO_FLAG_KEYS = {
    "ttft_p99": "ttft_p99_ms",
    "itl_p99": "itl_p99_ms",
    "e2e_p99": "e2e_p99_ms",
    "goodput_ratio": "goodput_ratio",
}

KNEE_SWEEPS = ("concurrency", "request_rate")


# ----------------------------------------------------------------------------------------------
# command line
# ----------------------------------------------------------------------------------------------


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``profile``'s flags (applied to every point) plus the sweep, SLO and cost flags."""
    from llmbench.cli import add_profile_arguments

    add_profile_arguments(p)
    s = p.add_argument_group("sweep")
    s.add_argument(
        "-f",
        "--file",
        type=Path,
        metavar="MANIFEST",
        help="run an LLMBenchmark manifest (or bare spec) locally; it defines target, "
        "workload, load, sweep, SLO and cost, and the matching flags are ignored",
    )
    s.add_argument(
        "--sweep-type",
        default="concurrency",
        help=f"swept quantity: {', '.join(SWEEP_TYPES)} (default concurrency)",
    )
    s.add_argument(
        "--sweep-range",
        metavar="START:END[:STEP]",
        help="concurrency without STEP: powers of two (1:256 -> 1,2,4,..,256); other types "
        "without STEP: 8 evenly spaced values. Default: concurrency 1:256",
    )
    s.add_argument("--sweep-list", metavar="A,B,C", help="explicit values instead of a range")
    s.add_argument(
        "--repetitions",
        type=int,
        default=1,
        help="runs per point; mean and spread reported, spread > 10%% flagged",
    )
    s.add_argument(
        "--stop-after-knee", action="store_true", help="end the sweep one point past the knee"
    )
    s.add_argument(
        "--on-point-failure",
        choices=("continue", "stop"),
        default="continue",
        help="a point that fails entirely (server down): go on or stop (default continue)",
    )
    s.add_argument(
        "--restart",
        action="store_true",
        help="ignore an existing checkpoint.json and run every point again",
    )
    a = p.add_argument_group("analysis")
    a.add_argument(
        "--slo",
        nargs="+",
        default=[],
        metavar="KEY:VALUE",
        help="ttft_p99:MS itl_p99:MS e2e_p99:MS goodput_ratio:0-1 (also counted as goodput)",
    )
    a.add_argument("--price-per-hour", type=float, metavar="P", help="price of the deployment")
    a.add_argument("--currency", default="EUR", help="currency label of --price-per-hour")
    a.add_argument("--no-plots", action="store_true", help="skip PNG plots and report.html")


def parse_slo_flag(items: Sequence[str]) -> Slo:
    """``ttft_p99:500 itl_p99:50`` -> :class:`Slo`; ValueError naming ``--slo``."""
    from llmbench.cli import parse_limits

    values = parse_limits(items, "--slo", tuple(SLO_FLAG_KEYS))
    if values.get("goodput_ratio", 0) > 1:
        raise ValueError("--slo goodput_ratio: a fraction of requests, at most 1")
    return Slo(**{SLO_FLAG_KEYS[k]: v for k, v in values.items()})


def spec_from_args(args: argparse.Namespace) -> tuple[Spec, Any]:
    """The spec of a flag-driven analyze, and the base ProfileConfig (credentials, headers).

    Raises ValueError naming the flag.
    """
    from llmbench.cli import profile_config_from_args

    sweep_type = args.sweep_type
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
    sweep_values(sweep_type, rng, values)  # raises naming --sweep-range / --sweep-list
    if sweep_type == "concurrency" and args.concurrency is not None:
        raise ValueError("--concurrency: the sweep sets it; drop it or sweep something else")
    if sweep_type == "concurrency" and args.request_rate is not None:
        raise ValueError("--request-rate cannot be combined with --sweep-type concurrency")
    if args.repetitions < 1:
        raise ValueError(f"--repetitions must be at least 1, got {args.repetitions}")
    if args.price_per_hour is not None and not args.price_per_hour > 0:
        raise ValueError("--price-per-hour must be greater than 0")
    ns = argparse.Namespace(**vars(args))
    if sweep_type == "request_rate" and ns.request_rate is None:
        ns.request_rate = 1.0  # a placeholder: each point sets its own rate
    slo = parse_slo_flag(args.slo)
    if not slo.per_request() and args.goodput:
        from llmbench.cli import parse_slo

        g = parse_slo(args.goodput)
        slo = Slo(ttft_p99_ms=g.get("ttft"), itl_p99_ms=g.get("itl"), e2e_p99_ms=g.get("e2e"))
    base = profile_config_from_args(ns)
    spec = Spec.from_profile_config(base)
    if args.request_count is None:
        spec.load.request_count = None  # per point: max(100, 4 x concurrency)
    spec.sweep = Sweep(
        type=sweep_type,
        range=rng if values is None else None,
        values=values,
        stop_after_knee=args.stop_after_knee,
        on_point_failure=args.on_point_failure,
    )
    spec.repetitions = args.repetitions
    spec.slo = slo
    spec.cost = Cost(price_per_hour=args.price_per_hour, currency=args.currency)
    try:
        spec.validate()
    except SpecError as exc:
        raise ValueError(str(exc)) from None
    return spec, base


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


# ----------------------------------------------------------------------------------------------
# analysis and tables
# ----------------------------------------------------------------------------------------------


def _f(v: float | None, digits: int = 2) -> str:
    return "N/A" if v is None else f"{v:.{digits}f}"


def cost_per_million(ott: float | None, price_per_hour: float | None) -> float | None:
    """P / (OTT x 3600) x 10^6: what a million output tokens cost at this point's throughput."""
    if price_per_hour is None or not ott:
        return None
    return price_per_hour / (ott * 3600.0) * 1e6


def config_name(result: SweepResult, value: float) -> str:
    """The point's name without the repetition suffix (one CSV row per value)."""
    name = point_name(result.spec, result.model, result.sweep_type, value, 1)
    return name[: -len("-rep1")] if result.spec.repetitions > 1 else name


def _energy(runs: Sequence[PointRun]) -> float | None:
    """Joules per output token (mean over repetitions) from the telemetry efficiency figures."""
    values = []
    for r in runs:
        eff = ((r.summary or {}).get("telemetry") or {}).get("efficiency") or {}
        if r.status == DONE and eff.get("joules_per_output_token") is not None:
            values.append(float(eff["joules_per_output_token"]))
    return sum(values) / len(values) if values else None


def analysis(result: SweepResult) -> dict[str, Any]:
    """Knee, SLO verdicts, spreads and cost of a sweep: the content of the JSON export."""
    spec = result.spec
    groups = result.by_value()
    aggregated = result.points()
    metrics = [m for m, _ in aggregated]
    limits = spec.slo.limits()
    knee = (
        find_knee(metrics, sweep_type=result.sweep_type)
        if result.sweep_type in KNEE_SWEEPS
        else None
    )
    if result.sweep_type in KNEE_SWEEPS:
        kmsg = knee_message(knee, metrics, result.sweep_type)
    else:
        kmsg = f"knee: not applicable to {result.sweep_type} sweeps (the rule reads load sweeps)"
    slo: SloResult | None = max_under_slo(metrics, limits) if limits else None
    price = spec.cost.price_per_hour
    points = []
    for i, (group, (m, spreads)) in enumerate(zip(groups, aggregated, strict=True)):
        entry: dict[str, Any] = {
            "name": config_name(result, m.value),
            "value": m.value,
            "label": value_label(result.sweep_type, m.value),
            "status": "failed" if m.failed else "ok",
            "reason": m.failed,
            "runs": [
                {"name": r.name, "status": r.status, "reason": r.reason, "resumed": r.resumed}
                for r in group
            ],
            "metrics": {**asdict(m), "goodput_ratio": m.goodput_ratio},
            "spreads": {k: s.to_json() for k, s in spreads.items()},
            "unstable": sorted(k for k, s in spreads.items() if s.unstable and s.n > 1),
            "cost_per_million_output_tokens": cost_per_million(m.ott, price),
            "joules_per_output_token": _energy(group),
            "isl": _isl(result, m.value, group),
            "achieved_request_rate": _achieved_rate(group),
        }
        if slo is not None:
            entry["meets_slo"] = slo.passed(i)
            entry["violations"] = [str(v) for v in slo.violations[i]]
        points.append(entry)
    out: dict[str, Any] = {
        "model": result.model,
        "sweep_type": result.sweep_type,
        "values": result.values,
        "repetitions": spec.repetitions,
        "spec": spec.to_dict(),
        "points": points,
        "knee": (
            {"index": knee.index, "value": knee.value, "rules": list(knee.rules),
             "details": list(knee.details), "name": points[knee.index]["name"]}
            if knee is not None
            else None
        ),
        "knee_message": kmsg,
        "slo": None,
        "cost": {"price_per_hour": price, "currency": spec.cost.currency},
        "interrupted": result.interrupted,
        "stopped_after_knee": result.stopped_after_knee,
        "stopped_on_failure": result.stopped_on_failure,
        "resumed": list(result.resumed),
        "failed_points": [p["name"] for p in points if p["status"] == "failed"],
    }
    if slo is not None:
        out["slo"] = {
            "limits": limits,
            "best_index": slo.best,
            "best": points[slo.best]["name"] if slo.best is not None else None,
            "max_ott": metrics[slo.best].ott if slo.best is not None else None,
            "first_failure_index": slo.first_failure,
            "first_failure": (
                points[slo.first_failure]["name"] if slo.first_failure is not None else None
            ),
            "messages": slo_message(slo, metrics, limits, result.sweep_type),
        }
    return out


def _achieved_rate(group: Sequence[PointRun]) -> float | None:
    """Mean achieved send rate of an open-loop point: a client that fell behind shows here."""
    rates = [
        ((r.summary or {}).get("dispatch") or {}).get("achieved_request_rate")
        for r in group
        if r.status == DONE
    ]
    nums = [float(v) for v in rates if v is not None]
    return sum(nums) / len(nums) if nums else None


def _isl(result: SweepResult, value: float, group: Sequence[PointRun]) -> float | None:
    """The ISL column: the swept length, the synthetic mean, or the measured mean (input file)."""
    if result.sweep_type == "input_sequence_length":
        return value
    if result.spec.workload.input_file is None:
        return float(result.spec.workload.input_tokens.mean)
    vals = [
        ((r.summary or {}).get("input_sequence_length") or {}).get("avg")
        for r in group
        if r.status == DONE
    ]
    nums = [v for v in vals if v is not None]
    return sum(nums) / len(nums) if nums else None


def table1_columns(data: dict[str, Any]) -> list[str]:
    """Table 1 header: GenAI-Perf's eight columns, then ours when they apply."""
    cols = list(TABLE1_COLUMNS)
    st = data["sweep_type"]
    if st == "request_rate":
        cols += ["Request Rate (req/s)", "Achieved Rate (req/s)"]
    if st == "output_sequence_length":
        cols.append("OSL")
    if data["slo"] is not None:
        cols += ["Goodput (req/s)", "Meets SLO"]
    if data["cost"]["price_per_hour"] is not None:
        cols.append(f"Cost per 1M Output Tokens ({data['cost']['currency']})")
    if any(p["joules_per_output_token"] is not None for p in data["points"]):
        cols.append("Energy per Output Token (J)")
    if data["repetitions"] > 1:
        cols += ["Repetitions", "Max Spread (%)", "Unstable Metrics"]
    cols.append("Status")
    return cols


def _table1_row(data: dict[str, Any], p: dict[str, Any]) -> dict[str, str]:
    m = p["metrics"]
    spec = data["spec"]
    st = data["sweep_type"]
    load = spec.get("load", {})
    if st == "concurrency":
        conc = f"{p['value']:g}"
    elif st == "request_rate" or load.get("mode") == "request_rate":
        mc = load.get("maxConcurrency")
        conc = str(mc) if mc is not None else "N/A"
    else:
        conc = str(load.get("concurrency", 1))
    row = {
        "Config Name": p["name"],
        "Concurrency": conc,
        "ISL": "N/A" if p["isl"] is None else f"{p['isl']:g}",
        "p99 TTFT (ms)": _f(m["ttft_p99_ms"]),
        "p99 ITL (ms)": _f(m["itl_p99_ms"]),
        "p99 Request Latency (ms)": _f(m["e2e_p99_ms"]),
        "Avg. OTT (tok/s)": _f(m["ott"]),
        "RPS": _f(m["rps"]),
        "Request Rate (req/s)": f"{p['value']:g}",
        "Achieved Rate (req/s)": _f(p.get("achieved_request_rate")),
        "OSL": f"{p['value']:g}",
        "Goodput (req/s)": _f(m["goodput"]),
        "Meets SLO": "yes" if p.get("meets_slo") else "no",
        f"Cost per 1M Output Tokens ({data['cost']['currency']})": _f(
            p["cost_per_million_output_tokens"], 4
        ),
        "Energy per Output Token (J)": _f(p["joules_per_output_token"], 4),
        "Repetitions": str(len([r for r in p["runs"] if r["status"] == DONE])),
        "Max Spread (%)": _f(
            max((s["spread_pct"] for s in p["spreads"].values()), default=None), 1
        ),
        "Unstable Metrics": " ".join(p["unstable"]),
        "Status": "ok" if p["status"] == "ok" else f"failed: {p['reason']}",
    }
    return row


def telemetry_rows(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Table 2 rows (one per GPU) of one point, from its summary's ``telemetry`` section.

    Absent telemetry means no rows, so no table 2.
    """
    from llmbench.runner.telemetry import gpu_summary_rows_from_json

    return gpu_summary_rows_from_json(summary.get("telemetry") or {})


#: Table 2: the point, then telemetry's per-GPU columns (GenAI-Perf's GPU table).
TABLE2_COLUMNS = ("Config Name", *GPU_SUMMARY_COLUMNS)


def analyze_csv(data: dict[str, Any], result: SweepResult | None = None) -> str:
    """``analyze_export_genai_perf.csv``: table 1, and table 2 (per point and GPU) if any."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    cols = table1_columns(data)
    w.writerow(cols)
    for p in data["points"]:
        row = _table1_row(data, p)
        w.writerow([row[c] for c in cols])
    if result is not None:
        t2: list[list[str]] = []
        for r in result.runs:
            if r.status != DONE or r.summary is None:
                continue
            for g in telemetry_rows(r.summary):
                t2.append([r.name, *format_gpu_row(g)])
        if t2:
            w.writerow([])
            w.writerow(TABLE2_COLUMNS)
            w.writerows(t2)
    return buf.getvalue()


def write_outputs(result: SweepResult) -> dict[str, Any]:
    """Writes the CSV and JSON exports into the run folder; returns the analysis."""
    data = analysis(result)
    write_atomic(result.run_dir / ANALYZE_JSON, json.dumps(data, indent=1))
    write_atomic(result.run_dir / ANALYZE_CSV, analyze_csv(data, result))
    return data


def load_sweep(run_dir: Path) -> SweepResult:
    """A sweep rebuilt from its folder (``analyze_export_genai_perf.json`` + checkpoint + points).

    Raises ValueError naming the file that is missing or unreadable.
    """
    jpath = run_dir / ANALYZE_JSON
    try:
        data = json.loads(jpath.read_text(encoding="utf-8"))
    except OSError:
        raise ValueError(
            f"{jpath}: not found; is {run_dir} an `llmbench analyze` folder?"
        ) from None
    except ValueError as exc:
        raise ValueError(f"{jpath}: not valid JSON ({exc})") from None
    spec = Spec.from_manifest(data["spec"])
    try:
        ckpt = read_checkpoint(run_dir / CHECKPOINT) or {"points": {}}
    except SweepError as exc:
        raise ValueError(str(exc)) from None
    result = SweepResult(spec, run_dir, data["model"], data["sweep_type"], list(data["values"]))
    result.interrupted = bool(data.get("interrupted"))
    result.stopped_after_knee = bool(data.get("stopped_after_knee"))
    result.stopped_on_failure = bool(data.get("stopped_on_failure"))
    from llmbench.runner.point.artifacts import GENAI_PERF_JSON

    for name, info in ckpt["points"].items():
        summary = None
        status = info.get("status")
        reason = info.get("reason")
        if status == DONE:
            try:
                summary = json.loads((run_dir / name / GENAI_PERF_JSON).read_text("utf-8"))
            except (OSError, ValueError):
                status, reason = "failed", f"{name}/{GENAI_PERF_JSON} missing or unreadable"
        result.runs.append(
            PointRun(name, float(info["value"]), int(info.get("repetition", 1)), status, reason,
                     summary)
        )
    order = {v: i for i, v in enumerate(result.values)}
    result.runs.sort(key=lambda r: (order.get(r.value, 1e9), r.repetition))
    return result


# ----------------------------------------------------------------------------------------------
# console
# ----------------------------------------------------------------------------------------------


#: Console headers for table 1 columns (the terminal is narrower than a CSV).
_SHORT = {
    "Concurrency": "conc",
    "ISL": "ISL",
    "p99 TTFT (ms)": "TTFT p99\nms",
    "p99 ITL (ms)": "ITL p99\nms",
    "p99 Request Latency (ms)": "e2e p99\nms",
    "Avg. OTT (tok/s)": "OTT\ntok/s",
    "RPS": "RPS",
    "Request Rate (req/s)": "rate\n/s",
    "Achieved Rate (req/s)": "achieved\n/s",
    "OSL": "OSL",
    "Goodput (req/s)": "goodput\n/s",
    "Meets SLO": "SLO",
    "Energy per Output Token (J)": "J/tok",
    "Repetitions": "reps",
    "Max Spread (%)": "spread\n%",
}


def print_summary(data: dict[str, Any], console: Any) -> None:
    """The sweep table (knee and SLO marked), then the knee, SLO and spread lines."""
    from rich.table import Table

    skip = ("Config Name", "Status", "Unstable Metrics")
    cols = [c for c in table1_columns(data) if c not in skip]
    table = Table(title=f"llmbench analyze | {data['model']} | {data['sweep_type']} sweep")
    for c in cols:
        label = _SHORT.get(c) or ("cost/1M\n" + data["cost"]["currency"])
        table.add_column(label, justify="right", no_wrap=True)
    table.add_column("note")
    knee = data["knee"]
    slo = data["slo"]
    for i, p in enumerate(data["points"]):
        row = _table1_row(data, p)
        marks = []
        if knee is not None and knee["index"] == i:
            marks.append("[yellow]knee[/yellow]")
        if slo is not None and slo["best_index"] == i:
            marks.append("[green]best under SLO[/green]")
        if p["status"] != "ok":
            marks.append(f"[red]failed: {p['reason']}[/red]")
        if p["unstable"]:
            marks.append(f"[yellow]spread > 10%: {' '.join(p['unstable'])}[/yellow]")
        if data["sweep_type"] == "concurrency":
            row["Concurrency"] = f"[cyan]{row['Concurrency']}[/cyan]"
        table.add_row(*(row[c] for c in cols), " ".join(marks))
    console.print(table)
    console.print(data["knee_message"])
    if slo is not None:
        for line in slo["messages"]:
            console.print(line)
    price = data["cost"]["price_per_hour"]
    if price is not None:
        best = slo["best_index"] if slo is not None and slo["best_index"] is not None else None
        if best is not None:
            c = data["points"][best]["cost_per_million_output_tokens"]
            console.print(
                f"cost at max load under SLO: {_f(c, 4)} {data['cost']['currency']} "
                f"per million output tokens ({price:g} {data['cost']['currency']}/h)"
            )
    if data["stopped_after_knee"]:
        console.print("sweep stopped one point past the knee (--stop-after-knee)")
    if data["failed_points"]:
        console.print(f"[red]failed points: {', '.join(data['failed_points'])}[/red]")


# ----------------------------------------------------------------------------------------------
# run
# ----------------------------------------------------------------------------------------------


def collector_for_spec(spec: Spec, args: argparse.Namespace) -> Any:
    """The telemetry collector a manifest asks for, run locally.

    ``telemetry.dcgm`` as a URL is scraped; ``auto`` needs the operator (it finds the node's
    exporter), so locally it means none. ``telemetry.serverMetrics`` maps onto
    ``--target-metrics``. Interval, timeout and GPU filters come from the telemetry flags.
    """
    from llmbench.runner.telemetry import collector_from_args

    ns = argparse.Namespace(**vars(args))
    dcgm = spec.telemetry.dcgm
    ns.server_metrics_url = [
        *(getattr(args, "server_metrics_url", []) or []),
        *([dcgm] if dcgm not in ("auto", "off") else []),
    ]
    ns.target_metrics = spec.telemetry.server_metrics
    return collector_from_args(ns, spec.target.base_url(getattr(spec, "_namespace", None)))


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
) -> SweepResult:
    from llmbench.runner.load.engine import Progress, expected_total
    from llmbench.runner.point.profile import install_stop_signals, run_profile
    from llmbench.runner.report.console import show_progress
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
            return await run_profile(cfg, stop=stop_ev, progress=counters)
        finally:
            bar.cancel()

    def on_point(res: SweepResult) -> None:
        last = res.runs[-1]
        if last.status == DONE:
            m = last.metrics()
            console.print(
                f"  {last.name}: OTT {_f(m.ott)} tok/s, p99 TTFT {_f(m.ttft_p99_ms)} ms, "
                f"p99 ITL {_f(m.itl_p99_ms)} ms, RPS {_f(m.rps)}"
            )
        write_outputs(res)

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
    from llmbench.cli import _read_api_key
    from llmbench.runner.point.profile import ProfileError, preflight
    from llmbench.runner.report.console import stderr_console

    console = stderr_console()
    prog = "llmbench analyze"
    name = None
    options: dict[str, Any] = {}
    try:
        if args.file is not None:
            spec, name = spec_from_file(args.file)
            api_key = _read_api_key(args)
            headers = {}
            for h in args.header:
                k, sep, v = h.partition(":")
                if not sep or not k.strip():
                    raise ValueError(f"-H/--header {h!r}: expected NAME:VALUE")
                headers[k.strip()] = v.strip()
            collector = collector_for_spec(spec, args)
            if collector is not None:
                options["telemetry"] = collector
            if spec.target.api_key_secret_ref is not None and api_key is None:
                console.print(
                    "[yellow]target.apiKeySecretRef is set; locally pass the key with "
                    "--api-key-env NAME or --api-key-file PATH[/yellow]"
                )
        else:
            spec, base = spec_from_args(args)
            api_key, headers = base.api_key, base.headers
            if getattr(base, "telemetry", None) is not None:
                options["telemetry"] = base.telemetry  # the telemetry flags' collector
        first = spec.points()[0]
        cfg0 = spec.to_profile_config(first, api_key=api_key, headers=headers)
    except ValueError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    try:
        if args.preflight:
            model = preflight(cfg0)
        elif cfg0.model is None:
            print(f"{prog}: error: --no-preflight needs -m/--model", file=sys.stderr)
            return 2
        else:
            model = cfg0.model
        run_dir = _run_dir(args, spec, model, name)
        result = asyncio.run(
            _main(
                spec, run_dir, model, args.restart, api_key, headers, console, args.preflight,
                options,
            )
        )
    except ProfileError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 1
    except SweepError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:  # bad workload input found while preparing a point
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    data = write_outputs(result)
    print_summary(data, console)
    console.print(f"results: {run_dir / ANALYZE_CSV}")
    if not args.no_plots and result.runs:
        try:
            from llmbench.runner.report.html import build_report

            html = build_report(run_dir)
            console.print(f"report: {html}")
        except Exception as exc:  # plots are a convenience; the CSV/JSON are the results
            console.print(f"[yellow]plots/report skipped: {type(exc).__name__}: {exc}[/yellow]")
    if result.interrupted:
        console.print("[yellow]interrupted: run the same command again to resume[/yellow]")
        return 130
    return 1 if data["failed_points"] else 0
