"""Preflight against a target that is not routed yet (``ProfileConfig.route_wait_s``).

On Kubernetes a target's pods are Ready a little before its Service routes from every node
(kube-proxy programs the rule after the EndpointSlice names the pod; until then the
connection is refused). The runner Job tries a refused connection again for a while; the CLI
(``route_wait_s`` 0) fails at once on a wrong port. Real sockets, a real ``llmbench sim``
that starts listening on the refused port a moment later.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import pytest

from llmbench.runner.point.config import ProfileConfig
from llmbench.runner.point.preflight import ProfileError, not_routed, preflight
from llmbench.sim import spawn_sim


def closed_port() -> int:
    """A loopback port nothing listens on (a connection to it is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def late_sim() -> Iterator[tuple[int, threading.Event]]:
    """A port that refuses connections until ``llmbench sim`` listens on it, started once
    the event is set; the port and the event."""
    port = closed_port()
    start = threading.Event()
    procs: list[subprocess.Popen[str]] = []

    def serve() -> None:
        if start.wait(30):
            procs.append(spawn_sim(["--ttft-ms", "1", "--itl-ms", "0", "--port", str(port)])[1])

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield port, start
    start.set()
    thread.join(60)
    for proc in procs:
        proc.terminate()
        proc.wait(10)


def test_a_refused_connection_is_tried_again_until_the_target_listens(
    late_sim: tuple[int, threading.Event], caplog: pytest.LogCaptureFixture
) -> None:
    port, start = late_sim
    cfg = ProfileConfig(url=f"http://127.0.0.1:{port}", route_wait_s=30.0)
    threading.Timer(1.0, start.set).start()
    with caplog.at_level(logging.INFO, logger="llmbench.preflight"):
        model = preflight(cfg)
    assert model  # the sim's model, once it listened
    said = [r.getMessage() for r in caplog.records if "trying again" in r.getMessage()]
    assert len(said) == 1 and f"127.0.0.1:{port}/v1/models" in said[0], said


def test_without_a_route_wait_a_refused_connection_fails_at_once() -> None:
    port = closed_port()
    began = time.monotonic()
    with pytest.raises(ProfileError) as err:
        preflight(ProfileConfig(url=f"http://127.0.0.1:{port}"))
    assert time.monotonic() - began < 5
    assert f"cannot reach http://127.0.0.1:{port}" in str(err.value)
    assert "tried for" not in str(err.value)


def test_a_target_that_never_listens_fails_after_the_route_wait_naming_it() -> None:
    port = closed_port()
    began = time.monotonic()
    with pytest.raises(ProfileError) as err:
        preflight(ProfileConfig(url=f"http://127.0.0.1:{port}", route_wait_s=2.0))
    took = time.monotonic() - began
    assert 1.4 <= took < 10, took
    msg = str(err.value)
    assert f"cannot reach http://127.0.0.1:{port} (--url)" in msg
    assert "tried for 2 s: a Service may not route yet" in msg, msg


def test_only_a_refusal_or_an_unknown_name_counts_as_not_routed() -> None:
    refused = ConnectionRefusedError(111, "Connection refused")
    wrapped = RuntimeError("connect failed")
    wrapped.__cause__ = refused
    assert not_routed(wrapped) and not_routed(socket.gaierror(-2, "Name or service not known"))
    assert not not_routed(TimeoutError("timed out"))
    assert not not_routed(ConnectionResetError(104, "reset"))
