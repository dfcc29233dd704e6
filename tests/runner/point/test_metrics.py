"""Metric math against hand-computed values (GenAI-Perf definitions, DESIGN.md)."""

from __future__ import annotations

import math

import pytest

from llmbench.runner.client.records import SOURCE_SERVER, SOURCE_TOKENIZER, RequestRecord
from llmbench.runner.point.metrics import itl_by_position, meets_slo, per_request, stats, summarize

MS = 1_000_000


def rec(index: int, sent: float, chunks: list[float], osl: int, *, warmup: bool = False,
        isl: int = 10, error: str | None = None) -> RequestRecord:
    """A completed streaming request; times in ms from an arbitrary origin."""
    r = RequestRecord(index=index, warmup=warmup, sent_ns=int(sent * MS))
    if error:
        r.error_type, r.error_message = error, "boom"
        return r
    r.chunk_ns = [int(c * MS) for c in chunks]
    r.first_token_ns, r.last_token_ns = r.chunk_ns[0], r.chunk_ns[-1]
    r.output_tokens, r.output_tokens_source = osl, SOURCE_SERVER
    r.input_tokens, r.input_tokens_source = isl, SOURCE_SERVER
    return r


def test_stats_of_known_values() -> None:
    s = stats([1.0, 2.0, 3.0, 4.0])
    assert s is not None
    assert s.avg == 2.5 and s.min == 1.0 and s.max == 4.0
    assert s.p50 == 2.5
    assert s.p99 == pytest.approx(3.97)  # linear: 1 + 0.99 * 3
    assert s.p25 == pytest.approx(1.75)
    assert s.std == pytest.approx(math.sqrt(1.25))  # population std
    # GenAI-Perf's key order; no unit given: no unit key
    assert list(s.to_dict()) == ["avg", "p1", "p5", "p10", "p25", "p50", "p75", "p90", "p95",
                                 "p99", "min", "max", "std"]
    assert stats([]) is None


def test_ttft_itl_e2e_of_one_request() -> None:
    # sent at 0, first token 100 ms, last token at 190 ms, 10 tokens => ITL = 90 / 9 = 10 ms.
    r = rec(0, 0.0, [100.0, 150.0, 190.0], osl=10)
    pr = per_request(r, streaming=True)
    assert pr.ttft_ms == 100.0 and pr.e2e_ms == 190.0 and pr.itl_ms == 10.0
    assert pr.ttst_ms == 50.0


def test_osl_one_has_no_itl_and_cannot_fail_an_itl_slo() -> None:
    pr = per_request(rec(0, 0.0, [40.0], osl=1), streaming=True)
    assert pr.itl_ms is None
    assert meets_slo(pr, {"itl": 1.0, "ttft": 50.0})
    assert not meets_slo(pr, {"ttft": 30.0})


def test_point_throughput_uses_first_measured_send_to_last_token() -> None:
    records = [
        rec(0, -500.0, [-400.0, -300.0], osl=50, warmup=True),  # excluded entirely
        rec(1, 0.0, [100.0, 1000.0], osl=100),
        rec(2, 200.0, [300.0, 2000.0], osl=300),
        rec(3, 250.0, [], osl=0, error="http_500"),
    ]
    s = summarize(records, streaming=True, slo={"ttft": 150.0})
    # T_x = 0 (first measured send), T_y = 2000 ms => 2 s window.
    assert s.window.duration_s == pytest.approx(2.0)
    assert s.output_token_throughput.avg == pytest.approx(400 / 2.0)
    assert s.request_throughput.avg == pytest.approx(1.0)
    assert s.request_count.avg == 2
    assert s.time_to_first_token.avg == pytest.approx(100.0)
    # ITLs: (1000-100)/99 and (1800-100)/299
    assert s.inter_token_latency.min == pytest.approx(1700 / 299)
    assert s.inter_token_latency.max == pytest.approx(900 / 99)
    assert s.request_latency.max == pytest.approx(1800.0)
    assert s.goodput.good_requests == 2 and s.goodput.avg == pytest.approx(1.0)
    assert s.errors.total == 1
    assert s.errors.by_type["http_500"].to_dict() == {"count": 1, "sample": "boom"}
    assert s.window.warmup_requests == 1


def test_goodput_counts_only_requests_meeting_every_slo() -> None:
    records = [rec(0, 0.0, [100.0, 200.0], osl=11), rec(1, 0.0, [300.0, 400.0], osl=11)]
    s = summarize(records, streaming=True, slo={"ttft": 200.0, "itl": 10.0})
    assert s.goodput.good_requests == 1
    assert s.goodput.avg == pytest.approx(1 / 0.4)


def test_inter_chunk_gaps_are_reported_separately_from_itl() -> None:
    # 2 chunks of 5 tokens each: ITL = 100/9 ms but the only gap is 100 ms.
    s = summarize([rec(0, 0.0, [50.0, 150.0], osl=10)], streaming=True)
    assert s.inter_token_latency.avg == pytest.approx(100 / 9)
    assert s.inter_chunk_gap.avg == pytest.approx(100.0)


def test_token_provenance_and_mismatch_count() -> None:
    a = rec(0, 0.0, [1.0, 2.0], osl=5)
    a.output_tokens_client = 6
    b = rec(1, 0.0, [1.0, 2.0], osl=5)
    b.output_tokens_client = 5
    c = rec(2, 0.0, [1.0, 2.0], osl=5)
    c.output_tokens_source = SOURCE_TOKENIZER
    tc = summarize([a, b, c], streaming=True).token_counts
    assert tc.output_tokens_source == {"server": 2, "tokenizer": 1}
    assert tc.output_tokens_mismatch == 1


def test_dispatch_lag_and_achieved_rate_for_open_loop() -> None:
    records = []
    for i in range(5):
        r = rec(i, i * 100.0 + 3.0, [i * 100.0 + 20.0, i * 100.0 + 40.0], osl=3)
        r.scheduled_ns = int(i * 100.0 * MS)
        records.append(r)
    d = summarize(records, streaming=True).dispatch
    assert d.lag_ms.avg == pytest.approx(3.0)
    assert d.achieved_request_rate == pytest.approx(10.0)


def test_nothing_completed_gives_na_not_zero() -> None:
    s = summarize([rec(0, 0.0, [], osl=0, error="disconnect")], streaming=True)
    assert s.output_token_throughput.avg is None
    assert s.time_to_first_token is None
    assert s.errors.by_type["disconnect"].count == 1


def test_itl_by_position_averages_each_gap_index() -> None:
    a = rec(0, 0.0, [10.0, 20.0, 40.0], osl=3)
    b = rec(1, 0.0, [10.0, 40.0], osl=2)
    assert itl_by_position([a, b]) == pytest.approx([20.0, 20.0])


def test_client_health_warns_only_when_the_loop_cannot_keep_up() -> None:
    from llmbench.runner.point.profile import client_health

    calm = client_health([0.1] * 95 + [4.0] * 5, workers=1)
    assert calm.warnings == [] and calm.loop_lag_ms is not None and calm.loop_lag_ms.max == 4.0
    saturated = client_health([0.1] * 80 + [3.0] * 20, workers=1)
    assert "--workers 2" in saturated.warnings[0]
    stalls = client_health([0.1] * 97 + [30.0] * 3, workers=2)
    assert "--workers 3" in stalls.warnings[0]
    empty = client_health([], workers=1)
    assert empty.to_dict() == {"workers": 1, "loop_lag_ms": None, "warnings": []}
