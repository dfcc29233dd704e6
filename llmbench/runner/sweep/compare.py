"""``llmbench compare A B``: two profiles or two sweeps side by side, with a regression verdict.

The building block of a nightly regression gate: A is the baseline, B the candidate. Each
metric gets its values, the relative change (B - A) / A and, where a tolerance applies, a
verdict: ``regression`` when it moved the bad way by more than the tolerance, ``improved``
when it moved the good way by more, else ``ok``. The exit code is 1 when anything regressed.

Tolerances: ``--tolerance ott:-5% ttft_p99:+10%`` — the sign says which way is bad (throughput
down, latency up) and may be left out; the wrong sign is a usage error. Without
``--tolerance`` the defaults are ``ott:-5% ttft_p99:+10% itl_p99:+10%``. A metric key applies
to every point of a sweep; sweep-level keys are ``max_ott_under_slo`` and ``peak_ott``.

A and B are folders (or the JSON files inside them): an ``llmbench profile`` folder
(``profile_export_genai_perf.json``) or an ``llmbench analyze`` folder
(``analyze_export_genai_perf.json``). Sweep points are matched by their swept value; points in
only one of the two are listed, without a verdict.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from llmbench.api.figures import PointFigures
from llmbench.api.job import BaselineContext
from llmbench.api.results import PointResult, SweepAnalysis, validate_result
from llmbench.api.status import RegressionVerdict, VerdictRow
from llmbench.runner.labels import METRIC_LABELS, format_value
from llmbench.runner.sweep.knee import value_label

__all__ = [
    "BAD_VERDICTS",
    "DEFAULT_TOLERANCES",
    "MAX_VERDICT_ROWS",
    "METRICS",
    "POINT_METRICS",
    "Row",
    "SweepFigures",
    "compare",
    "compare_sweeps",
    "PointKey",
    "figures_from_points",
    "parse_tolerances",
    "pct",
    "point_metrics",
    "regression_verdict",
    "render",
    "signed_tolerance",
    "point_scope",
    "sweep_figures",
]

_L = METRIC_LABELS
#: Point metrics compared by their statistic: key prefix → PointResult field.
_SUMMARY_KEYS = {
    "ttft": "time_to_first_token",
    "itl": "inter_token_latency",
    "e2e": "request_latency",
}


def _single(field: str) -> str:
    return f"{_L[field].name} ({_L[field].unit})"


#: metric key → (higher is better, label); metric names spelled by the one label table.
METRICS: dict[str, tuple[bool, str]] = {
    "ott": (True, _single("output_token_throughput")),
    "rps": (True, _single("request_throughput")),
    "goodput": (True, _single("goodput")),
    **{
        f"{short}_{stat}": (False, _L[field].stat(stat))
        for short, field in _SUMMARY_KEYS.items()
        for stat in ("p99", "p50", "avg")
        if stat != "p50" or short == "ttft"
    },
    "error_rate": (False, "errors per measured request"),
    "j_per_token": (False, "GPU energy per output token (J)"),
    "max_ott_under_slo": (True, f"max {_single('output_token_throughput')} under SLO"),
    "peak_ott": (True, f"peak {_single('output_token_throughput')} over the sweep"),
}
DEFAULT_TOLERANCES = {"ott": 5.0, "ttft_p99": 10.0, "itl_p99": 10.0}


@dataclass(frozen=True)
class Row:
    """One compared metric at one scope (``profile``, ``sweep`` or a point label)."""

    scope: str
    metric: str
    a: float | None
    b: float | None
    change_pct: float | None
    tolerance_pct: float | None
    verdict: str


#: Point metric keys (``--tolerance`` names) -> the :class:`PointFigures` field each one reads.
POINT_METRICS = {
    "ott": "ott",
    "rps": "rps",
    "goodput": "goodput",
    "ttft_p99": "ttft_p99_ms",
    "itl_p99": "itl_p99_ms",
    "e2e_p99": "e2e_p99_ms",
    "j_per_token": "joules_per_output_token",
}


def point_metrics(figures: PointFigures) -> dict[str, float | None]:
    """One point's compared figures keyed by metric (``ttft_p99``, not ``ttft_p99_ms``)."""
    return {key: getattr(figures, attr) for key, attr in POINT_METRICS.items()}


#: A compared point: its workload (``""`` outside a two-axis sweep) and its swept value, so
#: a grid's points at one load value stay apart.
PointKey = tuple[str, float]


def point_scope(sweep_type: str, key: PointKey) -> str:
    """A point's scope in rows and messages: ``concurrency 16``, on two axes with its
    workload (``concurrency 16 isl128-osl512``)."""
    workload, value = key
    label = value_label(sweep_type, value)
    return f"{label} {workload}" if workload else label


@dataclass(frozen=True)
class SweepFigures:
    """A sweep as compared: max OTT under SLO and the points' figures keyed by workload and
    swept value (from an analyze export, a run digest or a baseline: all
    :class:`PointFigures`)."""

    sweep_type: str
    max_ott_under_slo: float | None
    points: Mapping[PointKey, PointFigures]
    #: the sweep's peak OTT when known without its points (fixed baseline numbers)
    peak_ott: float | None = None

    def metrics(self) -> dict[str, float | None]:
        otts = [p.ott for p in self.points.values() if p.ott is not None]
        peak = self.peak_ott if self.peak_ott is not None else max(otts) if otts else None
        return {"max_ott_under_slo": self.max_ott_under_slo, "peak_ott": peak}


def parse_tolerances(items: Sequence[str]) -> dict[str, float]:
    """``ott:-5%`` -> {"ott": 5.0} (allowed bad-way change, percent); ValueError naming the flag."""
    out: dict[str, float] = {}
    for item in items:
        key, sep, raw = item.partition(":")
        key = key.strip().lower()
        if not sep or key not in METRICS:
            raise ValueError(
                f"--tolerance {item!r}: expected METRIC:±N% with METRIC one of "
                f"{', '.join(METRICS)}"
            )
        text = raw.strip().rstrip("%").strip()
        try:
            v = float(text)
        except ValueError:
            raise ValueError(f"--tolerance {item!r}: {raw!r} is not a percentage") from None
        higher_better = METRICS[key][0]
        if text.startswith(("+", "-")) and v != 0 and (v > 0) == higher_better:
            bad = "drops" if higher_better else "rises"
            sign = "-" if higher_better else "+"
            raise ValueError(
                f"--tolerance {item!r}: {key} regresses when it {bad}; write "
                f"{key}:{sign}{abs(v):g}%"
            )
        out[key] = abs(v)
    return out


# ----------------------------------------------------------------------------------------------
# loading
# ----------------------------------------------------------------------------------------------


def _load(path: Path) -> PointResult | SweepAnalysis:
    """The profile or sweep result in a folder (or one of the two JSON exports).

    ValueError naming the file, and the field when the file is not its model.
    """
    from llmbench.runner.artifacts.layout import GENAI_PERF_JSON
    from llmbench.runner.sweep.analysis import ANALYZE_JSON

    candidates = [path] if path.is_file() else [path / ANALYZE_JSON, path / GENAI_PERF_JSON]
    for c in candidates:
        if c.is_file():
            try:
                data = json.loads(c.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                raise ValueError(f"{c}: not readable JSON ({exc})") from None
            if not isinstance(data, dict):
                raise ValueError(f"{c}: not an llmbench export")
            if "points" in data and "sweep_type" in data:
                return validate_result(SweepAnalysis, data, str(c))
            return validate_result(PointResult, data, str(c))
    raise ValueError(
        f"{path}: no {ANALYZE_JSON} or {GENAI_PERF_JSON} (is it an llmbench result folder?)"
    )


def _profile_metrics(s: PointResult) -> dict[str, float | None]:
    out: dict[str, float | None] = {
        "ott": s.single("output_token_throughput"),
        "rps": s.single("request_throughput"),
        "goodput": s.single("goodput"),
    }
    for short, field in _SUMMARY_KEYS.items():
        stat = s.stat(field)
        out[f"{short}_p99"] = stat.p99 if stat is not None else None
        out[f"{short}_avg"] = stat.avg if stat is not None else None
    ttft = s.time_to_first_token
    out["ttft_p50"] = ttft.p50 if ttft is not None else None
    measured = s.window.measured_requests
    out["error_rate"] = s.errors.total / measured if measured else None
    return out


def figures_from_points(
    points: Iterable[PointFigures],
    max_ott_under_slo: float | None,
    sweep_type: str,
    peak_ott: float | None = None,
) -> SweepFigures:
    """A sweep's figures from its points (status points of a run digest, or a baseline the
    operator resolved): what ``llmbench results --compare`` and the regression verdict use.
    A point with a ``workload`` (a two-axis sweep's status point) is keyed by it too."""
    return SweepFigures(
        sweep_type=sweep_type,
        max_ott_under_slo=max_ott_under_slo,
        points={(getattr(p, "workload", None) or "", p.value): p for p in points},
        peak_ott=peak_ott,
    )


def sweep_figures(d: SweepAnalysis) -> SweepFigures:
    """A sweep analysis's figures as compared (max OTT under SLO, each point's figures)."""
    return SweepFigures(
        sweep_type=d.sweep_type,
        max_ott_under_slo=d.slo.max_ott if d.slo is not None else None,
        points={(p.workload or "", p.value): p.metrics for p in d.points},
    )


# ----------------------------------------------------------------------------------------------
# comparing
# ----------------------------------------------------------------------------------------------


def _row(
    scope: str, metric: str, a: float | None, b: float | None, tolerances: dict[str, float]
) -> Row:
    change = None
    if a is not None and b is not None:
        change = (b - a) / abs(a) * 100 if a != 0 else (0.0 if b == 0 else None)
    tol = tolerances.get(metric)
    if tol is None:
        verdict = ""
    elif a is None and b is None:
        verdict = "n/a"
    elif a is None or b is None:
        verdict = "missing" if b is None else "new"
    elif change is None:  # from zero to something: infinitely worse or better
        higher_better = METRICS[metric][0]
        verdict = "improved" if (b > a) == higher_better else "regression"
    else:
        higher_better = METRICS[metric][0]
        bad = -change if higher_better else change
        verdict = "regression" if bad > tol else ("improved" if -bad > tol else "ok")
    return Row(scope, metric, a, b, change, tol, verdict)


def _kind(x: PointResult | SweepAnalysis) -> str:
    return "profile" if isinstance(x, PointResult) else "sweep"


def compare(a_path: Path, b_path: Path, tolerances: dict[str, float]) -> list[Row]:
    """Every compared metric as rows; ValueError when A and B are not comparable."""
    a, b = _load(a_path), _load(b_path)
    rows: list[Row] = []
    if isinstance(a, PointResult) and isinstance(b, PointResult):
        ma, mb = _profile_metrics(a), _profile_metrics(b)
        for k in ma:
            if ma[k] is not None or mb[k] is not None:
                rows.append(_row("profile", k, ma[k], mb[k], tolerances))
        return rows
    if not (isinstance(a, SweepAnalysis) and isinstance(b, SweepAnalysis)):
        kind_a, kind_b = (_kind(x) for x in (a, b))
        raise ValueError(f"{a_path} is a {kind_a} and {b_path} a {kind_b}: compare like with like")
    if a.sweep_type != b.sweep_type:
        raise ValueError(f"{a_path} sweeps {a.sweep_type} and {b_path} sweeps {b.sweep_type}")
    return compare_sweeps(sweep_figures(a), sweep_figures(b), tolerances)


#: Verdicts that fail a comparison: worse by more than the tolerance, or the figure gone.
BAD_VERDICTS = ("regression", "missing")
#: Verdict rows kept in a run's status (the first ones; ``compared`` still counts them all).
MAX_VERDICT_ROWS = 20


def regression_verdict(
    baseline: BaselineContext, data: SweepAnalysis, tolerances: dict[str, float]
) -> RegressionVerdict:
    """A run's analysis against the baseline the operator resolved, as ``llmbench compare``
    judges two sweeps: the same rows, the same verdicts (a figure only one side has, other
    than ``missing``, judges nothing)."""
    rows = compare_sweeps(
        figures_from_points(baseline.points, baseline.max_ott_under_slo, data.sweep_type,
                            baseline.peak_ott),
        sweep_figures(data),
        tolerances,
    )
    judged = [r for r in rows if r.tolerance_pct is not None and r.a is not None
              and r.b is not None]
    bad = [r for r in rows if r.verdict in BAD_VERDICTS]
    if bad:
        first = bad[0]
        message = f"{len(bad)} figure(s) regressed against {baseline.label}; first: " + (
            f"{first.scope} {first.metric} {format_value(first.a)} -> "
            f"{format_value(first.b)} ({pct(first.change_pct)}, tolerance "
            f"{signed_tolerance(first)})"
        )
    elif judged:
        message = f"{len(judged)} figure(s) within tolerance of {baseline.label}"
    else:
        message = f"nothing to compare with {baseline.label}: no figure both runs have"
    return RegressionVerdict(
        baseline=baseline.label,
        baseline_run=baseline.run,
        regressed=bool(bad),
        compared=len(judged),
        rows=[
            VerdictRow(scope=r.scope, metric=r.metric, baseline=r.a, value=r.b,
                       change_pct=r.change_pct, tolerance_pct=r.tolerance_pct,
                       verdict=r.verdict)
            for r in bad[:MAX_VERDICT_ROWS]
        ],
        message=message,
    )


def compare_sweeps(a: SweepFigures, b: SweepFigures, tolerances: dict[str, float]) -> list[Row]:
    """Two sweeps of the same type as rows: sweep-level metrics, then each point matched by
    its workload and swept value (points in only one of them listed without a verdict)."""
    rows: list[Row] = []
    sa, sb = a.metrics(), b.metrics()
    for k in sa:
        if sa[k] is not None or sb[k] is not None:
            rows.append(_row("sweep", k, sa[k], sb[k], tolerances))
    pa, pb = a.points, b.points
    for key in sorted(set(pa) | set(pb)):
        label = point_scope(b.sweep_type, key)
        if key not in pb or key not in pa:
            rows.append(Row(label, "point", None, None, None, None,
                            "only in A" if key not in pb else "only in B"))
            continue
        ma, mb = point_metrics(pa[key]), point_metrics(pb[key])
        for k in ma:
            if ma[k] is not None or mb[k] is not None:
                rows.append(_row(label, k, ma[k], mb[k], tolerances))
    return rows


# ----------------------------------------------------------------------------------------------
# output
# ----------------------------------------------------------------------------------------------


def pct(v: float | None, signed: bool = True) -> str:
    if v is None:
        return "N/A"
    return f"{v:+.1f}%" if signed else f"{v:g}%"


def render(rows: Sequence[Row], fmt: str) -> str:
    """``csv`` or ``json`` text; ``table`` is printed with rich by :func:`run`."""
    if fmt == "json":
        regressions = [r for r in rows if r.verdict in ("regression", "missing")]
        return json.dumps(
            {"regression": bool(regressions), "rows": [asdict(r) for r in rows]}, indent=1
        )
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["Scope", "Metric", "A", "B", "Change (%)", "Tolerance (%)", "Verdict"])
    for r in rows:
        w.writerow([r.scope, r.metric, format_value(r.a), format_value(r.b),
                    "N/A" if r.change_pct is None else f"{r.change_pct:.2f}",
                    "" if r.tolerance_pct is None else f"{r.tolerance_pct:g}", r.verdict])
    return buf.getvalue()


def signed_tolerance(r: Row) -> str:
    """``-5%`` for throughput, ``+10%`` for latency: the direction that would regress."""
    higher_better = METRICS[r.metric][0] if r.metric in METRICS else True
    return f"{'-' if higher_better else '+'}{r.tolerance_pct:g}%"
