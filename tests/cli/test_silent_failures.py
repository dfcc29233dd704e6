"""Inputs that used to fail silently now work or fail loudly, against ``llmbench sim``.

* ``--endpoint v1/chat/completions`` (GenAI-Perf's form, no leading ``/``) is the same path as
  ``/v1/chat/completions``.
* The preflight sends one real request of the run's kind: a wrong path, endpoint type or model
  fails before any load (exit 1), naming what the server answered; it waits as long as
  ``--request-timeout`` says, saying meanwhile what it waits for.
* A silent server (it accepts connections and never answers) fails within 15 s with default
  flags: ``/v1/models`` has a bound of its own (``--preflight-timeout``).
* A run in which no request succeeded exits 1 with the error breakdown; a run with some
  errors exits 0 and reports them.
* ``--extra-inputs`` as a JSON object reaches the request body as its keys.
"""

from __future__ import annotations

import json
import logging
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from scripted_server import ScriptedServer, Step

from llmbench.api.results import PointResult
from llmbench.cli import main
from llmbench.runner.artifacts.read import load_summary
from llmbench.runner.point.config import ProfileConfig
from llmbench.runner.point.preflight import preflight
from llmbench.sim import spawn_sim

SimFactory = Callable[..., str]

SMALL = ("--concurrency", "2", "--request-count", "6", "--isl", "16", "--osl", "4")


@pytest.fixture(scope="module")
def sim() -> Iterator[SimFactory]:
    running: dict[tuple[str, ...], tuple[str, subprocess.Popen[str]]] = {}

    def get(*flags: str) -> str:
        if flags not in running:
            running[flags] = spawn_sim(["--ttft-ms", "1", "--itl-ms", "0", *flags])
        return running[flags][0]

    yield get
    for _, proc in running.values():
        proc.terminate()
        proc.wait(10)


def run(
    tmp: Path, capsys: pytest.CaptureFixture[str], *argv: str, sub: str = "profile"
) -> tuple[int, str, PointResult | None]:
    """Runs ``llmbench SUB`` into ``tmp/art``: exit code, stderr and the point's result."""
    out = tmp / "art"
    code = main([sub, "--artifact-dir", str(out), *argv])
    summary = load_summary(point_dir(out)) if sub == "profile" and out.exists() else None
    return code, capsys.readouterr().err, summary


def point_dir(out: Path) -> Path:
    """The one point folder GenAI-Perf's layout puts under ``--artifact-dir``."""
    dirs = [p for p in out.iterdir() if p.is_dir()]
    assert len(dirs) == 1, dirs
    return dirs[0]


def sim_records(url: str) -> list[dict[str, Any]]:
    truth = httpx.get(url + "/sim/records").json()
    recs: list[dict[str, Any]] = truth["records"] if isinstance(truth, dict) else truth
    return recs


def test_endpoint_without_leading_slash_measures(
    sim: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sim()
    httpx.post(url + "/sim/reset")
    code, err, s = run(
        tmp_path, capsys, "--url", url, "--endpoint", "v1/chat/completions", *SMALL
    )
    assert code == 0, err
    assert s is not None and s.request_count.avg == 6 and s.errors.total == 0
    assert {r["endpoint"] for r in sim_records(url)} == {"chat"}
    assert len(sim_records(url)) == 1 + 6  # the probe, then the run


@pytest.mark.parametrize(
    ("flags", "answered"),
    [
        (["--endpoint", "v1/chat/completion"], "HTTP 404"),
        (["--endpoint", "v1/completions"], "HTTP 400"),  # chat body on the completions path
        (["--endpoint-type", "completions", "--endpoint", "/v1/chat/completions"], "HTTP 400"),
        (["--endpoint-type", "embeddings", "--endpoint", "v1/chat/completions"], "HTTP 400"),
    ],
)
def test_wrong_path_or_endpoint_type_fails_before_any_load(
    flags: list[str], answered: str, sim: SimFactory, tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    url = sim()
    httpx.post(url + "/sim/reset")
    code, err, _ = run(tmp_path, capsys, "--url", url, *SMALL, *flags)
    assert code == 1
    path = "/" + flags[-1].lstrip("/")
    assert f"probe request to {url}{path}" in err and answered in err
    assert "--endpoint" in err
    assert not (tmp_path / "art").exists()
    assert len(sim_records(url)) <= 1  # the probe only: no load was sent


def test_second_model_not_served_fails_naming_it(
    sim: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sim()
    code, err, _ = run(tmp_path, capsys, "--url", url, "-m", "llmbench-sim", "other", *SMALL)
    assert code == 1
    assert "'other'" in err and "llmbench-sim" in err


def test_no_request_succeeded_exits_1_with_the_breakdown(
    sim: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sim()
    code, err, s = run(
        tmp_path, capsys, "--url", url, "-m", "llmbench-sim", "--no-preflight",
        "--endpoint", "v1/chat/completion", *SMALL,
    )
    assert code == 1
    assert "no request succeeded (6 failed)" in err
    assert "404" in err
    assert s is not None and s.errors.total == 6  # the artefacts are still written


def test_some_errors_exit_0_and_are_reported(
    sim: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sim("--error-rate-500", "0.3")
    code, err, s = run(
        tmp_path, capsys, "--url", url, "--concurrency", "2", "--request-count", "40",
        "--isl", "16", "--osl", "4",
    )
    assert code == 0, err
    assert s is not None and 0 < s.errors.total < 40
    assert s.request_count.avg + s.errors.total == 40


def test_preflight_waits_as_long_as_request_timeout(
    sim: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    slow = sim("--ttft-ms", "400")  # later flags win: TTFT 400 ms
    code, err, _ = run(tmp_path, capsys, "--url", slow, "--request-timeout", "0.05", *SMALL)
    assert code == 1
    assert "probe request" in err and "timed out" in err.lower()
    code, err, _ = run(tmp_path, capsys, "--url", slow, "--request-timeout", "30", *SMALL)
    assert code == 0, err


def test_json_extra_inputs_are_sent_as_keys(
    sim: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sim()
    code, err, _ = run(
        tmp_path, capsys, "--url", url, *SMALL,
        "--extra-inputs", '{"ignore_eos": true, "temperature": 0}', "--extra-inputs", "top_k:5",
    )
    assert code == 0, err
    inputs = json.loads((point_dir(tmp_path / "art") / "inputs.json").read_text())
    text = json.dumps(inputs)
    assert '"ignore_eos": true' in text and '"temperature": 0' in text and '"top_k": 5' in text
    assert "{\\\"ignore_eos\\\"" not in text  # never a garbage key made of the JSON


def test_analyze_with_a_wrong_path_fails_before_any_point(
    sim: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sim()
    code, err, _ = run(
        tmp_path, capsys, "--url", url, "--endpoint", "v1/chat/completion", "--sweep-list",
        "1,2", "--request-count", "4", "--isl", "16", "--osl", "4", sub="analyze",
    )
    assert code == 1
    assert "HTTP 404" in err
    assert not (tmp_path / "art").exists()


def test_probe_goes_where_the_run_goes_with_a_url_path(
    sim: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--url http://h/v1 --endpoint v1/chat/completions``: one /v1, for probe and run."""
    url = sim()
    code, err, s = run(
        tmp_path, capsys, "--url", url + "/v1", "--endpoint", "v1/chat/completions", *SMALL
    )
    assert code == 0, err
    assert s is not None and s.errors.total == 0


def test_analyze_point_without_a_success_fails_the_sweep(
    sim: SimFactory, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = sim()
    code, err, _ = run(
        tmp_path, capsys, "--url", url, "-m", "llmbench-sim", "--no-preflight", "--no-plots",
        "--endpoint", "v1/chat/completion", "--sweep-list", "1", "--request-count", "3",
        "--isl", "16", "--osl", "4", sub="analyze",
    )
    assert code == 1
    assert "no request completed" in err and "404" in err


@pytest.fixture()
def silent_server() -> Iterator[str]:
    """A real loopback TCP server that accepts connections and never answers a byte."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    accepted: list[socket.socket] = []
    done = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not done.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(conn)  # held open, never read or written

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    done.set()
    thread.join(5)
    listener.close()
    for conn in accepted:
        conn.close()


def test_a_silent_server_fails_fast_with_default_flags_naming_the_url(
    silent_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Default flags (``--request-timeout 600``): ``/v1/models`` has its own 10 s bound."""
    began = time.monotonic()
    code, err, _ = run(tmp_path, capsys, "--url", silent_server, *SMALL)
    elapsed = time.monotonic() - began
    assert code == 1
    assert elapsed < 15, elapsed
    assert silent_server in err
    assert "accepted a TCP connection but did not answer GET" in err
    assert "/v1/models within 10 s (--preflight-timeout)" in err
    assert not (tmp_path / "art").exists()  # no point folder: nothing was measured


def test_preflight_timeout_flag_bounds_the_models_check(
    silent_server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    began = time.monotonic()
    code, err, _ = run(
        tmp_path, capsys, "--url", silent_server, "--preflight-timeout", "1", *SMALL
    )
    assert code == 1
    assert time.monotonic() - began < 5
    assert "within 1 s (--preflight-timeout)" in err


def test_a_slow_probe_says_what_it_waits_for(caplog: pytest.LogCaptureFixture) -> None:
    """``/v1/models`` answers, the one-token probe takes 6 s: the console says so meanwhile."""
    event = b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: [DONE]\n\n'

    def script(_n: int, _request: bytes) -> list[Step]:  # the probe (GETs: the server's)
        return [6.0, b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(event), event)]

    server = ScriptedServer(script).start()
    try:
        cfg = ProfileConfig(url=server.url, model="m")
        with caplog.at_level(logging.INFO, logger="llmbench.preflight"):
            assert preflight(cfg) == "m"
    finally:
        server.stop()
    notices = [r.getMessage() for r in caplog.records if r.name == "llmbench.preflight"]
    assert notices, "no console line while the probe waited"
    assert "waiting 5 s of 600 s (--request-timeout) for the probe request" in notices[0]
    assert f"{server.url}/v1/chat/completions" in notices[0]
    assert "GET " in notices[0] and "/v1/models answered HTTP 200" in notices[0]
