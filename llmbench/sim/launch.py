"""Launchers: a ``SimServer`` in a thread, in a child process, or as N worker processes.

Why a module of its own: tests, benchmarks and the command line need the same server in
different homes. Synchronous tests run it on its own loop in a daemon thread
(``run_sim_in_thread``, ``sim_in_thread``); benchmarks give it its own interpreter and core
(``spawn_sim``, which waits for the ready line ``serve`` prints); ``llmbench sim`` serves
until SIGINT/SIGTERM (``serve``), or with ``--workers N`` as N processes sharing one port
via SO_REUSEPORT (``run_workers``), each worker with its own ``max_num_seqs``, records and
metrics.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from llmbench.sim.config import SimConfig
from llmbench.sim.server import SimServer, base_url

__all__ = ["run_sim_in_thread", "run_workers", "serve", "sim_in_thread", "spawn_sim"]

_READY_PREFIX = "llmbench sim listening on "


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def run_sim_in_thread(config: SimConfig | None = None, host: str = "127.0.0.1",
                      port: int = 0) -> tuple[str, Callable[[], None]]:
    """Runs a sim on its own loop in a daemon thread; returns ``(base_url, stop)``.

    For synchronous tests. The server object is ``stop.server`` (records, reset).
    """
    ready = threading.Event()
    state: dict[str, Any] = {}

    def main() -> None:
        loop = asyncio.new_event_loop()
        state["loop"] = loop
        server = SimServer(config)
        state["server"] = server
        try:
            state["port"] = loop.run_until_complete(server.start(host, port))
        except BaseException as err:  # reported to the caller below
            state["error"] = err
            ready.set()
            loop.close()
            return
        stopped = loop.create_future()
        state["stopped"] = stopped
        ready.set()
        loop.run_until_complete(stopped)
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=main, name="llmbench-sim", daemon=True)
    thread.start()
    ready.wait(30)
    if "error" in state:
        raise state["error"]

    def stop() -> None:
        loop = state["loop"]
        fut = state["stopped"]
        if not loop.is_closed():
            loop.call_soon_threadsafe(lambda: _resolve(fut))
        thread.join(10)

    stop.server = state["server"]  # type: ignore[attr-defined]
    return base_url(host, state["port"]), stop


@contextlib.contextmanager
def sim_in_thread(config: SimConfig | None = None) -> Iterator[tuple[str, SimServer]]:
    """``with sim_in_thread(cfg) as (url, server):`` for synchronous tests."""
    url, stop = run_sim_in_thread(config)
    try:
        yield url, stop.server  # type: ignore[attr-defined]
    finally:
        stop()


def spawn_sim(config_args: Sequence[str] = (), timeout: float = 30.0,
              env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen[str]]:
    """Starts ``python -m llmbench.sim --port 0 ...`` in its own process.

    Returns the base URL once the server listens. The caller terminates the process
    (SIGTERM stops it cleanly). Benchmarks use this so client and server have separate
    interpreters and cores.
    """
    args = [sys.executable, "-m", "llmbench.sim", "--port", "0", *config_args]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(_READY_PREFIX):
            url = line[len(_READY_PREFIX):].split()[0]
            # The sim prints nothing after this line; closing our end leaves no pipe to
            # drain and no file object for the caller to close.
            proc.stdout.close()
            return url, proc
    proc.kill()
    proc.wait()
    proc.stdout.close()
    raise RuntimeError(f"llmbench sim did not start (exit code {proc.returncode})")


async def serve(config: SimConfig, port: int, reuse_port: bool, announce: bool) -> None:
    """Serves one ``SimServer`` until SIGINT/SIGTERM (``llmbench sim`` without workers).

    With ``announce`` it prints the ready line that ``spawn_sim`` waits for.
    """
    server = SimServer(config)
    bound = await server.start(config.host, port, reuse_port=reuse_port)
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: _resolve(stop))
    if announce:
        _announce(config, bound)
    await stop
    await server.stop()


def _announce(config: SimConfig, port: int) -> None:
    print(f"{_READY_PREFIX}{base_url(config.host, port)} (model {config.model}, "
          f"workers {config.workers}, pid {os.getpid()})", flush=True)


def _worker(config: SimConfig, port: int, ready: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent forwards SIGTERM

    async def main() -> None:
        server = SimServer(config)
        await server.start(config.host, port, reuse_port=True)
        ready.set()
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        loop.add_signal_handler(signal.SIGTERM, lambda: _resolve(stop))
        await stop
        await server.stop()

    asyncio.run(main())


def run_workers(config: SimConfig) -> int:
    """N processes on one port via SO_REUSEPORT; the kernel spreads connections."""
    probe = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    probe.bind((config.host, config.port))
    port = probe.getsockname()[1]
    ctx = mp.get_context("spawn")
    procs = []
    try:
        for _ in range(config.workers):
            ready = ctx.Event()
            p = ctx.Process(target=_worker, args=(config, port, ready), daemon=True)
            p.start()
            procs.append(p)
            if not ready.wait(60):
                raise RuntimeError("a sim worker did not start")
        probe.close()
        _announce(config, port)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(0.5):
            if not all(p.is_alive() for p in procs):
                print("llmbench sim: a worker exited", file=sys.stderr)
                return 1
        return 0
    finally:
        probe.close()
        for p in procs:
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, signal.SIGTERM)
        for p in procs:
            p.join(5)
