"""The knee rule and max load under SLO, on hand-made sweep figures."""

from __future__ import annotations

from results_factory import flat, point_result

from llmbench.api.results import Goodput
from llmbench.runner.sweep.knee import (
    RULE_OTT,
    RULE_TTFT,
    PointMetrics,
    evaluate_slo,
    find_knee,
    knee_message,
    max_under_slo,
    slo_message,
)


def pm(value: float, ttft: float | None, ott: float | None, **kw: object) -> PointMetrics:
    return PointMetrics(value=value, ttft_p99_ms=ttft, ott=ott, completed=100, **kw)


# The seed's illustrative sweep (4xH100, Llama-3.1-70B): TTFT p99 and OTT per concurrency.
SEED = [
    pm(1, 45, 130),
    pm(4, 51, 510),
    pm(8, 62, 980),
    pm(16, 98, 1720),
    pm(32, 284, 2130),
    pm(48, 740, 2280),
    pm(64, 1820, 2340),
]


def test_ttft_rule_fires_first_where_p99_doubles() -> None:
    knee = find_knee(SEED)
    assert knee is not None
    assert knee.value == 16  # 98 >= 2 x 45
    assert knee.rules == (RULE_TTFT,)
    assert "98.0 ms >= 2 x 45.0 ms" in knee.details[0]


def test_ott_plateau_rule() -> None:
    points = [pm(1, 10, 100), pm(2, 11, 200), pm(4, 12, 205), pm(8, 13, 206)]
    knee = find_knee(points)
    assert knee is not None and knee.value == 4 and knee.rules == (RULE_OTT,)
    assert "+2.5 %" in knee.details[0]


def test_both_rules_named_when_both_fire() -> None:
    knee = find_knee([pm(1, 10, 100), pm(2, 10, 190), pm(4, 25, 191)])
    assert knee is not None and knee.rules == (RULE_TTFT, RULE_OTT)
    assert "knee at concurrency 4" in knee_message(knee, [])


def test_knee_not_reached_says_extend() -> None:
    points = [pm(1, 10, 100), pm(2, 11, 200), pm(4, 12, 400)]
    assert find_knee(points) is None
    msg = knee_message(None, points)
    assert msg.startswith("knee not reached up to concurrency 4")
    assert "extend the sweep" in msg


def test_failed_points_are_skipped() -> None:
    points = [pm(1, 10, 100), PointMetrics(value=2, failed="down"), pm(4, 12, 400), pm(8, 30, 410)]
    knee = find_knee(points)
    assert knee is not None and knee.index == 3


def test_non_streaming_uses_ott_only() -> None:
    knee = find_knee([pm(1, None, 100), pm(2, None, 180), pm(4, None, 182)])
    assert knee is not None and knee.rules == (RULE_OTT,) and knee.value == 4


def test_rate_labels() -> None:
    msg = knee_message(None, [pm(0.5, 1, 1), pm(1.5, 1, 3)], "request_rate")
    assert "request rate 1.5/s" in msg


def test_max_under_slo_and_first_failure() -> None:
    limits = {"ttft_p99": 500.0}
    res = max_under_slo(SEED, limits)
    assert res.best == 4  # concurrency 32: 284 ms, 2130 tok/s
    assert res.first_failure == 5
    assert [str(v) for v in res.violations[5]] == ["p99 TTFT 740.0 ms > 500 ms"]
    lines = slo_message(res, SEED, limits)
    assert lines[0] == "max OTT under SLO (ttft_p99 500): 2130.0 tok/s at concurrency 32"
    assert lines[1] == "first failing point: concurrency 48 (p99 TTFT 740.0 ms > 500 ms)"


def test_seed_example_knee_under_tighter_slo() -> None:
    # "The knee (the last point with TTFT P99 < 500 ms) is at concurrency 16" with ITL < 15 ms
    points = [
        PointMetrics(value=c, ttft_p99_ms=t, itl_p99_ms=i, ott=o, completed=1)
        for c, t, i, o in [(1, 45, 7.1, 130), (16, 98, 12.1, 1720), (32, 284, 21.4, 2130)]
    ]
    res = max_under_slo(points, {"ttft_p99": 500, "itl_p99": 15})
    assert res.best == 1 and res.first_failure == 2
    assert "p99 ITL 21.4 ms > 15 ms" in str(res.violations[2][0])


def test_goodput_ratio_and_unmeasured_metric() -> None:
    p = PointMetrics(value=1, ttft_p99_ms=10, ott=1, completed=10, good_requests=9)
    assert p.goodput_ratio == 0.9
    assert [v.metric for v in evaluate_slo(p, {"goodput_ratio": 0.95})] == ["goodput_ratio"]
    assert evaluate_slo(p, {"goodput_ratio": 0.9}) == []
    # ITL not measured (non-streaming) cannot be shown to pass
    assert "not measured" in str(evaluate_slo(p, {"itl_p99": 5})[0])


def test_no_point_meets_slo() -> None:
    res = max_under_slo([pm(1, 900, 10)], {"ttft_p99": 100})
    assert res.best is None and res.first_failure == 0
    assert slo_message(res, [pm(1, 900, 10)], {"ttft_p99": 100})[0].startswith("no point meets")


def test_failed_point_fails_slo_with_reason() -> None:
    points = [pm(1, 10, 10), PointMetrics(value=2, failed="ConnectError: refused")]
    res = max_under_slo(points, {"ttft_p99": 100})
    assert res.first_failure == 1
    assert "point failed: ConnectError: refused" in slo_message(res, points, {"ttft_p99": 100})[1]


def test_from_summary() -> None:
    summary = point_result(
        ttft=flat("ms", 10, p99=12.5),
        itl=flat("ms", 2.0),
        e2e=flat("ms", 100.0),
        ott=500.0,
        rps=5.0,
        completed=50,
        goodput=Goodput(unit="requests/sec", avg=4.0, slo={"ttft": 20.0}, good_requests=40),
    )
    p = PointMetrics.from_summary(8, summary)
    assert (p.ttft_p99_ms, p.itl_p99_ms, p.e2e_p99_ms, p.ott, p.rps) == (12.5, 2.0, 100.0, 500, 5)
    assert p.goodput_ratio == 0.8
