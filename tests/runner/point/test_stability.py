"""Stability windows: the agreement rule, the exact per-window figures, what is measured."""

from __future__ import annotations

import asyncio

import pytest

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.point.stability import (
    StabilityConfig,
    WindowProgress,
    _in_flight_ns,
    agree,
    measure_windows,
    settle_records,
    watch_windows,
)

MS = 1_000_000


def rec(index: int, sent_ms: float, end_ms: float | None, error: str | None = None,
        warmup: bool = False) -> RequestRecord:
    return RequestRecord(
        index=index, warmup=warmup, sent_ns=int(sent_ms * MS),
        first_token_ns=int(end_ms * MS) if end_ms is not None else None,
        last_token_ns=int(end_ms * MS) if end_ms is not None else None,
        status=200, error_type=error,
    )


def test_agree_is_max_over_min_of_the_last_three() -> None:
    assert not agree([(10.0, 5.0), (10.0, 5.0)], 10)  # fewer than three windows
    assert agree([(1.0, 1.0), (10.0, 5.0), (10.5, 5.2), (11.0, 5.4)], 10)
    assert not agree([(10.0, 5.0), (10.0, 5.0), (11.1, 5.0)], 10)  # 11.1 / 10 > 1.10
    assert not agree([(10.0, 5.0), (10.0, 5.6), (10.0, 5.0)], 10)  # latency too
    assert not agree([(10.0, 5.0), (0.0, None), (10.0, 5.0)], 999)  # an empty window
    assert agree([(1.0, 1.0), (9.0, 9.0), (5.0, 5.0)], 999)  # GenAI-Perf's default


def test_in_flight_integral_is_littles_law() -> None:
    # Two requests of 10 ms each inside [0, 40): 20 request-ms in flight, 10 ms mean latency.
    area = _in_flight_ns([5 * MS, 20 * MS], [15 * MS, 30 * MS], 0, 40 * MS)
    assert area == 20 * MS
    # One in flight across the whole window counts the window's length.
    assert _in_flight_ns([-5 * MS], [], 0, 40 * MS) == 40 * MS


def test_window_progress_stamps_every_increment() -> None:
    p = WindowProgress()
    p.sent += 1
    p.sent += 1
    p.done += 1
    p.sent, p.done = 5, 3  # a multi-worker parent adds in steps
    assert (p.sent, p.done) == (5, 3)
    assert len(p.sent_at) == 5 and len(p.done_at) == 3
    assert p.sent_at == sorted(p.sent_at)


def test_measure_and_settle() -> None:
    cfg = StabilityConfig(interval_ms=100, percentage=50)
    bounds = [(k * 100 * MS, (k + 1) * 100 * MS) for k in range(4)]
    records = [
        rec(0, 0, 10, warmup=True),  # warm-up stays warm-up
        rec(1, 10, 60),  # window 0
        rec(2, 90, 150),  # straddles 0|1: in no window, sent before the reported ones
        rec(3, 110, 170),  # window 1
        rec(4, 180, 230),  # straddles 1|2: measured (the last three span 100..400)
        rec(5, 210, 260),  # window 2
        rec(6, 310, 350),  # window 3
        rec(7, 320, 330, error="http_500"),  # an error inside: measured, counted as one
        rec(8, 380, None, error="interrupted"),  # cut off when the load stopped
        rec(9, 390, 420),  # completed after the last window
    ]
    st = measure_windows(records, bounds, cfg)
    assert [w.completed_requests for w in st.windows] == [1, 1, 1, 1]
    assert st.windows[1].avg_request_latency_ms == pytest.approx(60.0)
    assert st.windows[0].request_throughput == pytest.approx(10.0)
    assert st.stable and st.reported_windows == 3
    assert st.throughput_spread_pct == 0.0
    assert st.latency_spread_pct == pytest.approx((60 / 40 - 1) * 100)
    settle_records(records, st)
    measured = [r.index for r in records if not r.warmup]
    assert measured == [3, 4, 5, 6, 7]


def test_watch_windows_stops_the_load_when_three_agree() -> None:
    async def scenario() -> tuple[list[tuple[int, int]], bool]:
        p = WindowProgress()
        stop = asyncio.Event()
        cfg = StabilityConfig(interval_ms=30, percentage=999, max_windows=10)

        async def load() -> None:
            while not stop.is_set():
                p.sent += 1
                await asyncio.sleep(0.002)
                p.done += 1

        task = asyncio.ensure_future(load())
        bounds = await watch_windows(p, cfg, 0, stop)
        await task
        return bounds, stop.is_set()

    bounds, stopped = asyncio.run(scenario())
    assert stopped and len(bounds) == 3  # 999 %: any three windows agree
    assert all(b - a == 30 * MS for a, b in bounds)


def test_config_errors() -> None:
    with pytest.raises(ValueError, match="--measurement-interval"):
        StabilityConfig(interval_ms=0)
    with pytest.raises(ValueError, match="--stability-percentage"):
        StabilityConfig(interval_ms=10, percentage=0)
