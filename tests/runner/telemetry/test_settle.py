"""The closing scrape settles before server and client counts are compared.

A server may count a request as completed a little after it sent the last byte. Here a
scripted ``/metrics`` (real HTTP on 127.0.0.1, served by ``http.server``) plays such a server:
each scrape gets the next body of a script, so "the counters lag by one or two scrapes" is
exact and needs no timing. Bodies are numbered by scrape: 0 is the window's opening boundary
scrape, 1 the closing one, 2.. the settle scrapes (the periodic scrapes are kept out by a long
interval).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from http.server import BaseHTTPRequestHandler

import pytest

from llmbench.runner.telemetry.collector import TelemetryCollector
from llmbench.runner.telemetry.model import TelemetryResult
from llmbench.runner.telemetry.summary import server_progress, summarize_scrapes
from llmbench.runner.telemetry.validity import validity_signals

ServeHTTP = Callable[[type[BaseHTTPRequestHandler]], str]
S = 1_000_000_000
#: no periodic scrape inside these tests' windows: only the boundary and settle scrapes
NO_PERIODIC = 60.0


def vllm(done: float | None, tokens: float | None, running: float) -> str:
    """A vLLM ``/metrics`` body; ``None`` leaves a labelled counter out, as a fresh vLLM does."""
    lines = [
        "# TYPE vllm:num_requests_running gauge",
        f'vllm:num_requests_running{{model_name="m"}} {running}',
        "# TYPE vllm:request_success counter",
    ]
    if done is not None:
        lines.append(f'vllm:request_success_total{{finish_reason="length",model_name="m"}} {done}')
    lines.append("# TYPE vllm:generation_tokens counter")
    if tokens is not None:
        lines.append(f'vllm:generation_tokens_total{{model_name="m"}} {tokens}')
    return "\n".join(lines) + "\n"


DCGM = (
    "# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n"
    'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-1",Hostname="n"} 300\n'
)


class Script:
    """Bodies per path, served one per GET in order (the last repeats); counts the GETs."""

    def __init__(self, routes: dict[str, Sequence[str] | Callable[[int], str]]) -> None:
        self.routes = routes
        self.hits = {p: 0 for p in routes}
        self.lock = threading.Lock()

    def body(self, path: str) -> str | None:
        with self.lock:
            if path not in self.routes:
                return None
            i = self.hits[path]
            self.hits[path] = i + 1
        script = self.routes[path]
        return script(i) if callable(script) else script[min(i, len(script) - 1)]

    def handler(self) -> type[BaseHTTPRequestHandler]:
        script = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                body = script.body(self.path)
                data = (body if body is not None else "not found\n").encode()
                self.send_response(200 if body is not None else 404)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

        return Handler


def window(collector: TelemetryCollector) -> TelemetryResult:
    """One measurement window with no load in it: the script says what the server counted."""

    async def run() -> TelemetryResult:
        await collector.on_window("start")
        await collector.on_window("end")
        assert collector.result is not None
        return collector.result

    return asyncio.run(run())


def count_signals(result: TelemetryResult, completed: int, tokens: int) -> dict[str, str]:
    """The signals that compare server and client counts, by name, with their messages."""
    sig = validity_signals(result, client_completed=completed, client_output_tokens=tokens)
    return {s.signal: s.message for s in sig}


# The run: 160 requests of 100 tokens at concurrency 16; the closing scrape showed 0
# running but 144 done, the last wave's counts arrived in the next two scrapes.
LAGGING = [
    vllm(1000, 100000, 0),  # before the window
    vllm(1144, 114400, 0),  # closing boundary scrape: the last 16 not counted yet
    vllm(1152, 115200, 0),
    vllm(1160, 116000, 0),  # caught up
]


def test_lagging_counters_settle_before_the_comparison(serve_http: ServeHTTP) -> None:
    script = Script({"/metrics": LAGGING})
    url = serve_http(script.handler()) + "/metrics"
    r = window(TelemetryCollector([url], interval_s=NO_PERIODIC))
    s = r.servers[url]
    assert (s.requests_completed, s.generation_tokens) == (160, 16000)
    # closing + 152 + 160 + 160 again (stood still with nothing running): settled
    assert script.hits["/metrics"] == 5
    st = r.settle[url]
    assert st.settled and st.scrapes == 3 and st.late_completions == 16
    assert count_signals(r, 160, 16000) == {}
    # the settle scrapes feed the counters only: gauges and scrape counts are the window's
    assert r.scrape_counts[url] == 2 and s.requests_running.n == 2 and len(s.series) == 2
    assert r.warnings == []


def test_without_settling_the_same_server_raises_the_false_alarm(
    serve_http: ServeHTTP,
) -> None:
    """The failure the settle scrapes fix, reproduced: settling off, 144 vs 160."""
    script = Script({"/metrics": LAGGING})
    url = serve_http(script.handler()) + "/metrics"
    r = window(TelemetryCollector([url], interval_s=NO_PERIODIC, settle_s=0))
    assert script.hits["/metrics"] == 2 and r.settle == {}
    sig = count_signals(r, 160, 16000)
    assert sig["server_count_short"].startswith(
        "the scraped /metrics counted 144 completed requests in the window, the client 160: 16 "
        "of the client's requests are missing from the server's counters; "
    )
    assert sig["token_count_mismatch"] == (
        "the scraped /metrics counted 14400 generated tokens in the window, the client 16000 "
        "(-1600, -10.0 %)"
    )


def test_a_real_shortfall_is_said_as_measured(serve_http: ServeHTTP) -> None:
    """The counters settle at 150 of 160: reported, with the settling, and no guessed cause."""
    script = Script({"/metrics": [vllm(0, 0, 0), vllm(150, 15000, 0)]})
    url = serve_http(script.handler()) + "/metrics"
    r = window(TelemetryCollector([url], interval_s=NO_PERIODIC))
    assert r.settle[url].settled and r.settle[url].scrapes == 1
    sig = validity_signals(r, client_completed=160, client_output_tokens=16000)
    short = next(s for s in sig if s.signal == "server_count_short")
    assert short.severity == "warning"
    assert "10 of the client's requests are missing from the server's counters, though they " \
        "had stopped moving when re-scraped" in short.message
    assert "replica" not in short.message
    assert short.numbers["missing"] == 10 and short.numbers["settled"] is True
    tokens = next(s for s in sig if s.signal == "token_count_mismatch")
    assert "(-1000, -6.2 %), though they had stopped moving" in tokens.message


def test_small_differences_are_within_the_tolerance(serve_http: ServeHTTP) -> None:
    """One request and 1 % of the tokens either way are edge effects, not findings."""
    script = Script({"/metrics": [vllm(0, 0, 0), vllm(159, 15900, 0)]})
    url = serve_http(script.handler()) + "/metrics"
    r = window(TelemetryCollector([url], interval_s=NO_PERIODIC))
    assert count_signals(r, 160, 16000) == {}
    # 1 % of 162 rounds up to 2: 3 missing is a finding
    assert set(count_signals(r, 162, 16000)) == {"server_count_short"}
    assert set(count_signals(r, 156, 15600)) == {"foreign_traffic", "token_count_mismatch"}


def test_counters_that_never_stop_are_bounded_and_said(serve_http: ServeHTTP) -> None:
    """Someone else's load keeps the counters moving: settling stops at its bound."""
    script = Script({"/metrics": lambda i: vllm(10 * i, 1000 * i, 4)})
    url = serve_http(script.handler()) + "/metrics"
    r = window(TelemetryCollector([url], interval_s=NO_PERIODIC, settle_s=0.35))
    st = r.settle[url]
    assert not st.settled and 1 <= st.scrapes <= 3  # 0.1 s apart within 0.35 s
    assert script.hits["/metrics"] == 2 + st.scrapes
    moving = f"telemetry {url}: the server's counters were still moving"
    assert any(w.startswith(moving) for w in r.warnings)


def test_stuck_running_gauge_does_not_hold_the_point(serve_http: ServeHTTP) -> None:
    """A request the server still runs (abandoned by the client) with counters standing still:
    two still scrapes settle it."""
    script = Script({"/metrics": [vllm(0, 0, 0), vllm(16, 1600, 1)]})
    url = serve_http(script.handler()) + "/metrics"
    r = window(TelemetryCollector([url], interval_s=NO_PERIODIC))
    assert r.settle[url].settled and r.settle[url].scrapes == 2
    assert script.hits["/metrics"] == 4


def test_gpu_exporters_are_not_settle_scraped(serve_http: ServeHTTP) -> None:
    script = Script({"/dcgm": [DCGM], "/metrics": LAGGING})
    base = serve_http(script.handler())
    r = window(TelemetryCollector([f"{base}/dcgm", f"{base}/metrics"], interval_s=NO_PERIODIC))
    assert script.hits["/dcgm"] == 2 and list(r.settle) == [f"{base}/metrics"]
    assert len(r.gpus) == 1


def test_a_series_that_first_appears_in_the_window_counts_from_zero() -> None:
    """A fresh vLLM exports request_success_total{finish_reason} only after its first request:
    absent from a scrape that shows the server means 0, not "unknown"."""
    url = "http://vllm:8000/metrics"
    scrapes = [(0, vllm(None, None, 0)), (S, vllm(48, 4800, 16)), (2 * S, vllm(160, 16000, 0))]
    s = summarize_scrapes({url: scrapes}).servers[url]
    assert (s.requests_completed, s.generation_tokens) == (160, 16000)
    # a server that was not there at the start tells nothing about before: no guess
    late_start = summarize_scrapes({url: [(0, DCGM), *scrapes[1:]]}).servers[url]
    assert late_start.requests_completed == 112


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (vllm(3, 300, 1), (3.0, 300.0, 1.0)),
        (vllm(None, None, 0), (None, None, 0.0)),
        (DCGM, None),
        ("<html>bad gateway</html>", None),
    ],
)
def test_server_progress(text: str, expected: tuple[float | None, ...] | None) -> None:
    assert server_progress(text) == expected
