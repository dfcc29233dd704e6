"""``llmbench profile`` and ``analyze`` when the target dies mid-run, is interrupted, or is
given a URL that cannot exist: exit codes, reasons and the records kept."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from llmbench.cli import main
from llmbench.runner.artifacts.read import load_records, load_summary
from llmbench.sim import spawn_sim

FLAGS = ("--synthetic-input-tokens-mean", "32", "--output-tokens-mean", "10",
         "--extra-inputs", "ignore_eos:true")


def _done(url: str) -> int:
    """Requests the sim finished (its own vLLM counter), 0 when it cannot be asked."""
    try:
        lines = httpx.get(url + "/metrics", timeout=5).text.splitlines()
    except httpx.HTTPError:
        return 0
    return sum(int(float(line.rsplit(" ", 1)[1])) for line in lines
               if line.startswith("vllm:request_success_total{"))


def _point_dir(art: Path) -> Path:
    """The folder of the one point written under ``art`` (its name follows GenAI-Perf's)."""
    return next(p.parent for p in art.rglob("*_genai_perf.json"))


def _kill_after(url: str, proc: subprocess.Popen[str], requests: int) -> threading.Thread:
    def kill() -> None:
        for _ in range(600):  # bounded: until some load completed
            if _done(url) >= requests:
                break
            time.sleep(0.05)
        proc.kill()
        proc.wait(10)

    t = threading.Thread(target=kill)
    t.start()
    return t


def test_profile_against_a_server_killed_mid_run_fails_naming_why_and_keeps_the_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url, proc = spawn_sim(["--ttft-ms", "2", "--itl-ms", "1"])
    killer = _kill_after(url, proc, 50)
    art = tmp_path / "art"
    try:
        code = main(["profile", "--url", url, "--concurrency", "8", "--measurement-duration",
                     "120", "--artifact-dir", str(art), *FLAGS])
    finally:
        killer.join()
        if proc.poll() is None:
            proc.kill()
    err = capsys.readouterr().err
    assert code == 1
    assert "target unreachable since " in err and url in err
    summary = load_summary(_point_dir(art))
    assert summary.stop_reason is not None and summary.stop_reason.startswith(
        "target unreachable since ")
    assert summary.failure_reason() == summary.stop_reason
    assert summary.request_count.avg >= 40  # measured before the kill, kept
    records = load_records(_point_dir(art))
    connect = [r for r in records if r.error_type == "connect"]
    # Backed-off retries for about 10 s from 8 slots: tens, not hundreds of thousands.
    assert 8 <= summary.errors.by_type["connect"].count <= 8 * 20
    assert len(connect) <= summary.errors.by_type["connect"].count


def test_analyze_records_the_point_as_failed_with_the_reason(tmp_path: Path) -> None:
    url, proc = spawn_sim(["--ttft-ms", "2", "--itl-ms", "1"])
    killer = _kill_after(url, proc, 30)
    try:
        code = main(["analyze", "--url", url, "--sweep-list", "4", "--measurement-duration",
                     "120", "--artifact-dir", str(tmp_path), *FLAGS])
    finally:
        killer.join()
        if proc.poll() is None:
            proc.kill()
    assert code == 1
    text = "".join(p.read_text() for p in tmp_path.rglob("analyze_export_genai_perf.json"))
    assert "target unreachable since" in text


def test_sigterm_records_the_requests_in_flight_as_interrupted(tmp_path: Path) -> None:
    url, sim = spawn_sim(["--ttft-ms", "5", "--itl-ms", "20"])
    art = tmp_path / "art"
    proc = subprocess.Popen(
        [sys.executable, "-m", "llmbench", "profile", "--url", url, "--concurrency", "4",
         "--request-count", "100000", "--artifact-dir", str(art), *FLAGS],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        for _ in range(600):  # bounded wait for some load
            if _done(url) >= 8:
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
        sim.terminate()
        sim.wait(10)
    assert proc.returncode == 130, err
    summary = load_summary(_point_dir(art))
    assert summary.interrupted
    assert summary.errors.by_type["interrupted"].count == 4
    assert "4 requests in flight recorded as interrupted" in err
    cut = [r for r in load_records(_point_dir(art)) if r.error_type == "interrupted"]
    assert len(cut) == 4 and all(r.sent_ns for r in cut)


@pytest.mark.parametrize("url", ["http://127.0.0.1:99999", "127.0.0.1:65536", "http://h:0"])
def test_a_port_out_of_range_is_a_usage_error_naming_the_url_flag(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["profile", "--url", url, "--concurrency", "1"]) == 2
    err = capsys.readouterr().err
    assert "--url" in err and "65535" in err


def test_event_loop_flag_picks_the_loop(tmp_path: Path) -> None:
    url, proc = spawn_sim(["--ttft-ms", "1", "--itl-ms", "1"])
    try:
        for kind in ("asyncio", "uvloop"):
            art = tmp_path / kind
            code = main(["profile", "--url", url, "--concurrency", "2", "--request-count", "6",
                         "--event-loop", kind, "--artifact-dir", str(art), *FLAGS])
            assert code == 0
            client = load_summary(_point_dir(art)).client
            assert client is not None and client.event_loop == kind
    finally:
        proc.terminate()
        proc.wait(10)
