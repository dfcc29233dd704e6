"""When a scheduled benchmark runs: cron ticks in its time zone, missed ticks, the clock.

Pure functions (the clock is an argument), so the rules are tested without waiting: a tick
runs when it has passed since the last one recorded; after an outage only the latest missed
tick runs (at most one catch-up), and not at all when it is older than
``startingDeadlineSeconds``, as CronJob does.
"""

from __future__ import annotations

import hashlib
import json
import zoneinfo
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import cronsim

from llmbench.api import cron_expression

__all__ = [
    "SCHEDULING_FIELDS",
    "Clock",
    "ScheduleError",
    "due_tick",
    "measured_hash",
    "next_tick",
    "parse_time",
    "rfc3339",
]

#: Spec fields that say when to run, how to judge a run and where to keep its files, not what
#: to measure: changing them starts no run (and runs before and after the change stay
#: comparable baselines).
SCHEDULING_FIELDS = (
    "schedule", "timeZone", "suspend", "concurrencyPolicy", "startingDeadlineSeconds",
    "historyLimit", "baseline", "artifacts", "trigger",
)
#: Ticks looked at after an outage before giving up counting (a per-minute schedule down for
#: a week is 10080 ticks); only the latest one can run anyway.
_MAX_TICKS = 100_000


def parse_time(text: str) -> datetime:
    """An RFC 3339 timestamp as Kubernetes writes them (``Z`` suffix), timezone-aware."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def rfc3339(t: datetime) -> str:
    """``2026-12-01T02:00:00Z``."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _zone(time_zone: str | None) -> zoneinfo.ZoneInfo:
    return zoneinfo.ZoneInfo(time_zone or "UTC")


class ScheduleError(ValueError):
    """A schedule or time zone no tick can come from (refused by ``Spec.from_manifest`` too,
    which reports it as ``Accepted=False``; here it only means: no ticks)."""


def _ticks(schedule: str, time_zone: str | None, after: datetime) -> Iterator[datetime]:
    try:
        ticks: Iterator[datetime] = cronsim.CronSim(
            cron_expression(schedule), after.astimezone(_zone(time_zone))
        )
        return ticks
    except (cronsim.CronSimError, zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ScheduleError(f"{schedule!r} ({time_zone or 'UTC'}): {exc}") from None


def next_tick(schedule: str, time_zone: str | None, after: datetime) -> datetime:
    """The first tick strictly after ``after`` (UTC); :class:`ScheduleError` if none can be."""
    return next(_ticks(schedule, time_zone, after)).astimezone(UTC)


def due_tick(
    schedule: str,
    time_zone: str | None,
    last: datetime,
    now: datetime,
    deadline_s: int | None = None,
) -> tuple[datetime | None, datetime | None]:
    """(the tick to run now or None, the latest tick passed since ``last`` or None).

    The second value is recorded as ``lastScheduleTime`` even when nothing runs (a tick too
    late for the deadline, or skipped because a run is in progress), so it is never
    considered again.
    """
    it = _ticks(schedule, time_zone, last)
    latest: datetime | None = None
    for _ in range(_MAX_TICKS):
        tick = next(it).astimezone(UTC)
        if tick > now:
            break
        latest = tick
    if latest is None:
        return None, None
    if deadline_s is not None and (now - latest) > timedelta(seconds=deadline_s):
        return None, latest
    return latest, latest


def measured_hash(spec: Mapping[str, Any]) -> str:
    """A digest of what a run measures: the spec without its scheduling fields, so toggling
    ``suspend`` or moving the schedule does not start a run."""
    kept = {k: v for k, v in spec.items() if k not in SCHEDULING_FIELDS}
    return hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]


class Clock:
    """``now`` in UTC, shifted by the seconds in ``offset_file`` when one is given.

    Why: schedules tick in minutes, and tests must not sleep minutes. The e2e tests move this
    clock forward instead (``llmbench operator --clock-offset-file``, hidden from ``--help``).
    """

    def __init__(self, offset_file: str | None = None) -> None:
        self.offset_file = offset_file

    def now(self) -> datetime:
        offset = 0.0
        if self.offset_file:
            try:
                offset = float(Path(self.offset_file).read_text().strip() or 0)
            except (OSError, ValueError):
                offset = 0.0
        return datetime.now(UTC) + timedelta(seconds=offset)


def next_run_fields(spec: Mapping[str, Any], now_: datetime) -> dict[str, Any]:
    """``nextRunTime`` of a scheduled, unsuspended benchmark (None removes it)."""
    sched = spec.get("schedule")
    if not sched or spec.get("suspend"):
        return {"nextRunTime": None}
    try:
        return {"nextRunTime": rfc3339(next_tick(sched, spec.get("timeZone"), now_))}
    except ScheduleError:  # the spec check reports it (Accepted=False)
        return {"nextRunTime": None}

