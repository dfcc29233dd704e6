"""The point under way, told while it runs: a progress record in the results store and a
timestamped heartbeat in the log every ~10 s, and one line of figures when a point ends.

Why: a sweep of long points otherwise looks frozen (``status.progress`` moves only when a
point ends, and the log says nothing in between). The counts come from the load engine's own
live counters (:class:`~llmbench.runner.load.result.Progress`, the ones the CLI's progress bar
polls, handed to :func:`~llmbench.runner.point.profile.run_profile` as ``progress``): nothing
in the request path changes. The record (:class:`~llmbench.api.status.CurrentPoint`) is what
the operator copies into ``status.currentPoint``; a write is at most every
:data:`INTERVAL_S`, one small merge patch of one key, so the API server sees a handful of
writes a minute per run.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from llmbench.api.job import PROGRESS_KEY
from llmbench.api.results import PointResult
from llmbench.api.status import CurrentPoint, dump
from llmbench.runner.job.store import ResultsStore, StoreError
from llmbench.runner.load.result import Progress

__all__ = ["INTERVAL_S", "Heartbeat", "current_point", "figures_line", "heartbeat_line", "wall_now"]

log = logging.getLogger("llmbench.job")

#: Seconds between two records (and heartbeat lines) of one point.
INTERVAL_S = 10.0


def _stamp(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def current_point(
    *, name: str, value: float, number: int, total: int, done: int, errors: int,
    requests_target: int | None, seconds_target: float | None, started: datetime,
    now: datetime, mean_point_s: float | None,
) -> CurrentPoint:
    """The record of point ``number`` of ``total`` after ``done`` requests at ``now``.

    The point's ETA is its pace so far (requests: ``started + elapsed * target / done``; a
    time-bound point: ``started + seconds_target``); the sweep's adds the points left after
    this one at ``mean_point_s`` (the mean duration of the points this pod measured), or at
    this point's projected duration before any ended.

    Example: 50 of 200 requests 10 s in: 25 %, the point ends 30 s from now.
    """
    elapsed = max(0.0, (now - started).total_seconds())
    percent: float | None = None
    point_end: datetime | None = None
    if requests_target:
        percent = min(100.0, 100.0 * done / requests_target)
        if done > 0:
            point_end = started + timedelta(seconds=elapsed * requests_target / done)
    elif seconds_target:
        percent = min(100.0, 100.0 * elapsed / seconds_target)
        point_end = started + timedelta(seconds=seconds_target)
    sweep_end: datetime | None = None
    if point_end is not None:
        per_point = mean_point_s if mean_point_s is not None else (
            (point_end - started).total_seconds())
        sweep_end = point_end + timedelta(seconds=per_point * max(0, total - number))
    return CurrentPoint(
        name=name, value=value, number=number, total=total, requests_done=done,
        requests_target=requests_target, errors=errors, seconds_done=round(elapsed, 1),
        seconds_target=seconds_target,
        percent=round(percent, 1) if percent is not None else None,
        started=_stamp(started), updated=_stamp(now),
        point_eta=_stamp(point_end) if point_end is not None else None,
        sweep_eta=_stamp(sweep_end) if sweep_end is not None else None,
    )


def heartbeat_line(cp: CurrentPoint, total: int) -> str:
    """One log line for a record, starting with its UTC time (``kubectl logs`` shows none)."""
    if cp.requests_target:
        amount = f"{cp.requests_done}/{cp.requests_target} requests"
    else:
        of = f"/{cp.seconds_target:g}" if cp.seconds_target else ""
        amount = f"{cp.seconds_done:.0f}{of} s, {cp.requests_done} requests"
    pct = f" ({cp.percent:.0f}%)" if cp.percent is not None else ""
    eta = "".join(
        f", {what} ETA {when}" for what, when in (("point", cp.point_eta),
                                                   ("sweep", cp.sweep_eta)) if when
    )
    return (f"{cp.updated} heartbeat: point {cp.number}/{total} {cp.name}: {amount}{pct}, "
            f"{cp.errors} errors, {cp.seconds_done:.0f} s{eta}")


def _ms(stat: object) -> str:
    p99 = getattr(stat, "p99", None)
    return f"{p99:.1f} ms" if isinstance(p99, float | int) else "n/a"


def figures_line(name: str, summary: PointResult, at: datetime) -> str:
    """The figures of a finished point, one line: p99 TTFT, p99 ITL, OTT, RPS, errors."""
    ott = summary.output_token_throughput.avg
    rps = summary.request_throughput.avg
    return (
        f"{_stamp(at)} {name}: p99 TTFT {_ms(summary.time_to_first_token)}, p99 ITL "
        f"{_ms(summary.inter_token_latency)}, OTT "
        f"{f'{ott:.1f} tok/s' if ott is not None else 'n/a'}, RPS "
        f"{f'{rps:.2f}' if rps is not None else 'n/a'}, errors {summary.errors.total}"
    )


class Heartbeat:
    """The heartbeat of one point: :meth:`run` until :meth:`close`.

    A store write runs in a thread (the store's client is synchronous); :meth:`close` waits
    for one in flight and stops later ones, so no record of a finished point lands after the
    point's results (which remove it).
    """

    def __init__(
        self, store: ResultsStore | None, counters: Progress, record: Callable[[], CurrentPoint],
        total: int, scrub: Callable[[str], str] = str,
    ) -> None:
        self.store, self.counters, self.record, self.total = store, counters, record, total
        self.scrub = scrub
        self._lock = threading.Lock()
        self._closed = False
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Starts the loop on the running event loop."""
        self._task = asyncio.create_task(self.run(), name="llmbench-heartbeat")

    async def run(self) -> None:
        """Every :data:`INTERVAL_S`: the record to the store, the heartbeat to the log."""
        while True:
            await asyncio.sleep(INTERVAL_S)
            cp = self.record()
            log.info("%s", heartbeat_line(cp, self.total))
            if self.store is not None:
                await asyncio.to_thread(self._write, cp)

    def _write(self, cp: CurrentPoint) -> None:
        with self._lock:
            if self._closed or self.store is None:
                return
            try:
                self.store.write({PROGRESS_KEY: self.scrub(json.dumps(dump(cp)))})
            except StoreError as exc:  # the next beat tries again; results never wait on it
                log.warning("progress not written: %s", exc)

    async def close(self) -> None:
        """Stops the loop; returns once no record can be written any more."""
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except asyncio.CancelledError:
                pass
        await asyncio.to_thread(self._shut)

    def _shut(self) -> None:
        with self._lock:
            self._closed = True


def wall_now() -> datetime:
    """The wall clock in UTC (records carry times people read; ETAs are wall times)."""
    return datetime.fromtimestamp(time.time(), UTC)
