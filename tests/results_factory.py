"""Hand-made point results for tests that need chosen figures, not a measured run.

Why a factory: :class:`~llmbench.api.results.PointResult` lists every key the artefact always
has, so a test that cares about three figures still needs a whole, valid result; this builds
one with every distribution flat at the chosen value and everything else empty; likewise a
sweep analysis from a few ``(value, OTT, p99 TTFT)`` points.
"""

from __future__ import annotations

from llmbench.api.results import (
    CostSummary,
    Count,
    Errors,
    Figure,
    Goodput,
    PointMetrics,
    PointResult,
    SloVerdict,
    Stat,
    SweepAnalysis,
    SweepPoint,
    TokenCounts,
    Window,
)

_STATS = ("avg", "min", "max", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95", "p99", "std")


def flat(unit: str, value: float, **override: float) -> Stat:
    """A Stat whose every statistic is ``value`` (std 0) except those in ``override``."""
    figures = {s: (0.0 if s == "std" else float(value)) for s in _STATS}
    return Stat(unit=unit, **{**figures, **override})


def point_result(
    *,
    ttft: Stat | None = None,
    itl: Stat | None = None,
    e2e: Stat | None = None,
    ott: float | None = None,
    rps: float | None = None,
    completed: int = 10,
    measured: int | None = None,
    errors: Errors | None = None,
    goodput: Goodput | None = None,
    interrupted: bool = False,
) -> PointResult:
    """A valid point result with the given figures (None: not measured)."""
    measured = completed if measured is None else measured
    result = PointResult(
        request_throughput=Figure(unit="requests/sec", avg=rps),
        request_latency=e2e,
        time_to_first_token=ttft,
        time_to_second_token=None,
        inter_token_latency=itl,
        output_token_throughput_per_user=None,
        output_sequence_length=None,
        input_sequence_length=None,
        output_token_throughput=Figure(unit="tokens/sec", avg=ott),
        request_count=Count(unit="count", avg=completed),
        errors=errors or Errors(total=0, by_type={}),
        token_counts=TokenCounts(
            output_tokens_source={}, input_tokens_source={},
            output_tokens_mismatch=0, input_tokens_mismatch=0,
        ),
        window=Window(
            start_ns=0, end_ns=10**9, duration_s=1.0, measured_requests=measured,
            completed_requests=completed, warmup_requests=0,
        ),
        interrupted=interrupted,
    )
    if goodput is not None:
        result.goodput = goodput
    return result


def sweep_analysis(
    points: list[tuple[float, float, float]], max_ott: float | None, model: str = "m"
) -> SweepAnalysis:
    """A concurrency sweep's analysis with ``(value, OTT, p99 TTFT)`` per point; an SLO verdict
    holding ``max_ott`` when given."""
    return SweepAnalysis(
        model=model,
        sweep_type="concurrency",
        values=[p[0] for p in points],
        repetitions=1,
        spec={"target": {"url": "http://127.0.0.1:9", "model": model}},
        points=[
            SweepPoint(
                name=f"{model}-chat-concurrency{v:g}", value=v, label=f"concurrency {v:g}",
                status="ok", reason=None, runs=[],
                metrics=PointMetrics(
                    value=v, ott=ott, rps=ott / 100, ttft_p99_ms=ttft, itl_p99_ms=5.0,
                    e2e_p99_ms=100.0, completed=10,
                ),
                spreads={}, unstable=[], cost_per_million_output_tokens=None,
                joules_per_output_token=None, isl=None, achieved_request_rate=None,
            )
            for v, ott, ttft in points
        ],
        knee=None,
        knee_message="",
        slo=(
            SloVerdict(limits={}, best_index=None, best=None, max_ott=max_ott,
                       first_failure_index=None, first_failure=None, messages=[])
            if max_ott is not None
            else None
        ),
        cost=CostSummary(price_per_hour=None, currency="EUR"),
        interrupted=False,
        stopped_after_knee=False,
        stopped_on_failure=False,
        resumed=[],
        failed_points=[],
    )
