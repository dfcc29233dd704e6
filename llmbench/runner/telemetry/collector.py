"""Scrapes Prometheus text endpoints while a point's measurement window is open.

Why this module exists: it is telemetry's only I/O. :class:`TelemetryCollector` is started by the
profile runner when the window opens and stopped when it closes; it fetches every URL with
httpx on a fixed grid plus once at each window boundary, keeps the compacted text and hands it to
:func:`~llmbench.runner.telemetry.summary.summarize_scrapes`. It never raises into the run: an
unreachable exporter or garbage costs one warning naming the URL, and the run goes on without
that table.

The closing boundary settles: a server may count a request as completed a little after it sent
the last byte (llm-d-inference-sim updates its counters from a channel, so a scrape right after
the last response showed 144 of 160 requests with 0 running). Comparing that scrape with the
client's count would be a false alarm, so inference-server URLs are scraped again every
:data:`SETTLE_STEP_S` until their counters stop moving, bounded by a few scrape intervals.

Example::

    collector = TelemetryCollector(
        metrics_urls("http://vllm:8000/v1", ["http://10.0.0.7:9400/metrics"]),
        interval_s=1.0,
        gpu_filter=GpuFilter(pods=("vllm-0",), namespaces=("llm",)),
    )
    await collector.start()          # when the measurement window opens
    ...                              # measured requests
    result = await collector.stop()  # when it closes
    rows = telemetry_json(result).gpu_rows()
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence

import httpx

from llmbench.runner.telemetry.model import GpuFilter, Scrape, Settle, TelemetryResult
from llmbench.runner.telemetry.parse import compact_exposition
from llmbench.runner.telemetry.summary import ServerProgress, server_progress, summarize_scrapes

__all__ = ["SETTLE_INTERVALS", "SETTLE_MAX_S", "SETTLE_STEP_S", "TelemetryCollector"]

#: Spacing of the settle scrapes (or the scrape interval when that is shorter): long enough
#: for a server's own metric updates to land, short enough to add little to each point.
SETTLE_STEP_S = 0.1
#: The settle scrapes end after this many scrape intervals ...
SETTLE_INTERVALS = 3.0
#: ... and never last longer than this: foreign traffic can keep counters moving for ever.
SETTLE_MAX_S = 10.0

# The package's name, as before the split, so log lines and logging filters keep their name.
logger = logging.getLogger("llmbench.runner.telemetry")


class TelemetryCollector:
    """Scrapes Prometheus text endpoints across measurement windows.

    ``start()`` takes a boundary scrape of every URL and starts one periodic asyncio task per
    URL; ``stop()`` cancels them, takes the closing boundary scrape and returns the window's
    summary. Neither raises: a URL that cannot be fetched logs one warning naming it (at its
    first failure) and its table is left out. Timestamps use ``time.perf_counter_ns`` like the
    request records, so the window lines up with the client's.

    The collector may be reused for the next load point (``start()`` again after ``stop()``):
    a URL that never answered in the previous window is then left out of the boundary scrapes
    (its loop still retries it, 5x less often), so a dead exporter costs each point no timeout.
    """

    def __init__(
        self,
        urls: Sequence[str],
        *,
        interval_s: float = 1.0,
        gpu_filter: GpuFilter | None = None,
        timeout_s: float = 2.0,
        headers: Mapping[str, str] | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
        settle_s: float | None = None,
    ) -> None:
        """Configure; nothing is fetched until :meth:`start`.

        Args:
            urls: Prometheus text URLs (dcgm-exporter, the server's ``/metrics``); see
                :func:`metrics_urls`.
            interval_s: periodic scrape interval (``--telemetry-interval``), at least 50 ms.
            gpu_filter: GPUs that serve the target.
            timeout_s: per-request timeout; short so a hung exporter cannot stall the point.
            headers: extra request headers (e.g. a bearer token for a protected endpoint).
            clock: monotonic ns clock, injectable for tests.
            settle_s: longest time to re-scrape server URLs after the closing scrape until
                their counters stop moving (default ``SETTLE_INTERVALS`` x ``interval_s``, at
                most ``SETTLE_MAX_S``); 0 turns settling off.
        """
        self.urls = list(dict.fromkeys(urls))
        self.interval_s = max(0.05, float(interval_s))
        self.gpu_filter = gpu_filter or GpuFilter()
        self.timeout_s = timeout_s
        self._headers = dict(headers or {})
        self._clock = clock
        self.settle_s = (
            min(SETTLE_INTERVALS * self.interval_s, SETTLE_MAX_S)
            if settle_s is None
            else max(0.0, float(settle_s))
        )
        self._settle: dict[str, Settle] = {}
        self._scrapes: dict[str, list[Scrape]] = {}
        self._failures: dict[str, list[str]] = {}
        self._attempts: dict[str, int] = {}
        self._dead: set[str] = set()
        self._client: httpx.AsyncClient | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._t0: int = 0
        self._running = False
        #: the last window's summary (set by :meth:`on_window` ``"end"``)
        self.result: TelemetryResult | None = None
        self._reset()

    async def on_window(self, phase: str) -> None:
        """Adapter for ``run_profile(on_window=...)``: ``"start"`` opens the window, ``"end"``
        closes it and leaves the summary in :attr:`result`."""
        if phase == "start":
            await self.start()
        elif phase == "end":
            self.result = await self.stop()

    def _reset(self) -> None:
        self._settle = {}
        self._scrapes = {u: [] for u in self.urls}
        self._failures = {u: [] for u in self.urls}
        self._attempts = {u: 0 for u in self.urls}

    @property
    def raw_scrapes(self) -> dict[str, list[Scrape]]:
        """The current (or last) window's scrapes, compacted (see :func:`compact_exposition`),
        URL -> ``(t_ns, text)``; keep them to re-analyse offline with :func:`summarize_scrapes`.
        """
        return {u: list(v) for u, v in self._scrapes.items()}

    async def start(self) -> None:
        """Open a window: boundary scrape now, then one every ``interval_s``. Never raises."""
        if self._running:
            return
        self._running = True
        self._reset()
        self._t0 = self._clock()
        if not self.urls:
            return
        try:
            # trust_env=False: metrics endpoints are cluster-internal; a proxy from the
            # environment would only add latency or refuse.
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(self.timeout_s),
                headers=self._headers,
                trust_env=False,
            )
            await self._scrape_all([u for u in self.urls if u not in self._dead])
            # one loop per URL: a slow or black-holed exporter delays only its own samples
            self._tasks = [
                asyncio.create_task(self._loop(u), name=f"llmbench-telemetry {u}")
                for u in self.urls
            ]
        except Exception as exc:  # never take the run down
            logger.warning("telemetry: could not start (%s); continuing without it", exc)

    async def stop(self) -> TelemetryResult:
        """Close the window: stop the loops, boundary scrape, let the servers' counters settle,
        summarise. Never raises."""
        t_end = self._clock()
        t_settled = t_end
        try:
            for task in self._tasks:
                task.cancel()
            for task in self._tasks:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            self._tasks = []
            if self._client is not None:
                # skip URLs that never answered: the run should not wait out their timeouts
                alive = [u for u in self.urls if self._scrapes[u] or not self._failures[u]]
                closing = [u for u in alive if u not in self._dead]
                await self._scrape_all(closing)
                t_end = self._clock()
                await self._settle_all(closing)
                t_settled = self._clock()
        except Exception as exc:
            logger.warning("telemetry: closing scrape failed (%s)", exc)
        finally:
            if self._client is not None:
                with contextlib.suppress(Exception):
                    await self._client.aclose()
                self._client = None
            self._running = False
        result = self._summarize(t_end, t_settled)
        self._dead = {u for u in self.urls if not self._scrapes[u]}
        return result

    async def _settle_all(self, urls: Sequence[str]) -> None:
        """Re-scrape the inference-server URLs until their counters have caught up.

        Only URLs whose closing scrape shows a server's request counters or running gauge take
        part (a DCGM exporter has nothing to settle); each runs its own bounded loop.
        """
        if self.settle_s <= 0:
            return
        watch = {}
        for url in urls:
            if self._scrapes[url]:
                progress = server_progress(self._scrapes[url][-1][1])
                if progress is not None:
                    watch[url] = progress
        if watch:
            deadline = self._clock() + int(self.settle_s * 1e9)
            await asyncio.gather(*(self._settle_one(u, p, deadline) for u, p in watch.items()))

    async def _settle_one(self, url: str, closing: ServerProgress, deadline: int) -> None:
        """Scrape ``url`` every step until it is quiet or ``deadline`` passes.

        Quiet: the completed-request and generated-token counters did not move since the
        previous scrape, and either nothing is running or they also stood still the scrape
        before (a request that never ends, e.g. an abandoned one, must not hold the point up).
        Running reaching 0 alone is not enough: llm-d-inference-sim lowers the gauge before it
        counts the request.
        """
        step_s = min(self.interval_s, SETTLE_STEP_S)
        t0 = self._clock()
        prev = closing
        still = 0
        scrapes = 0
        settled = False
        while self._clock() + int(step_s * 1e9) <= deadline:
            await asyncio.sleep(step_s)
            before = len(self._scrapes[url])
            await self._scrape_one(url)
            if len(self._scrapes[url]) == before:
                break  # the scrape failed (already counted and warned about)
            scrapes += 1
            cur = server_progress(self._scrapes[url][-1][1])
            if cur is None:
                break
            if (cur.completed, cur.generated) == (prev.completed, prev.generated):
                still += 1
                if not cur.running or still >= 2:
                    settled = True
                    break
            else:
                still = 0
            prev = cur
        late = (
            prev.completed - closing.completed
            if prev.completed is not None and closing.completed is not None
            else None
        )
        self._settle[url] = Settle(
            settled=settled,
            seconds=(self._clock() - t0) / 1e9,
            scrapes=scrapes,
            late_completions=late,
        )

    def _summarize(self, t_end: int, t_settled: int | None = None) -> TelemetryResult:
        ok = {u: s for u, s in self._scrapes.items() if s}
        try:
            result = summarize_scrapes(
                ok,
                gpu_filter=self.gpu_filter,
                window_ns=(self._t0, max(t_end, self._t0)),
                interval_s=self.interval_s,
                counters_until_ns=t_settled,
            )
        except Exception as exc:  # a bug here must not cost the point its client metrics
            logger.warning("telemetry: summary failed (%s)", exc, exc_info=True)
            result = TelemetryResult(
                window_start_ns=self._t0, window_end_ns=t_end, gpu_filter=self.gpu_filter
            )
            result.warnings.append(f"telemetry summary failed: {exc}")
        result.settle = dict(self._settle)
        for url, st in self._settle.items():
            if not st.settled and st.scrapes:
                result.warnings.append(
                    f"telemetry {url}: the server's counters were still moving {st.seconds:.1f} s "
                    f"after the load ended ({st.scrapes} scrapes); its counts may include "
                    "traffic after this point or miss updates it had not made yet"
                )
        for w in result.warnings:
            logger.warning("%s", w)
        fetch_warnings = []
        for url in self.urls:
            fails = self._failures[url]
            if fails:
                tail = (
                    "continuing without this source"
                    if not self._scrapes[url]
                    else "figures rest on the scrapes that succeeded"
                )
                fetch_warnings.append(
                    f"telemetry {url}: {len(fails)} of {self._attempts[url]} scrapes failed "
                    f"({fails[0]}); {tail}"
                )
            elif url in self._dead and not self._scrapes[url]:
                fetch_warnings.append(
                    f"telemetry {url}: unreachable in an earlier window and not answering "
                    "now; continuing without this source"
                )
            result.scrape_counts.setdefault(url, 0)
        result.warnings[:0] = fetch_warnings  # logged already, at the first failure
        return result

    async def _loop(self, url: str) -> None:
        """Scrape ``url`` on a fixed grid from the window start; a slow scrape skips ticks
        instead of drifting. A URL that has only ever failed is retried 5x less often."""
        k = 1
        step_ns = self.interval_s * 1e9
        while True:
            if url in self._dead or (self._failures[url] and not self._scrapes[url]):
                k = max(k, 5)
            target = self._t0 + int(k * step_ns)
            delay = (target - self._clock()) / 1e9
            if delay > 0:
                await asyncio.sleep(delay)
            await self._scrape_one(url)
            now = self._clock()
            k = max(k + 1, int((now - self._t0) / step_ns) + 1)
            if self._failures[url] and not self._scrapes[url]:
                k += 4

    async def _scrape_all(self, urls: Sequence[str]) -> None:
        await asyncio.gather(*(self._scrape_one(u) for u in urls))

    async def _scrape_one(self, url: str) -> None:
        assert self._client is not None
        self._attempts[url] += 1
        try:
            resp = await self._client.get(url)
            if resp.status_code != 200:
                raise RuntimeError(f"HTTP {resp.status_code}")
            text = resp.text
        except asyncio.CancelledError:
            self._attempts[url] -= 1
            raise
        except Exception as exc:
            why = f"{type(exc).__name__}: {exc}".rstrip(": ")
            if not self._failures[url] and url not in self._dead:
                logger.warning("telemetry %s: scrape failed (%s); continuing without it", url, why)
            self._failures[url].append(why)
            return
        t = self._clock()
        self._scrapes[url].append((t, compact_exposition(text)))
