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


def test_seed_table_knee_at_16_by_the_ttft_rule() -> None:
    """The seed's worked example: TTFT p99 45 -> 98 ms at concurrency 16, knee 16."""
    knee = find_knee(SEED)
    assert knee is not None
    assert (knee.index, knee.value, knee.rules) == (3, 16, (RULE_TTFT,))
    assert knee.details == (
        "p99 TTFT reached 98.0 ms at concurrency 16, >= 2 x 45.0 ms at concurrency 1 "
        "(lowest load): requests queue from there on",
    )
    # OTT 2280 -> 2340 (+2.6 %) puts the OTT knee at 48: later, so it does not win
    assert knee.later == (
        "the OTT plateau rule fired later: OTT grew +2.6 % from concurrency 48 to concurrency "
        "64 (2280.0 -> 2340.0 tok/s, < 5 %): throughput saturated at concurrency 48",
    )
    msg = knee_message(knee, SEED)
    assert msg.startswith("knee at concurrency 16 (p99 TTFT rule): p99 TTFT reached 98.0 ms")
    assert msg.endswith("throughput saturated at concurrency 48")


def test_ott_plateau_puts_the_knee_at_the_point_before() -> None:
    """OTT grew +2.5 % from 2 to 4: throughput saturated at 2, so 2 is the knee, not 4."""
    points = [pm(1, 10, 100), pm(2, 11, 200), pm(4, 12, 205), pm(8, 13, 206)]
    knee = find_knee(points)
    assert knee is not None
    assert (knee.index, knee.value, knee.rules, knee.later) == (1, 2, (RULE_OTT,), ())
    assert knee_message(knee, points) == (
        "knee at concurrency 2 (OTT plateau rule): OTT grew +2.5 % from concurrency 2 to "
        "concurrency 4 (200.0 -> 205.0 tok/s, < 5 %): throughput saturated at concurrency 2"
    )


def test_eight_batch_slots_knee_at_8_not_16() -> None:
    """The issue's sweep: 8 slots, concurrency 16 buys +0.1 % OTT for 6x the p99 TTFT."""
    points = [pm(4, 50, 400), pm(8, 52, 800), pm(16, 310, 800.8), pm(32, 620, 801)]
    knee = find_knee(points)
    assert knee is not None and knee.value == 8 and knee.rules == (RULE_OTT,)
    assert "OTT grew +0.1 % from concurrency 8 to concurrency 16" in knee.details[0]
    # the p99 TTFT rule fires at 16 (310 >= 2 x 50): later, named as such
    assert knee.later == (
        "the p99 TTFT rule fired later: p99 TTFT reached 310.0 ms at concurrency 16, >= 2 x "
        "50.0 ms at concurrency 4 (lowest load): requests queue from there on",
    )


def test_ott_rule_first_when_both_fire_at_the_same_point_k() -> None:
    """At 4 TTFT doubles and OTT stalls (2 -> 4): the OTT knee (2) is earlier and wins."""
    points = [pm(1, 10, 100), pm(2, 10, 190), pm(4, 25, 191)]
    knee = find_knee(points)
    assert knee is not None and knee.value == 2 and knee.rules == (RULE_OTT,)
    assert knee.later and "p99 TTFT reached 25.0 ms at concurrency 4" in knee.later[0]


def test_ttft_rule_first_then_ott() -> None:
    """TTFT doubles at 4 while OTT still grows; OTT stalls only from 8 to 16 (knee 8)."""
    points = [pm(1, 10, 100), pm(2, 12, 200), pm(4, 22, 380), pm(8, 40, 700), pm(16, 90, 710)]
    knee = find_knee(points)
    assert knee is not None and knee.value == 4 and knee.rules == (RULE_TTFT,)
    assert "OTT grew +1.4 % from concurrency 8 to concurrency 16" in knee.later[0]


def test_both_rules_named_when_they_agree_on_the_point() -> None:
    """TTFT doubles at 2 and OTT stalls from 2 to 4: both put the knee at 2."""
    points = [pm(1, 10, 100), pm(2, 25, 190), pm(4, 30, 191)]
    knee = find_knee(points)
    assert knee is not None and knee.value == 2
    assert knee.rules == (RULE_TTFT, RULE_OTT) and knee.later == ()
    msg = knee_message(knee, points)
    assert msg.startswith("knee at concurrency 2 (p99 TTFT rule and OTT plateau rule): ")
    assert "p99 TTFT reached 25.0 ms at concurrency 2" in msg
    assert "OTT grew +0.5 % from concurrency 2 to concurrency 4" in msg


def test_knee_not_reached_says_extend() -> None:
    points = [pm(1, 10, 100), pm(2, 11, 200), pm(4, 12, 400)]
    assert find_knee(points) is None
    msg = knee_message(None, points)
    assert msg.startswith("knee not reached up to concurrency 4")
    assert "extend the sweep" in msg
    assert knee_message(None, points[:1]).startswith("knee not determined")


def test_failed_points_are_skipped() -> None:
    """The failed point 2 is no neighbour: OTT is compared from 1 to 4, then 4 to 8."""
    points = [pm(1, 10, 100), PointMetrics(value=2, failed="down"), pm(4, 12, 400), pm(8, 30, 410)]
    knee = find_knee(points)
    assert knee is not None and knee.index == 2 and knee.value == 4
    assert knee.rules == (RULE_OTT,)


def test_non_streaming_uses_ott_only() -> None:
    knee = find_knee([pm(1, None, 100), pm(2, None, 180), pm(4, None, 182)])
    assert knee is not None and knee.rules == (RULE_OTT,) and knee.value == 2


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
