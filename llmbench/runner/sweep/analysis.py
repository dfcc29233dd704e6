"""What a finished sweep means: the knee, max load under SLO, spreads and cost, as tables.

GenAI-Perf's ``analyze`` with the questions people run it for answered in the output: the knee
(:mod:`.knee`), the highest-throughput point that meets every SLO and the first one that does
not, the spread of repeated points, and the cost per million output tokens. Running the sweep
is :mod:`.run`; the command line that drives both is :mod:`llmbench.cli.analyze`.

:func:`analysis` is computed once per state of the sweep and handed to every output, so they
cannot disagree: :func:`write_exports` writes ``analyze_export_genai_perf.csv`` (GenAI-Perf's
two tables, :func:`summary_csv` of the analysis alone: the operator's ``status.summaryCSV`` is
the same text) and ``analyze_export_genai_perf.json`` (everything, the model
:class:`~llmbench.api.results.SweepAnalysis`, read back by ``report`` and ``compare``); the run
digest and the HTML report take the same object.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from llmbench.api.results import (
    GPU_SUMMARY_COLUMNS,
    CostSummary,
    GpuRow,
    KneeSummary,
    PointResult,
    RunInfo,
    SearchProbe,
    SearchSummary,
    SloVerdict,
    SweepAnalysis,
    SweepPoint,
    WorkloadSummary,
)
from llmbench.runner.artifacts.write import write_atomic
from llmbench.runner.labels import (
    METRIC_LABELS,
    format_gpu_row,
    format_value,
    genai_perf_number,
)
from llmbench.runner.sweep.knee import (
    PointMetrics,
    SloResult,
    find_knee,
    knee_message,
    latency_from,
    max_under_slo,
    slo_message,
    value_label,
)
from llmbench.runner.sweep.pareto import pareto_summary
from llmbench.runner.sweep.run import (
    DONE,
    PointRun,
    SweepResult,
    point_name,
    probe_verdicts,
)
from llmbench.runner.sweep.search import (
    RELATIVE_RATE_RESOLUTION,
    bounds,
    grid_points,
    next_probe,
    search_plan,
)

__all__ = [
    "ANALYZE_CSV",
    "ANALYZE_JSON",
    "ARTICLE_NAMES",
    "GENAI_PERF_COLUMNS",
    "TABLE1_COLUMNS",
    "TABLE2_COLUMNS",
    "analysis",
    "findings",
    "run_info",
    "summary_csv",
    "write_exports",
]

ANALYZE_CSV = "analyze_export_genai_perf.csv"
ANALYZE_JSON = "analyze_export_genai_perf.json"

_L = METRIC_LABELS
_GOODPUT_COLUMN = f"{_L['goodput'].name} ({_L['goodput'].unit})"
#: Table 1 columns that show a PointMetrics figure -> (PointResult field, PointMetrics
#: attribute), with GenAI-Perf 0.0.16's headers (its ``Record.header()`` strings).
METRIC_COLUMNS: dict[str, tuple[str, str]] = {
    "p99 Time To First Token (ms)": ("time_to_first_token", "ttft_p99_ms"),
    "p99 Inter Token Latency (ms)": ("inter_token_latency", "itl_p99_ms"),
    "p99 Request Latency (ms)": ("request_latency", "e2e_p99_ms"),
    "Avg. Output Token Throughput (tokens/sec)": ("output_token_throughput", "ott"),
    "Request Throughput (requests/sec)": ("request_throughput", "rps"),
    _GOODPUT_COLUMN: ("goodput", "goodput"),
}
_OSL_COLUMN = "p99 Output Sequence Length (tokens)"

#: GenAI-Perf's metric columns of table 1, in its order (after the stimulus columns).
GENAI_PERF_COLUMNS = (
    "p99 Time To First Token (ms)",
    "p99 Inter Token Latency (ms)",
    "p99 Request Latency (ms)",
    _OSL_COLUMN,
    "Avg. Output Token Throughput (tokens/sec)",
    "Request Throughput (requests/sec)",
)

#: GenAI-Perf's table 1 header of a concurrency sweep, always first and in this order; a
#: request-rate load says ``Request Rate`` in the second column.
TABLE1_COLUMNS = ("Config Name", "Concurrency", "ISL", "Num Dataset Entries", *GENAI_PERF_COLUMNS)

#: The short names the GenAI-Perf article (the seed) uses for table 1's columns.
ARTICLE_NAMES = {
    "p99 Time To First Token (ms)": "p99 TTFT (ms)",
    "p99 Inter Token Latency (ms)": "p99 ITL (ms)",
    "p99 Request Latency (ms)": "p99 Request Latency (ms)",
    _OSL_COLUMN: "p99 OSL (tokens)",
    "Avg. Output Token Throughput (tokens/sec)": "Avg. OTT (tok/s)",
    "Request Throughput (requests/sec)": "RPS",
}

KNEE_SWEEPS = ("concurrency", "request_rate")

#: Table 1's reasoning columns, where some answer of the sweep reasoned.
REASONING_COLUMNS = (
    f"p99 {_L['time_to_first_answer_token'].genai_perf}",
    f"Avg. {_L['reasoning_token_count'].genai_perf}",
)

#: Said with the SLO verdicts of open-loop points.
SCHEDULE_NOTE = (
    "SLO latencies judged from the scheduled send (open loop: the dispatch lag counts, as a "
    "user waits it)"
)



def cost_per_million(ott: float | None, price_per_hour: float | None) -> float | None:
    """P / (OTT x 3600) x 10^6: what a million output tokens cost at this point's throughput."""
    if price_per_hour is None or not ott:
        return None
    return price_per_hour / (ott * 3600.0) * 1e6


def config_name(result: SweepResult, value: float, workload: str | None = None) -> str:
    """The point's name without the repetition suffix (one CSV row per value)."""
    name = point_name(result.spec, result.model, result.sweep_type, value, 1, workload)
    return name[: -len("-rep1")] if result.spec.repetitions > 1 else name


def _mean(values: Sequence[float | None]) -> float | None:
    nums = [float(v) for v in values if v is not None]
    return sum(nums) / len(nums) if nums else None


def _done(runs: Sequence[PointRun]) -> list[PointResult]:
    return [r.summary for r in runs if r.status == DONE and r.summary is not None]


def _verdicts(
    sweep_type: str, metrics: Sequence[PointMetrics], points: Sequence[SweepPoint],
    limits: dict[str, float],
) -> tuple[KneeSummary | None, str, SloResult | None, SloVerdict | None]:
    """The knee and the max under SLO of one load axis (the whole sweep, or one workload's
    points): its summary, message, SLO result (for the points' verdicts) and summary."""
    knee = find_knee(metrics, sweep_type=sweep_type) if sweep_type in KNEE_SWEEPS else None
    if sweep_type in KNEE_SWEEPS:
        kmsg = knee_message(knee, metrics, sweep_type)
    else:
        kmsg = f"knee: not applicable to {sweep_type} sweeps (the rule reads load sweeps)"
    slo: SloResult | None = max_under_slo(metrics, limits) if limits else None
    knee_summary = (
        KneeSummary(index=knee.index, value=knee.value, rules=list(knee.rules),
                    details=list(knee.details), name=points[knee.index].name)
        if knee is not None
        else None
    )
    verdict = (
        SloVerdict(
            limits=limits,
            best_index=slo.best,
            best=points[slo.best].name if slo.best is not None else None,
            max_ott=metrics[slo.best].ott if slo.best is not None else None,
            first_failure_index=slo.first_failure,
            first_failure=(
                points[slo.first_failure].name if slo.first_failure is not None else None
            ),
            messages=slo_message(slo, metrics, limits, sweep_type) + (
                [SCHEDULE_NOTE] if latency_from(metrics) == "schedule" else []
            ),
            latency_from=latency_from(metrics),
        )
        if slo is not None
        else None
    )
    return knee_summary, kmsg, slo, verdict


def analysis(result: SweepResult) -> SweepAnalysis:
    """Knee, SLO verdicts, spreads and cost of a sweep: the model of the JSON export.

    Two axes (``sweep.workloads``): the knee and the max under SLO per workload
    (:attr:`SweepAnalysis.workloads`), the whole grid's best point under SLO as ``slo``, no
    sweep-wide knee (the rule reads one load axis), and the Pareto view
    (:mod:`.pareto`).
    """
    spec = result.spec
    groups = result.by_value()
    aggregated = result.points()
    metrics = [m for m, _ in aggregated]
    limits = spec.slo.limits()
    two_axes = spec.sweep is not None and spec.sweep.workloads is not None
    slo: SloResult | None = max_under_slo(metrics, limits) if limits else None
    price = spec.cost.price_per_hour
    points = []
    for i, (group, (m, spreads)) in enumerate(zip(groups, aggregated, strict=True)):
        verdict: dict[str, Any] = {}
        if slo is not None:
            violations = [str(v) for v in slo.violations[i]]
            verdict = {"meets_slo": slo.passed(i), "violations": violations}
        workload = group[0].workload
        points.append(SweepPoint(
            name=config_name(result, m.value, workload),
            value=m.value,
            label=value_label(result.sweep_type, m.value),
            status="failed" if m.failed else "ok",
            reason=m.failed,
            runs=[run_info(r) for r in group],
            metrics=m,
            spreads=spreads,
            unstable=sorted(k for k, s in spreads.items() if s.unstable and s.n > 1),
            cost_per_million_output_tokens=cost_per_million(m.ott, price),
            joules_per_output_token=m.joules_per_output_token,
            isl=_isl(result, m.value, group),
            achieved_request_rate=_achieved_rate(group),
            **verdict,
            **_measured_lengths(group),
            **_shard_cells(group),
            **(_pareto_inputs(group) if two_axes else {}),
        ))
    two_axis: dict[str, Any] = {}  # optional keys: a one-axis file keeps its own
    if two_axes:
        per_workload = _workload_summaries(result, metrics, points, limits)
        two_axis = {"workloads": per_workload, "pareto": pareto_summary(points)}
        knee, kmsg = None, "knee: per workload (two-axis sweep): " + "; ".join(
            f"{w.label}: {w.knee_message}" for w in per_workload
        )
        _, _, _, slo_verdict = _verdicts(result.sweep_type, metrics, points, limits)
        if slo_verdict is not None:  # the grid's best; each workload's verdict in its words
            slo_verdict.messages = [
                f"{w.label}: {msg}" for w in per_workload if w.slo for msg in w.slo.messages
            ]
    else:
        knee, kmsg, _, slo_verdict = _verdicts(result.sweep_type, metrics, points, limits)
    return SweepAnalysis(
        model=result.model,
        sweep_type=result.sweep_type,
        values=result.values,
        repetitions=spec.repetitions,
        spec=spec.to_dict(),
        points=points,
        knee=knee,
        knee_message=kmsg,
        slo=slo_verdict,
        cost=CostSummary(price_per_hour=price, currency=spec.cost.currency),
        interrupted=result.interrupted,
        stopped_after_knee=result.stopped_after_knee,
        stopped_on_failure=result.stopped_on_failure,
        resumed=list(result.resumed),
        failed_points=[p.name for p in points if p.status == "failed"],
        search=search_summary(result, points),
        **two_axis,
    )


def _workload_summaries(
    result: SweepResult, metrics: Sequence[PointMetrics], points: Sequence[SweepPoint],
    limits: dict[str, float],
) -> list[WorkloadSummary]:
    """Each workload's points and its knee and max under SLO, as a one-axis sweep of its own
    would report them (workloads not reached yet have no points and no verdicts)."""
    assert result.spec.sweep is not None and result.spec.sweep.workloads is not None
    out = []
    for wl in result.spec.sweep.workloads:
        mine = [i for i, p in enumerate(points) if p.workload == wl.label]
        knee, kmsg, _, slo = _verdicts(
            result.sweep_type, [metrics[i] for i in mine], [points[i] for i in mine], limits
        )
        out.append(WorkloadSummary(
            label=wl.label, input_tokens=wl.input_tokens, output_tokens=wl.output_tokens,
            points=[points[i].name for i in mine], knee=knee, knee_message=kmsg, slo=slo,
        ))
    return out


def _pareto_inputs(group: Sequence[PointRun]) -> dict[str, Any]:
    """A two-axis point's workload, per-user output tokens/s (mean over repetitions) and kept
    GPU count (the most any repetition kept; absent without GPU telemetry)."""
    per_user = _mean([
        s.output_token_throughput_per_user.avg
        for s in _done(group)
        if s.output_token_throughput_per_user is not None
    ])
    gpus = max(
        (len(s.telemetry.gpus) for s in _done(group) if s.telemetry is not None), default=0
    )
    return {"workload": group[0].workload, "tokens_per_user": per_user, "gpus": gpus or None}


def search_summary(result: SweepResult, points: Sequence[SweepPoint]) -> SearchSummary | None:
    """The adaptive search's answer, probes and grid cost; None for a grid sweep.

    A probe is ``doubling`` up to and including the first failure, ``bisection`` after it.
    """
    plan = search_plan(result.spec)
    if plan is None:
        return None
    verdicts = probe_verdicts(result)
    by_value = {p.value: p for p in points}
    probes: list[SearchProbe] = []
    failed_yet = False
    for value, ok in verdicts:
        p = by_value[value]
        probes.append(SearchProbe(
            value=value, label=p.label, name=p.name,
            phase="bisection" if failed_yet else "doubling",
            meets_slo=ok, violations=list(p.violations or ()),
        ))
        failed_yet = failed_yet or not ok
    passed, failed = bounds(verdicts)
    converged = not result.interrupted and not result.stopped_on_failure and bool(verdicts) and (
        next_probe(plan, verdicts) is None
    )
    summary = SearchSummary(
        goal="maxUnderSlo",
        low=plan.low,
        high=plan.high,
        resolution=plan.resolution,
        relative_resolution=RELATIVE_RATE_RESOLUTION if plan.resolution is None else None,
        answer=passed,
        answer_name=by_value[passed].name if passed is not None else None,
        first_failing=failed,
        converged=converged,
        probes=probes,
        grid_points=grid_points(plan),
        message="",
    )
    summary.message = _search_message(result, summary)
    return summary


def _search_message(result: SweepResult, search: SearchSummary) -> str:
    """The search's answer in one line: the load, the first failing one, the probes it took
    against the grid's points."""
    st = result.sweep_type
    shown = ", ".join(f"{k} {v:g}" for k, v in result.spec.slo.limits().items())
    if not search.probes:
        return "max load under SLO: the search has not measured a point yet"
    if search.answer is None:
        message = (
            f"max load under SLO ({shown}): none; the range's start, "
            f"{value_label(st, search.low)}, already breaks it"
        )
    else:
        above = (
            f", first failing {value_label(st, search.first_failing)}"
            if search.first_failing is not None
            else f"; the SLO held to the range's end ({value_label(st, search.high)})"
        )
        message = f"max load under SLO ({shown}): {value_label(st, search.answer)}{above}"
    state = "" if search.converged else " (not finished: run the sweep again to resume)"
    return message + (
        f"; {len(search.probes)} probes at resolution {search.resolution_text}{state}, where a "
        f"grid of that resolution over the range needs {search.grid_points} points"
    )


def run_info(run: PointRun) -> RunInfo:
    """A run's status and, with GPU telemetry, its rows of GenAI-Perf's GPU table."""
    info = RunInfo(name=run.name, status=run.status, reason=run.reason, resumed=run.resumed)
    rows = telemetry_rows(run.summary) if run.status == DONE and run.summary else []
    if rows:
        info.gpus = [GpuRow.from_row(row) for row in rows]
    return info


def _measured_lengths(group: Sequence[PointRun]) -> dict[str, Any]:
    """Mean over the repetitions of the measured p99 ISL and OSL (keys only when measured)."""
    out: dict[str, Any] = {}
    for key, field in (("isl_p99", "input_sequence_length"), ("osl_p99", "output_sequence_length")):
        stats = [getattr(s, field) for s in _done(group)]
        value = _mean([st.p99 for st in stats if st is not None])
        if value is not None:
            out[key] = value
    return out


def _achieved_rate(group: Sequence[PointRun]) -> float | None:
    """Mean achieved send rate of an open-loop point: a client that fell behind shows here."""
    return _mean([
        s.dispatch.achieved_request_rate for s in _done(group) if s.dispatch is not None
    ])


def _isl(result: SweepResult, value: float, group: Sequence[PointRun]) -> float | None:
    """The ISL column: the swept length, the synthetic mean, or the measured mean (input file)."""
    if result.sweep_type == "input_sequence_length":
        return value
    sw = result.spec.sweep
    if sw is not None and sw.workloads is not None and group[0].workload is not None:
        return float(next(w.input_tokens for w in sw.workloads if w.label == group[0].workload))
    if result.spec.workload.input_file is None:
        return float(result.spec.workload.input_tokens.mean)
    return _mean([
        s.input_sequence_length.avg for s in _done(group) if s.input_sequence_length is not None
    ])


def _is_rate(data: SweepAnalysis) -> bool:
    """Whether the points ran open loop (GenAI-Perf's ``Request Rate`` stimulus column)."""
    load = data.spec.get("load", {})
    return data.sweep_type == "request_rate" or load.get("mode") == "request_rate"


def _shard_cells(group: Sequence[PointRun]) -> dict[str, Any]:
    """A several-pod point's replica count and per-pod ``achieved/target`` load (closed loop:
    mean requests in flight against slots; open loop: completed/s against the rate share), so
    an overloaded pod shows in the CSV; nothing for a single runner's point."""
    shards = [r.summary.shards for r in group if r.summary is not None and r.summary.shards]
    if not shards:
        return {}
    last = shards[-1]
    closed = not any(s.dispatch_lag_p99_ms is not None for s in last.shards)
    cells = []
    for s in last.shards:
        achieved = s.mean_in_flight if closed else s.achieved_rps
        cells.append(f"{format_value(achieved)}/{s.target:g}")
    return {"replicas": last.replicas, "shard_load": cells}


def table1_columns(data: SweepAnalysis) -> list[str]:
    """Table 1 header: GenAI-Perf's ten columns in its order, then ours when they apply."""
    cols = list(TABLE1_COLUMNS)
    if _is_rate(data):
        cols[1] = "Request Rate"
    st = data.sweep_type
    if st == "request_rate":
        cols.append("Achieved Rate (req/s)")
    if st == "output_sequence_length":
        cols.append("OSL")
    if data.slo is not None:
        cols += [_GOODPUT_COLUMN, "Meets SLO"]
    if data.cost.price_per_hour is not None:
        cols.append(f"Cost per 1M Output Tokens ({data.cost.currency})")
    if any(p.joules_per_output_token is not None for p in data.points):
        cols.append("Energy per Output Token (J)")
    if any(p.metrics.ttfa_p99_ms is not None or p.metrics.reasoning_tokens_avg is not None
           for p in data.points):
        cols += list(REASONING_COLUMNS)
    if data.workloads is not None:
        cols.append("Workload")
    if st in KNEE_SWEEPS:
        cols.append("Knee")
    if data.pareto is not None:
        cols += [PER_USER_COLUMN, _per_gpu_column(data), "Pareto Frontier"]
    if data.search is not None:
        cols += ["Search Probe", "Max Under SLO"]
    if data.repetitions > 1:
        cols += ["Repetitions", "Max Spread (%)", "Unstable Metrics"]
    if any(p.replicas for p in data.points):
        cols += ["Replicas", "Shard Load (achieved/target)"]
    cols.append("Status")
    return cols


#: Two-axis sweeps' Pareto columns (the y axis' header names its divisor).
PER_USER_COLUMN = "Output Tokens/s per User"


def _per_gpu_column(data: SweepAnalysis) -> str:
    basis = data.pareto.basis if data.pareto is not None else "run"
    return "Output Tokens/s per GPU" if basis == "gpu" else "Output Tokens/s per Run"


def _knee_names(data: SweepAnalysis) -> set[str]:
    """The knee point(s): the sweep's, or each workload's on two axes."""
    knees = [data.knee] + [w.knee for w in data.workloads or ()]
    return {k.name for k in knees if k is not None}


def _pareto_cells(data: SweepAnalysis, p: SweepPoint) -> dict[str, str]:
    """A two-axis point's Pareto cells: both axes and ``yes`` on the frontier."""
    if data.pareto is None:
        return {}
    mine = next((q for q in data.pareto.points if q.name == p.name), None)
    return {
        PER_USER_COLUMN: format_value(mine.tokens_per_user if mine else None),
        _per_gpu_column(data): format_value(mine.tokens_per_second if mine else None),
        "Pareto Frontier": "yes" if mine is not None and mine.frontier else "",
    }


def _stimulus(data: SweepAnalysis, p: SweepPoint) -> str:
    """The ``Concurrency`` / ``Request Rate`` cell: the swept value, else the load's own."""
    st = data.sweep_type
    if st in KNEE_SWEEPS:
        return f"{p.value:g}"
    load = data.spec.get("load", {})
    if _is_rate(data):
        rate = load.get("requestRate")
        return "N/A" if rate is None else f"{float(rate):g}"
    return str(load.get("concurrency", 1))


def _isl_cell(p: SweepPoint) -> str:
    """GenAI-Perf's ISL: the measured p99 input length as a whole number (the configured
    length when nothing was measured, N/A when neither is known)."""
    if p.isl_p99 is not None:
        return str(int(p.isl_p99))
    return "N/A" if p.isl is None else f"{p.isl:g}"


def table1_row(data: SweepAnalysis, p: SweepPoint) -> dict[str, str]:
    """One point's table 1 cells by column (every column; :func:`table1_columns` picks).

    GenAI-Perf's columns use its number format (two decimals, no thousands separator, as its
    ``analyze`` writes them); a metric that was not measured is ``N/A``.
    """
    m = p.metrics
    workload = data.spec.get("workload", {})
    stimulus = _stimulus(data, p)
    row = {
        "Config Name": p.name,
        "Concurrency": stimulus,
        "Request Rate": stimulus,
        "ISL": _isl_cell(p),
        "Num Dataset Entries": str(workload.get("numPrompts", 100)),
        **{col: format_value(getattr(m, attr)) for col, (_, attr) in METRIC_COLUMNS.items()},
        _OSL_COLUMN: format_value(p.osl_p99),
        "Achieved Rate (req/s)": format_value(p.achieved_request_rate),
        "OSL": f"{p.value:g}",
        "Meets SLO": "yes" if p.meets_slo else "no",
        f"Cost per 1M Output Tokens ({data.cost.currency})": format_value(
            p.cost_per_million_output_tokens, 4
        ),
        "Energy per Output Token (J)": format_value(p.joules_per_output_token, 4),
        REASONING_COLUMNS[0]: format_value(m.ttfa_p99_ms),
        REASONING_COLUMNS[1]: format_value(m.reasoning_tokens_avg),
        "Knee": "yes" if p.name in _knee_names(data) else "",
        "Workload": p.workload or "",
        **_pareto_cells(data, p),
        **_search_cells(data, p),
        "Repetitions": str(len([r for r in p.runs if r.status == DONE])),
        "Max Spread (%)": format_value(
            max((s.spread_pct for s in p.spreads.values()), default=None), 1
        ),
        "Unstable Metrics": " ".join(p.unstable),
        "Replicas": str(p.replicas or 1),
        "Shard Load (achieved/target)": " ".join(p.shard_load or ()),
        "Status": "ok" if p.status == "ok" else f"failed: {p.reason}",
    }
    return row


def _search_cells(data: SweepAnalysis, p: SweepPoint) -> dict[str, str]:
    """A search's cells: the point's probe number and phase (``3 doubling``), and ``yes`` on
    the answer."""
    search = data.search
    if search is None:
        return {}
    k = next((i for i, pr in enumerate(search.probes, 1) if pr.value == p.value), None)
    phase = search.probes[k - 1].phase if k is not None else ""
    return {
        "Search Probe": f"{k} {phase}" if k is not None else "",
        "Max Under SLO": "yes" if search.answer == p.value else "",
    }


#: How much a finding matters: ``info`` is a result, ``warn`` weakens one, ``error`` is a loss.
Severity = Literal["info", "warn", "error"]


def findings(data: SweepAnalysis) -> list[tuple[Severity, str]]:
    """What a sweep found, in words, for every place that shows it (console, HTML report).

    Each line is said once here so the console and the report cannot tell different stories.
    """
    out: list[tuple[Severity, str]] = []
    for w in data.workloads or ():  # two axes: each workload's knee, then its SLO verdict
        out.append(("info", f"{w.label}: {w.knee_message}"))
        out += [("info", f"{w.label}: {m}") for m in (w.slo.messages if w.slo else ())]
    if data.workloads is None:
        out.append(("info", data.knee_message))
    slo = data.slo
    if slo is not None and data.workloads is None:
        out += [("info", m) for m in slo.messages]
    if data.pareto is not None:
        out.append(("info", data.pareto.message))
    if data.search is not None:
        out.append(("info" if data.search.converged else "warn", data.search.message))
    price = data.cost.price_per_hour
    if price is not None and slo is not None and slo.best_index is not None:
        cost = data.points[slo.best_index].cost_per_million_output_tokens
        out.append((
            "info",
            f"cost at max load under SLO: {format_value(cost, 4)} {data.cost.currency} "
            f"per million output tokens ({price:g} {data.cost.currency}/h)",
        ))
    if data.failed_points:
        out.append(("error", f"failed points: {', '.join(data.failed_points)}"))
    if data.interrupted:
        out.append(("warn", "the sweep was interrupted; run it again to resume"))
    if data.stopped_after_knee:
        out.append(("info", "the sweep stopped one point past the knee (stopAfterKnee)"))
    unstable = [p.name for p in data.points if p.unstable]
    if unstable:
        out.append(("warn", f"spread over 10 % between repetitions: {', '.join(unstable)}"))
    return out


def telemetry_rows(summary: PointResult) -> list[dict[str, Any]]:
    """Table 2 rows (one per GPU) of one point; absent telemetry means no rows."""
    return summary.telemetry.gpu_rows() if summary.telemetry is not None else []


#: Table 2: GenAI-Perf's GPU table (the run, then the per-GPU columns), written even empty.
TABLE2_COLUMNS = ("Config Name", *GPU_SUMMARY_COLUMNS)


def summary_csv(data: SweepAnalysis) -> str:
    """``analyze_export_genai_perf.csv`` from the sweep's analysis alone (pure: no files).

    GenAI-Perf 0.0.16's layout, CRLF line ends as Python's csv writes them: table 1, one row
    per swept value (:func:`table1_columns`: its ten columns, then ours), an empty row, then
    its GPU table header (always, as GenAI-Perf writes it) and one row per GPU and run, GPU by
    GPU. The operator's ``status.summaryCSV`` is this text.
    """
    buf = io.StringIO()
    w = csv.writer(buf)
    cols = table1_columns(data)
    w.writerow(cols)
    for p in data.points:
        row = table1_row(data, p)
        w.writerow([row[c] for c in cols])
    w.writerow([])
    w.writerow(TABLE2_COLUMNS)
    runs = [r for p in data.points for r in p.runs if r.gpus]
    gpus: list[str] = []
    for r in runs:
        gpus += [g.gpu for g in r.gpus or () if g.gpu not in gpus]
    for gpu in gpus:
        for r in runs:
            for g in r.gpus or ():
                if g.gpu == gpu:
                    w.writerow([r.name, *format_gpu_row(g.row(), genai_perf_number)])
    return buf.getvalue()


def write_exports(run_dir: Path, data: SweepAnalysis) -> str:
    """Writes ``analyze_export_genai_perf.json`` and ``.csv`` of ``data`` into ``run_dir``;
    returns the CSV text (the operator's ``status.summaryCSV``, so it is never read back)."""
    text = summary_csv(data)
    write_atomic(run_dir / ANALYZE_JSON, data.to_json(indent=1))
    write_atomic(run_dir / ANALYZE_CSV, text)
    return text
