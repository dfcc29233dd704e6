"""A point's time series: its requests and its scrapes cut into the same slices.

Why a pure function over what the point already holds: the records and the telemetry window
(:class:`~llmbench.runner.telemetry.model.TelemetryResult`, whose series carry each scrape's
time since the window opened) are stamped on one clock, ``time.perf_counter_ns``, so one set
of slice edges serves both, and the slices of a recorded run are the slices of the live one.

The slices are AIPerf's timeslices (equal, half-open ``[start, end)``, zero-indexed, the last
one shorter when the point ends mid-slice), starting at T_x (the first measured send) and
covering the point's window up to T_y (the last measured token); what each figure counts is
documented on :class:`~llmbench.api.results.TimeSlice`.

Example::

    series = build_timeseries(records, telemetry, interval_s=1.0)
    series.timeslices[3].ttft_p99_ms      # p99 TTFT of the requests sent in [3 s, 4 s)
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from llmbench.api.results import TimeSeries, TimeSlice
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.point.metrics import window
from llmbench.runner.telemetry.model import TelemetryResult

__all__ = ["DEFAULT_INTERVAL_S", "build_timeseries"]

#: One slice a second, as inference-perf and AIPerf users plot them.
DEFAULT_INTERVAL_S = 1.0


def build_timeseries(
    records: Sequence[RequestRecord],
    telemetry: TelemetryResult | None = None,
    *,
    interval_s: float = DEFAULT_INTERVAL_S,
    streaming: bool = True,
    epoch_offset_ns: int | None = None,
) -> TimeSeries | None:
    """The point's slices of ``interval_s`` seconds; ``None`` when no measured request
    completed (the point has no window to slice).

    ``telemetry`` adds the scraped gauges (``None``: the columns stay empty);
    ``streaming`` off leaves TTFT and ITL empty, as the point's own statistics do;
    ``epoch_offset_ns`` (epoch ns minus ``perf_counter_ns``, taken when the point started)
    dates T_x in wall-clock time.

    Raises:
        ValueError: ``interval_s`` is not a positive number.
    """
    if not (interval_s > 0 and math.isfinite(interval_s)):
        raise ValueError(
            f"the time-series interval must be a positive number of seconds, got {interval_s!r} "
            "(--timeseries-interval, spec.telemetry.timeseriesIntervalSeconds)"
        )
    bounds = window(records)
    if bounds is None:
        return None
    t_x, t_y = bounds
    step = round(interval_s * 1e9)
    count = max(1, -(-(t_y - t_x) // step))  # ceil; T_y itself goes into the last slice
    edges = [t_x + k * step for k in range(count)] + [t_y]

    def slot(t_ns: int) -> int:
        return min(count - 1, max(0, (t_ns - t_x) // step))

    sent = [0] * count
    completed = [0] * count
    failed = [0] * count
    tokens = [0.0] * count
    ttft: list[list[float]] = [[] for _ in range(count)]
    itl: list[list[float]] = [[] for _ in range(count)]
    for rec in records:
        if rec.warmup:
            continue
        k = slot(rec.sent_ns)
        sent[k] += 1
        if not rec.ok:
            seen = rec.chunk_ns[-1] if rec.chunk_ns else rec.last_token_ns
            failed[slot(seen if seen is not None else rec.sent_ns)] += 1
            continue
        assert rec.last_token_ns is not None
        completed[slot(rec.last_token_ns)] += 1
        osl = rec.output_tokens if rec.output_tokens is not None else rec.output_tokens_client
        if osl:
            _spread(tokens, osl, rec.chunk_ns or [rec.last_token_ns], edges, slot)
        if streaming and rec.first_token_ns is not None:
            first_ms = (rec.first_token_ns - rec.sent_ns) / 1e6
            ttft[k].append(first_ms)
            if osl is not None and osl > 1:
                e2e_ms = (rec.last_token_ns - rec.sent_ns) / 1e6
                itl[k].append((e2e_ms - first_ms) / (osl - 1))

    gauges = _scraped(telemetry, edges, step) if telemetry is not None else None
    slices = []
    for k in range(count):
        length_s = (edges[k + 1] - edges[k]) / 1e9
        g = gauges[k] if gauges is not None else _Gauges()
        slices.append(
            TimeSlice(
                timeslice_index=k,
                start_s=(edges[k] - t_x) / 1e9,
                end_s=(edges[k + 1] - t_x) / 1e9,
                requests_sent=sent[k],
                requests_completed=completed[k],
                requests_failed=failed[k],
                ttft_p50_ms=_pct(ttft[k], 50),
                ttft_p99_ms=_pct(ttft[k], 99),
                itl_p50_ms=_pct(itl[k], 50),
                itl_p99_ms=_pct(itl[k], 99),
                output_tokens=tokens[k],
                output_token_throughput=tokens[k] / length_s if length_s > 0 else 0.0,
                **g._asdict(),
            )
        )
    return TimeSeries(
        interval_s=interval_s,
        start_ns=t_x,
        epoch_start_ns=None if epoch_offset_ns is None else t_x + epoch_offset_ns,
        servers=sorted(telemetry.servers) if telemetry is not None else [],
        gpus=sorted(telemetry.gpus) if telemetry is not None else [],
        timeslices=slices,
    )


def _spread(
    tokens: list[float], osl: int, stamps: Sequence[int], edges: list[int],
    slot: Callable[[int], int],
) -> None:
    """Adds a request's ``osl`` tokens to the slices its chunks (``stamps``, in arrival
    order) arrived in, evenly per chunk.

    By bisection at the slice edges the request spans (one or two, mostly), not chunk by
    chunk: a long run holds millions of chunks, and this costs no array of them.
    """
    share = osl / len(stamps)
    first, last = slot(stamps[0]), slot(stamps[-1])
    before = 0
    for k in range(first, last):
        upto = bisect_left(stamps, edges[k + 1])
        tokens[k] += (upto - before) * share
        before = upto
    tokens[last] += (len(stamps) - before) * share


def _pct(values: list[float], q: int) -> float | None:
    """Linear-interpolated percentile, as the point's statistics; None for no value."""
    return float(np.percentile(values, q)) if values else None


class _Gauges(NamedTuple):
    """The scraped figures of one slice (empty: no telemetry)."""

    requests_running: float | None = None
    requests_waiting: float | None = None
    kv_cache_usage: float | None = None
    gpu_power_w: float | None = None
    gpu_utilization_pct: float | None = None
    server_scrapes: int = 0
    gpu_scrapes: int = 0


#: One scrape of a series: seconds since the window opened, then its values.
_Row = tuple[float | None, ...]


def _scraped(
    telemetry: TelemetryResult, edges: list[int], step: int
) -> list[_Gauges]:
    """Per slice: the scraped gauges (see :class:`~llmbench.api.results.TimeSlice`).

    A scrape belongs to the slice its body arrived in; scrapes before T_x (the window opens
    before the first send) or after T_y belong to none.
    """
    count = len(edges) - 1
    t_x, t_y = edges[0], edges[-1]
    w0 = telemetry.window_start_ns

    def where(t_s: float | None) -> int | None:
        if t_s is None:
            return None
        t = w0 + round(t_s * 1e9)
        if t < t_x or t > t_y:
            return None
        return min(count - 1, (t - t_x) // step)

    # per source, per slice: the values of its scrapes in the slice
    def binned(series: Sequence[_Row], col: int) -> list[list[float]]:
        out: list[list[float]] = [[] for _ in range(count)]
        for row in series:
            k = where(row[0])
            value = row[col]
            if k is not None and value is not None:
                out[k].append(float(value))
        return out

    def scrapes(series: Sequence[_Row]) -> list[int]:
        n = [0] * count
        for row in series:
            k = where(row[0])
            if k is not None:
                n[k] += 1
        return n

    servers = list(telemetry.servers.values())
    gpus = list(telemetry.gpus.values())
    kv = [binned(s.series, 1) for s in servers]
    running = [binned(s.series, 2) for s in servers]
    waiting = [binned(s.series, 3) for s in servers]
    power = [binned(g.series, 1) for g in gpus]
    util = [binned(g.series, 2) for g in gpus]
    server_n = [scrapes(s.series) for s in servers]
    gpu_n = [scrapes(g.series) for g in gpus]
    return [
        _Gauges(
            requests_running=_sum_of_means(running, k),
            requests_waiting=_sum_of_means(waiting, k),
            kv_cache_usage=_mean_of_means(kv, k),
            gpu_power_w=_sum_of_means(power, k),
            gpu_utilization_pct=_mean_of_means(util, k),
            server_scrapes=sum(n[k] for n in server_n),
            gpu_scrapes=sum(n[k] for n in gpu_n),
        )
        for k in range(count)
    ]


def _sum_of_means(per_source: list[list[list[float]]], k: int) -> float | None:
    """Sum over the sources of their mean in slice ``k``; None unless every source has one."""
    if not per_source or any(not src[k] for src in per_source):
        return None
    return float(sum(sum(src[k]) / len(src[k]) for src in per_source))


def _mean_of_means(per_source: list[list[list[float]]], k: int) -> float | None:
    """Mean over the sources that have a value in slice ``k``; None when none has."""
    means = [sum(src[k]) / len(src[k]) for src in per_source if src[k]]
    return float(sum(means) / len(means)) if means else None
