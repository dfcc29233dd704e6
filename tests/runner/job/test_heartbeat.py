"""The point under way: its record (counts, percent, ETAs), its heartbeat line, and the line
of figures a finished point logs."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from llmbench.api.job import PROGRESS_KEY
from llmbench.api.results import PointResult, read_result
from llmbench.api.status import CurrentPoint
from llmbench.runner.job import heartbeat
from llmbench.runner.job.heartbeat import Heartbeat, current_point, figures_line, heartbeat_line
from llmbench.runner.job.store import DirStore
from llmbench.runner.load.result import Progress

T0 = datetime(2026, 12, 2, 3, 0, 0, tzinfo=UTC)
DATA = Path(__file__).resolve().parents[1] / "point" / "data" / "telemetry_goodput.json"


def test_a_request_bound_point_reports_its_share_and_both_etas() -> None:
    cp = current_point(name="m-concurrency8", value=8, number=4, total=6, done=50, errors=1,
                       requests_target=200, seconds_target=None, started=T0,
                       now=T0 + timedelta(seconds=10), mean_point_s=30.0)
    assert (cp.requests_done, cp.requests_target, cp.percent) == (50, 200, 25.0)
    assert cp.started == "2026-12-02T03:00:00Z" and cp.updated == "2026-12-02T03:00:10Z"
    assert cp.point_eta == "2026-12-02T03:00:40Z"  # 10 s for 50 of 200: 40 s in all
    assert cp.sweep_eta == "2026-12-02T03:01:40Z"  # then 2 points left at 30 s each
    line = heartbeat_line(cp, 6)
    assert line.startswith("2026-12-02T03:00:10Z heartbeat: point 4/6 m-concurrency8: ")
    assert "50/200 requests (25%), 1 errors, 10 s, point ETA 2026-12-02T03:00:40Z" in line
    assert line.endswith("sweep ETA 2026-12-02T03:01:40Z")


def test_before_any_point_ended_the_sweep_eta_uses_this_points_pace() -> None:
    cp = current_point(name="p", value=1, number=1, total=3, done=10, errors=0,
                       requests_target=20, seconds_target=None, started=T0,
                       now=T0 + timedelta(seconds=5), mean_point_s=None)
    assert cp.point_eta == "2026-12-02T03:00:10Z"
    assert cp.sweep_eta == "2026-12-02T03:00:30Z"  # 10 s a point, 2 more
    nothing_yet = current_point(name="p", value=1, number=1, total=3, done=0, errors=0,
                                requests_target=20, seconds_target=None, started=T0,
                                now=T0 + timedelta(seconds=1), mean_point_s=None)
    assert nothing_yet.percent == 0.0 and nothing_yet.point_eta is None
    assert nothing_yet.sweep_eta is None


def test_a_time_bound_point_counts_seconds() -> None:
    cp = current_point(name="p", value=2, number=2, total=2, done=7, errors=0,
                       requests_target=None, seconds_target=60.0, started=T0,
                       now=T0 + timedelta(seconds=15), mean_point_s=50.0)
    assert (cp.seconds_done, cp.seconds_target, cp.percent) == (15.0, 60.0, 25.0)
    assert cp.point_eta == cp.sweep_eta == "2026-12-02T03:01:00Z"  # the last point
    assert "15/60 s, 7 requests (25%)" in heartbeat_line(cp, 2)


def test_a_finished_point_logs_one_line_of_figures() -> None:
    summary = read_result(PointResult, DATA)
    line = figures_line("m-concurrency4", summary, T0)
    ttft = summary.time_to_first_token
    assert ttft is not None
    assert line.startswith("2026-12-02T03:00:00Z m-concurrency4: p99 TTFT ")
    assert f"p99 TTFT {ttft.p99:.1f} ms" in line
    assert f"errors {summary.errors.total}" in line
    for figure in ("p99 ITL", "OTT", "RPS"):
        assert figure in line


def test_the_heartbeat_writes_records_while_the_point_runs_and_none_after_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(heartbeat, "INTERVAL_S", 0.05)
    store = DirStore(tmp_path)
    counters = Progress()

    def record() -> CurrentPoint:
        return current_point(name="p", value=1, number=1, total=1, done=counters.done,
                             errors=0, requests_target=10, seconds_target=None, started=T0,
                             now=T0 + timedelta(seconds=counters.done), mean_point_s=None)

    async def run() -> None:
        beat = Heartbeat(store, counters, record, 1)
        beat.start()
        for _ in range(4):
            counters.done += 2
            await asyncio.sleep(0.08)
        await beat.close()
        store.write({PROGRESS_KEY: None})  # the point's results remove it
        await asyncio.sleep(0.2)  # no beat after close writes it back

    with caplog.at_level(logging.INFO, logger="llmbench.job"):
        asyncio.run(run())
    assert PROGRESS_KEY not in store.read()
    beats = [r.getMessage() for r in caplog.records if " heartbeat: " in r.getMessage()]
    assert len(beats) >= 2 and "/10 requests (" in beats[-1]
    dones = [int(b.split(": ")[2].split("/")[0]) for b in beats]
    assert dones == sorted(dones) and 0 < dones[-1] <= 8
