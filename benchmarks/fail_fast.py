"""How fast does llmbench give up on a target or an exporter that cannot answer?

Tests check *that* these fail with the right message; how long it takes depends on the
machine, so the figures live here. Prints, median of ``--repeat`` runs:

* ``profile`` against a closed port: seconds from start to exit code 1 (the preflight's
  connection refused, naming the URL);
* ``profile`` with default flags against a silent server (it accepts connections and never
  answers): seconds to exit code 1 naming the URL (issue 22's bound: within 15 s, whatever
  ``--request-timeout`` says);
* one telemetry window against an exporter that hangs for 2 s, with a 0.2 s scrape timeout:
  seconds until the window's summary is ready (the timeout, not the hang, should set it).

    .venv/bin/python benchmarks/fail_fast.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from llmbench.runner.telemetry.collector import TelemetryCollector


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def unreachable_profile_s() -> float:
    return _profile_fails_s(f"http://127.0.0.1:{_free_port()}")


def silent_profile_s() -> float:
    with socket.socket() as listener:  # the kernel accepts; nothing ever reads or answers
        listener.bind(("127.0.0.1", 0))
        listener.listen(64)
        return _profile_fails_s(f"http://127.0.0.1:{listener.getsockname()[1]}")


def _profile_fails_s(url: str) -> float:
    t0 = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "llmbench", "profile", "--url", url, "--concurrency", "1"],
        capture_output=True, text=True, timeout=120,
    )
    elapsed = time.monotonic() - t0
    if done.returncode != 1 or url not in done.stderr:
        raise SystemExit(f"unexpected result: exit {done.returncode}: {done.stderr[-500:]}")
    return elapsed


class _Hang(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        time.sleep(2.0)
        self.send_response(200)
        self.end_headers()

    def log_message(self, *_args: object) -> None:
        pass


def hung_exporter_s() -> float:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hang)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"

        async def window() -> float:
            c = TelemetryCollector([url], timeout_s=0.2)
            t0 = time.monotonic()
            await c.start()
            await c.stop()
            return time.monotonic() - t0

        return asyncio.run(window())
    finally:
        server.shutdown()
        server.server_close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rows = [
        ("profile, closed port -> exit 1", unreachable_profile_s),
        ("profile, silent server, default flags -> exit 1", silent_profile_s),
        ("telemetry window, exporter hung 2 s, timeout 0.2 s", hung_exporter_s),
    ]
    print(f"{'check':52} {'median s':>9} {'max s':>7}")
    for name, fn in rows:
        times = [fn() for _ in range(args.repeat)]
        print(f"{name:52} {statistics.median(times):9.2f} {max(times):7.2f}")


if __name__ == "__main__":
    main()
