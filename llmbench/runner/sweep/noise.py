"""``spec.baseline.mode: history``: a run judged against the noise of the runs before it.

Why: one baseline run and a fixed percentage flag a run that is merely unlucky on a noisy
node, and miss a real slowdown on a quiet one; how far a figure moves from night to night
differs by metric and by node. So each judged figure gets a band from the last N valid runs
of the same settings: median ± k x 1.4826 x MAD (the median absolute deviation, scaled so that
for normal noise it estimates the standard deviation). Median and MAD are robust: a single
slow night in the history moves neither, where it would drag a mean and inflate a standard
deviation until the next slowdown hides inside them.

A figure regresses when it leaves the band the bad way (latency above the upper bound,
throughput below the lower); ``improved`` the good way; else ``ok``. The band is never
narrower than the figure's tolerance (``spec.baseline.tolerances``, a percentage of the
median), so a history too quiet to show noise does not flag a 0.1 % move, and which figures
are judged is the tolerances' keys, as in fixed mode.

The figures are keyed ``scope/metric``: ``sweep/peak_ott``, ``16/ttft_p99`` (the swept value,
``g``-formatted). :func:`judged_figures` writes them for each finished run (the digest, then
``status.history``); :func:`history_verdict` reads them back as the history.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from llmbench.api.job import BaselineContext, HistoryFigures
from llmbench.api.results import SweepAnalysis
from llmbench.api.status import RegressionVerdict, VerdictRow
from llmbench.runner.labels import format_value
from llmbench.runner.sweep.compare import (
    MAX_VERDICT_ROWS,
    METRICS,
    point_metrics,
    point_scope,
    sweep_figures,
)

__all__ = [
    "DEFAULT_K",
    "MAD_SCALE",
    "MIN_RUNS",
    "Band",
    "history_verdict",
    "judged_figures",
    "noise_band",
]

#: MAD x 1.4826 estimates the standard deviation of normally distributed noise.
MAD_SCALE = 1.4826
#: The band's default half-width in scaled MADs (spec.baseline.history.k's default).
DEFAULT_K = 3.0
#: Fewer runs than this give no band (spec.baseline.history.minRuns' least value).
MIN_RUNS = 3


@dataclass(frozen=True)
class Band:
    """A figure's noise band over ``n`` runs."""

    median: float
    lower: float
    upper: float
    n: int

    def verdict(self, value: float, higher_better: bool) -> str:
        """``regression`` outside the band the bad way, ``improved`` the good way, else ``ok``."""
        if value < self.lower:
            return "improved" if not higher_better else "regression"
        if value > self.upper:
            return "regression" if not higher_better else "improved"
        return "ok"


def noise_band(values: Sequence[float], k: float = DEFAULT_K, floor_pct: float = 0.0) -> Band:
    """median ± max(k x 1.4826 x MAD, floor_pct % of |median|) of ``values``.

    Example: ``noise_band([100, 102, 98, 101, 99])`` is median 100, MAD 1, so 100 ± 4.45.

    Raises:
        ValueError: fewer than :data:`MIN_RUNS` values (a band of two runs is no statistic).
    """
    if len(values) < MIN_RUNS:
        raise ValueError(f"a noise band needs at least {MIN_RUNS} runs, got {len(values)}")
    median = statistics.median(values)
    mad = statistics.median([abs(v - median) for v in values])
    half = max(k * MAD_SCALE * mad, abs(median) * floor_pct / 100)
    return Band(median=median, lower=median - half, upper=median + half, n=len(values))


def judged_figures(data: SweepAnalysis, tolerances: Mapping[str, float]) -> dict[str, float]:
    """The figures of a run that ``tolerances`` judge, keyed ``scope/metric``: sweep-level
    (``sweep/max_ott_under_slo``, ``sweep/peak_ott``) and per swept value (``16/ttft_p99``;
    a two-axis sweep's with its workload, ``16@isl128-osl512/ttft_p99``)."""
    figures = sweep_figures(data)
    out = {
        f"sweep/{k}": v for k, v in figures.metrics().items() if k in tolerances and v is not None
    }
    for (workload, value), point in sorted(figures.points.items()):
        scope = f"{value:g}@{workload}" if workload else f"{value:g}"
        for k, v in point_metrics(point).items():
            if k in tolerances and v is not None:
                out[f"{scope}/{k}"] = v
    return out


def _scope(key: str, sweep_type: str) -> tuple[str, str]:
    scope, _, metric = key.rpartition("/")
    if scope == "sweep":
        return scope, metric
    value, _, workload = scope.partition("@")
    try:
        return point_scope(sweep_type, (workload, float(value))), metric
    except ValueError:
        return scope, metric


def _runs(history: Sequence[HistoryFigures]) -> str:
    runs = [h.run for h in history]
    if not runs:
        return "no runs"
    if runs == list(range(runs[0], runs[0] + len(runs))) and len(runs) > 1:
        return f"runs {runs[0]}-{runs[-1]}"
    return "runs " + ", ".join(map(str, runs))


def _band_text(r: VerdictRow) -> str:
    return (f"{r.scope} {r.metric} {format_value(r.value)} (median {format_value(r.baseline)}, "
            f"{_pct(r.change_pct)}; band {format_value(r.lower)}..{format_value(r.upper)})")


def _pct(v: float | None) -> str:
    return "N/A" if v is None else f"{v:+.1f}%"


def history_verdict(
    baseline: BaselineContext, data: SweepAnalysis, tolerances: Mapping[str, float],
    min_runs: int = MIN_RUNS,
) -> RegressionVerdict:
    """The run (``data``) against the noise bands of ``baseline.history``: one row per judged
    figure that at least ``min_runs`` of those runs have, the regressed ones first. The
    message names the first regressed figure, or the one nearest its bad bound, with its
    band beside the change (from the median)."""
    k = baseline.band_k if baseline.band_k is not None else DEFAULT_K
    current = judged_figures(data, tolerances)
    label = f"the noise band of {_runs(baseline.history)} (median ± {k:g} x 1.4826 x MAD)"
    rows: list[VerdictRow] = []
    margins: list[tuple[float, VerdictRow]] = []
    for key, value in current.items():
        metric = key.rpartition("/")[2]
        past = [h.figures[key] for h in baseline.history if key in h.figures]
        if len(past) < max(min_runs, MIN_RUNS) or metric not in METRICS:
            continue
        higher_better = METRICS[metric][0]
        band = noise_band(past, k, tolerances.get(metric, 0.0))
        change = (value - band.median) / abs(band.median) * 100 if band.median else None
        scope, _ = _scope(key, data.sweep_type)
        row = VerdictRow(
            scope=scope, metric=metric, baseline=band.median, value=value, change_pct=change,
            tolerance_pct=tolerances.get(metric), verdict=band.verdict(value, higher_better),
            lower=band.lower, upper=band.upper,
        )
        rows.append(row)
        width = band.upper - band.median or 1.0
        # how far towards the bad bound, in half-widths (1: on it)
        margins.append(((band.median - value if higher_better else value - band.median) / width,
                        row))
    bad = [r for r in rows if r.verdict == "regression"]
    if bad:
        message = (f"{len(bad)} of {len(rows)} figure(s) outside {label}; first: "
                   f"{_band_text(bad[0])}")
    elif rows:
        nearest = max(margins, key=lambda m: m[0])[1]
        message = (f"{len(rows)} figure(s) within {label}; nearest its bad bound: "
                   f"{_band_text(nearest)}")
    else:
        message = (f"insufficient history: no judged figure is in {max(min_runs, MIN_RUNS)} "
                   f"of {_runs(baseline.history)}")
    ordered = bad + [r for r in rows if r.verdict != "regression"]
    return RegressionVerdict(
        baseline=f"history of {_runs(baseline.history)}",
        regressed=bool(bad),
        compared=len(rows),
        rows=ordered[:MAX_VERDICT_ROWS],
        message=message,
        history_runs=[h.run for h in baseline.history],
    )
