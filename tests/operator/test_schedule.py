"""Schedule ticks, missed ticks and what counts as a change of what is measured."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from llmbench.operator.schedule import (
    Clock,
    due_tick,
    measured_hash,
    next_tick,
    parse_time,
    rfc3339,
)

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def test_next_tick_in_utc_and_in_a_time_zone() -> None:
    assert next_tick("0 2 * * *", None, T0) == T0 + timedelta(days=1)
    assert next_tick("*/5 * * * *", None, T0) == T0 + timedelta(minutes=5)
    # 02:00 in Berlin is 01:00 UTC in winter
    assert next_tick("0 2 * * *", "Europe/Berlin", T0) == datetime(2026, 12, 2, 1, 0, tzinfo=UTC)


def test_no_tick_yet_runs_nothing() -> None:
    assert due_tick("*/5 * * * *", None, T0, T0 + timedelta(minutes=4)) == (None, None)


def test_after_an_outage_only_the_latest_missed_tick_runs() -> None:
    tick, latest = due_tick("*/5 * * * *", None, T0, T0 + timedelta(hours=3, minutes=2))
    assert tick == latest == T0 + timedelta(hours=3)


def test_a_tick_older_than_the_starting_deadline_is_recorded_but_not_run() -> None:
    now = T0 + timedelta(minutes=12)
    assert due_tick("*/5 * * * *", None, T0, now, deadline_s=60) == (
        None, T0 + timedelta(minutes=10))
    assert due_tick("*/5 * * * *", None, T0, now, deadline_s=300)[0] == T0 + timedelta(minutes=10)


def test_scheduling_fields_do_not_change_what_is_measured() -> None:
    spec = {"target": {"url": "http://a:1"}, "sweep": {"type": "concurrency", "range": "1:8"}}
    base = measured_hash(spec)
    for extra in ({"schedule": "@daily"}, {"suspend": True}, {"timeZone": "UTC"},
                  {"concurrencyPolicy": "Replace"}, {"historyLimit": 3},
                  {"startingDeadlineSeconds": 60},
                  {"artifacts": {"pvc": {"claimName": "files"}}}):
        assert measured_hash({**spec, **extra}) == base, extra
    assert measured_hash({**spec, "sweep": {"type": "concurrency", "range": "1:4"}}) != base


def test_the_clock_moves_by_the_offset_in_its_file(tmp_path: Path) -> None:
    f = tmp_path / "offset"
    clock = Clock(str(f))
    assert abs((clock.now() - datetime.now(UTC)).total_seconds()) < 5  # no file: no offset
    f.write_text("3600")
    assert 3590 < (clock.now() - datetime.now(UTC)).total_seconds() < 3610
    assert rfc3339(parse_time("2026-12-01T02:00:00Z")) == "2026-12-01T02:00:00Z"


def test_a_schedule_that_never_fires_or_a_bad_zone_is_a_schedule_error() -> None:
    from llmbench.operator.schedule import ScheduleError

    for sched, zone in (("0 0 30 2 *", None), ("@daily", "Mars/Olympus")):
        try:
            due_tick(sched, zone, T0, T0 + timedelta(days=400))
        except ScheduleError as exc:
            assert sched in str(exc)
        else:
            raise AssertionError(f"{sched} {zone} gave ticks")
