"""TelemetryCollector over real HTTP on 127.0.0.1: recorded dcgm-exporter text, the simulated
exporter, dead and garbage endpoints, and foreign traffic against ``llmbench sim``.

Nothing is mocked: a threaded ``http.server`` serves the exposition, the collector fetches it
with httpx and parses it with ``prometheus_client``.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from llmbench.runner.telemetry.collector import TelemetryCollector
from llmbench.runner.telemetry.model import GpuFilter, TelemetryResult
from llmbench.runner.telemetry.summary import summarize_scrapes, telemetry_json
from llmbench.runner.telemetry.validity import validity_signals
from llmbench.sim import SimConfig, SimServer
from llmbench.sim.dcgm import CONTENT_TYPE, DcgmSimState, DcgmSimulator, serve_dcgm

DATA = Path(__file__).parent / "data"
POD = GpuFilter(pods=("vllm-llama-0",), namespaces=("llm",))

Body = str | Callable[[], str]


def load_texts(name: str) -> list[str]:
    """The scrapes of a recorded fixture, split at its ``# llmbench-scrape`` marker lines."""
    chunks = (DATA / name).read_text().split("# llmbench-scrape ")[1:]
    return [c.split("\n", 1)[1] for c in chunks]


class _Exposition:
    """Per path: bodies served in order (the last one repeats), status, delay; counts hits."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[Sequence[Body], int, float]] = {}
        self.hits: dict[str, int] = {}
        self.lock = threading.Lock()

    def add(
        self, path: str, bodies: Sequence[Body], status: int = 200, delay_s: float = 0.0
    ) -> None:
        self.routes[path] = (bodies, status, delay_s)
        self.hits[path] = 0

    def next(self, path: str) -> tuple[int, str, float]:
        with self.lock:
            if path not in self.routes:
                return 404, "not found\n", 0.0
            bodies, status, delay = self.routes[path]
            i = self.hits[path]
            self.hits[path] = i + 1
        body = bodies[min(i, len(bodies) - 1)]
        return status, body() if callable(body) else body, delay


@contextmanager
def serve(expo: _Exposition) -> Iterator[str]:
    """Serve ``expo`` on an ephemeral 127.0.0.1 port; yields the base URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            status, body, delay = expo.next(self.path)
            if delay:
                time.sleep(delay)
            data = body.encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass  # the client gave up (timeout test)

        def log_message(self, format: str, *args: object) -> None:  # noqa: A002
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def dead_url() -> str:
    """A URL on a port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/metrics"


async def run_window(collector: TelemetryCollector, seconds: float) -> TelemetryResult:
    await collector.start()
    await asyncio.sleep(seconds)
    return await collector.stop()


# ---------------------------------------------------------------------------------------------
def test_boundary_scrapes_give_exact_figures_over_http() -> None:
    texts = load_texts("dcgm_4gpu_window.txt")
    expo = _Exposition()
    expo.add("/metrics", [texts[0], texts[4]])  # window start, window end
    with serve(expo) as base:
        url = f"{base}/metrics"
        c = TelemetryCollector([url], interval_s=60.0, gpu_filter=POD)

        async def window() -> TelemetryResult:  # as run_profile(on_window=c.on_window) does
            await c.on_window("start")
            await asyncio.sleep(0.05)
            await c.on_window("end")
            assert c.result is not None
            return c.result

        r = asyncio.run(window())
    assert expo.hits["/metrics"] == 2
    assert r.warnings == [] and r.scrape_counts == {url: 2}
    assert list(r.gpus) == ["gpu-node-a:gpu0", "gpu-node-a:gpu1"]
    g0, g1 = r.gpus["gpu-node-a:gpu0"], r.gpus["gpu-node-a:gpu1"]
    assert g0.power_w.avg == pytest.approx(320.0)
    assert g0.power_w.p99 == pytest.approx(339.6)  # 300 + 0.99 * 40
    assert g0.energy_j == pytest.approx(1280.0) and g0.energy_mj == pytest.approx(0.00128)
    assert g0.utilization_pct.avg == pytest.approx(95.0)
    assert g0.memory_used_gb.p99 == pytest.approx((70000 + 0.99 * 1000) * 1048576 / 1e9)
    # 9_000_000_000 -> 500_000 mJ: the counter restarted, only the post-restart part is known
    assert g1.energy_j == pytest.approx(500.0) and g1.energy_counter_resets == 1
    assert 0 < r.window_s < 5
    # the recorded raw text re-analyses to the same figures
    again = summarize_scrapes(c.raw_scrapes, gpu_filter=POD)
    assert telemetry_json(again).gpu_rows() == telemetry_json(r).gpu_rows()


def test_periodic_scrapes_follow_the_simulated_exporter() -> None:
    load = [0.5]
    sim = DcgmSimulator(DcgmSimState(n_gpus=2, pod="vllm-llama-0", namespace="llm"),
                        load=lambda: load[0])  # fmt: skip
    expo = _Exposition()
    expo.add("/dcgm/metrics", [sim.metrics_text])
    with serve(expo) as base:
        c = TelemetryCollector([f"{base}/dcgm/metrics"], interval_s=0.05, gpu_filter=POD)

        async def scenario() -> TelemetryResult:
            await c.start()
            await asyncio.sleep(0.3)
            load[0] = 1.0
            await asyncio.sleep(0.3)
            return await c.stop()

        r = asyncio.run(scenario())
    g0 = r.gpus["llmbench-sim:gpu0"]
    assert g0.scrapes >= 6  # boundary + periodic scrapes
    assert set(p for _, p, _ in g0.series) == {360.0, 650.0}
    assert g0.power_w.min == 360.0 and g0.power_w.max == 650.0
    assert not g0.stale and r.warnings == []
    # energy = ∫ power dt between the first and the last scrape (±2 scrape latencies)
    span = g0.series[-1][0] - g0.series[0][0]
    assert g0.energy_j is not None
    assert 360.0 * span * 0.9 < g0.energy_j < 650.0 * span * 1.1


def test_unreachable_exporter_costs_one_warning_and_no_crash(
    caplog: pytest.LogCaptureFixture,
) -> None:
    texts = load_texts("dcgm_4gpu_window.txt")
    expo = _Exposition()
    expo.add("/metrics", texts)
    dead = dead_url()
    with serve(expo) as base, caplog.at_level(logging.WARNING):
        good = f"{base}/metrics"
        c = TelemetryCollector([dead, good], interval_s=0.05, gpu_filter=POD, timeout_s=0.5)
        r = asyncio.run(run_window(c, 0.3))
    assert len(r.warnings) == 1
    assert dead in r.warnings[0] and "continuing without this source" in r.warnings[0]
    logged = [rec for rec in caplog.records if dead in rec.getMessage()]
    assert len(logged) == 1 and logged[0].levelno == logging.WARNING
    assert r.scrape_counts[dead] == 0 and r.scrape_counts[good] >= 2
    assert len(r.gpus) == 2  # the reachable exporter still gives its table


@pytest.mark.parametrize(
    ("body", "status", "needle"),
    [
        ("<html><body>Bad Gateway</body></html>", 200, "not Prometheus text"),
        ("upstream connect error", 503, "HTTP 503"),
    ],
)
def test_garbage_or_error_status_is_one_warning(
    body: str, status: int, needle: str, caplog: pytest.LogCaptureFixture
) -> None:
    expo = _Exposition()
    expo.add("/metrics", [body], status=status)
    with serve(expo) as base, caplog.at_level(logging.WARNING):
        url = f"{base}/metrics"
        r = asyncio.run(run_window(TelemetryCollector([url], interval_s=0.05), 0.2))
    assert r.gpus == {} and r.servers == {}
    assert len(r.warnings) == 1 and url in r.warnings[0] and needle in r.warnings[0]
    assert len([rec for rec in caplog.records if url in rec.getMessage()]) == 1


def test_hung_exporter_times_out_quickly() -> None:
    """The scrape gives up at its timeout (the warning says so) instead of waiting 2 s."""
    expo = _Exposition()
    expo.add("/metrics", [load_texts("dcgm_4gpu_window.txt")[0]], delay_s=2.0)
    with serve(expo) as base:
        url = f"{base}/metrics"
        r = asyncio.run(run_window(TelemetryCollector([url], timeout_s=0.2), 0.0))
    assert r.gpus == {}
    assert len(r.warnings) == 1 and "Timeout" in r.warnings[0]


def test_no_urls_and_stop_without_start_are_harmless() -> None:
    r = asyncio.run(run_window(TelemetryCollector([]), 0.0))
    assert r.gpus == {} and r.warnings == []
    r2 = asyncio.run(TelemetryCollector([dead_url()]).stop())
    assert r2.gpus == {}


# ----------------------------------------------------------------------- foreign traffic (sim)
def test_foreign_traffic_detected_against_llmbench_sim() -> None:
    sim_server = SimServer(SimConfig(ttft_ms=1.0, itl_ms=1.0))

    async def scenario() -> tuple[TelemetryResult, tuple[int, int], int]:
        port = await sim_server.start("127.0.0.1", 0)
        base = f"http://127.0.0.1:{port}"
        body = {
            "model": sim_server.config.model,
            "messages": [{"role": "user", "content": "hello there"}],
            "max_tokens": 4,
        }
        try:
            async with httpx.AsyncClient(base_url=base, trust_env=False, timeout=10) as http:

                async def send(n: int) -> tuple[int, int]:
                    """n sequential requests; returns (completed, Σ usage.completion_tokens)."""
                    ok = tokens = 0
                    for _ in range(n):
                        resp = await http.post("/v1/chat/completions", json=body)
                        if resp.status_code == 200:
                            ok += 1
                            tokens += resp.json()["usage"]["completion_tokens"]
                    return ok, tokens

                await send(3)  # before the window: must not count
                c = TelemetryCollector([f"{base}/metrics"], interval_s=0.05)
                await c.start()
                ours, theirs = await asyncio.gather(send(10), send(7))  # second client
                r = await c.stop()
                clean = TelemetryCollector([f"{base}/metrics"], interval_s=0.05)
                await clean.start()
                alone = await send(5)
                r_clean = await clean.stop()
        finally:
            await sim_server.stop()
        assert alone[0] == 5
        clean_sig = validity_signals(
            r_clean, client_completed=alone[0], client_output_tokens=alone[1]
        )
        assert clean_sig == []
        return r, ours, theirs[0]

    r, ours, theirs = asyncio.run(scenario())
    assert (ours[0], theirs) == (10, 7)
    s = next(iter(r.servers.values()))
    assert s.engine == "vllm" and s.requests_completed == 17
    sig = {x.signal: x for x in validity_signals(r, client_completed=ours[0])}
    ft = sig["foreign_traffic"]
    assert ft.severity == "error"
    assert ft.numbers == {
        "server_completed": 17.0, "client_completed": 10, "excess": 7.0, "tolerance": 1.0
    }


def test_slow_exporter_does_not_delay_the_others() -> None:
    texts = load_texts("dcgm_4gpu_window.txt")
    expo = _Exposition()
    expo.add("/slow", [texts[0]], delay_s=1.0)
    expo.add("/metrics", texts)
    with serve(expo) as base:
        good = f"{base}/metrics"
        c = TelemetryCollector(
            [f"{base}/slow", good], interval_s=0.05, gpu_filter=POD, timeout_s=0.3
        )
        r = asyncio.run(run_window(c, 0.5))
    assert r.scrape_counts[good] >= 5  # ~every 50 ms, not every 300 ms timeout
    assert len(r.gpus) == 2
    assert len(r.warnings) == 1 and "/slow" in r.warnings[0] and "Timeout" in r.warnings[0]


def test_reused_collector_skips_a_dead_exporter_at_boundaries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    texts = load_texts("dcgm_4gpu_window.txt")
    expo = _Exposition()
    expo.add("/metrics", texts)
    expo.add("/hang", [texts[0]], delay_s=1.0)
    with serve(expo) as base, caplog.at_level(logging.WARNING):
        hang = f"{base}/hang"
        c = TelemetryCollector([hang, f"{base}/metrics"], interval_s=1.0, timeout_s=0.4)

        async def two_points() -> tuple[TelemetryResult, TelemetryResult, int]:
            first = await run_window(c, 0.0)
            hung_after_first = expo.hits["/hang"]
            second = await run_window(c, 0.0)
            return first, second, hung_after_first

        first, second, hung_after_first = asyncio.run(two_points())
    assert len(first.gpus) == 4 and len(second.gpus) == 4
    # The second point does not ask the dead exporter again at either boundary.
    assert expo.hits["/hang"] == hung_after_first
    for r in (first, second):
        assert len(r.warnings) == 1 and hang in r.warnings[0]
    assert len([rec for rec in caplog.records if hang in rec.getMessage()]) == 1


def test_serve_dcgm_is_scrapable_like_an_exporter() -> None:
    running = [0]
    sim = DcgmSimulator(
        DcgmSimState(n_gpus=1, pod="vllm-llama-0", namespace="llm"),
        load=lambda: running[0] / 4,
    )

    async def scenario() -> tuple[TelemetryResult, int]:
        server = await serve_dcgm(sim, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            async with httpx.AsyncClient(trust_env=False) as http:
                missing = (await http.get(f"http://127.0.0.1:{port}/nope")).status_code
            c = TelemetryCollector(
                [f"http://127.0.0.1:{port}/metrics"], interval_s=0.05, gpu_filter=POD
            )
            await c.start()
            running[0] = 4
            await asyncio.sleep(0.2)
            return await c.stop(), missing
        finally:
            server.close()
            await server.wait_closed()

    r, missing = asyncio.run(scenario())
    assert missing == 404
    g = r.gpus["llmbench-sim:gpu0"]
    assert g.model_name == "llmbench-simulated-GPU"
    assert g.power_w.min == 70.0 and g.power_w.max == 650.0  # idle at start, then full load
    assert r.warnings == []
