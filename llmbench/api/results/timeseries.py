"""One point's time series (``<stem>_timeseries.jsonl``): its client figures and the scraped
server and GPU gauges, slice by slice, on one clock.

Why a document of its own rather than a key of :class:`~.point.PointResult`: a point's result
goes to the operator's status, its ConfigMap and the digest, which must stay small; a time
series grows with the run's length (one slice a second by default). It is written next to the
point's other files and read back only to re-render (``llmbench report``, ``llmbench results
--timeseries``).

Slices follow AIPerf's timeslices (``--slice-duration``): equal, non-overlapping, half-open
``[start, end)`` windows, zero-indexed, the last one shorter when the point ends mid-slice.
Ours start at the point's T_x (its first measured send), so slice edges are the same for the
client's records and the scrapes (both ``time.perf_counter_ns`` stamps).
"""

from __future__ import annotations

from .files import ResultModel

__all__ = ["TimeSeries", "TimeSlice"]


class TimeSlice(ResultModel):
    """One slice; times in seconds since T_x. ``None``: nothing to measure in the slice (no
    request of its kind, or no scrape), never 0.

    Request figures: ``requests_sent`` counts the measured requests sent in the slice,
    ``requests_completed`` those whose last token arrived in it, ``requests_failed`` the
    failures by the last time the client saw of them (their last chunk, else their send). TTFT
    and ITL percentiles are over the completed requests *sent* in the slice (AIPerf's rule:
    a request belongs to the slice it started in). ``output_tokens`` are the tokens that
    arrived in the slice (a request's tokens spread evenly over its content chunks), so the
    slices add up to the point's output tokens; ``output_token_throughput`` is them over the
    slice's length.

    Scraped figures are the mean of the scrapes taken in the slice: ``requests_running`` and
    ``requests_waiting`` summed over the inference servers and ``kv_cache_usage`` (0..1)
    averaged; ``gpu_power_w`` summed over the kept GPUs and ``gpu_utilization_pct`` averaged.
    A sum is ``None`` unless every source was scraped in the slice (a missing one would read
    as a drop).
    """

    timeslice_index: int
    start_s: float
    end_s: float
    requests_sent: int
    requests_completed: int
    requests_failed: int
    ttft_p50_ms: float | None
    ttft_p99_ms: float | None
    itl_p50_ms: float | None
    itl_p99_ms: float | None
    output_tokens: float
    output_token_throughput: float
    requests_running: float | None
    requests_waiting: float | None
    kv_cache_usage: float | None
    gpu_power_w: float | None
    gpu_utilization_pct: float | None
    server_scrapes: int
    gpu_scrapes: int


class TimeSeries(ResultModel):
    """A point's slices and what they were built from.

    ``start_ns`` is T_x on the runner's monotonic clock; ``epoch_start_ns`` the same instant
    in wall-clock time (``None`` when unknown), so the slices can be lined up with a
    Prometheus or Grafana view of the same run. ``servers`` and ``gpus`` name the scraped
    sources that fed the slices.
    """

    interval_s: float
    start_ns: int
    epoch_start_ns: int | None
    servers: list[str]
    gpus: list[str]
    timeslices: list[TimeSlice]
