"""Shared plumbing of the benchmark scripts: a sim in its own process, clients in theirs.

Every client runs as a separate process so its CPU time and peak RSS can be read from
``resource.getrusage(RUSAGE_CHILDREN)`` deltas, and so no client shares an event loop or an
interpreter with the server it measures.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import psutil

from llmbench.sim import spawn_sim

HERE = Path(__file__).resolve().parent


def start_sim(*flags: str) -> tuple[str, subprocess.Popen[str]]:
    return spawn_sim(list(flags))


def stop_sim(proc: subprocess.Popen[str]) -> None:
    proc.terminate()
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        proc.kill()


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_child(cmd: list[str], timeout: float = 900, env: dict[str, str] | None = None,
              stderr_lines: list[str] | None = None,
              cwd: str | None = None) -> tuple[str, float, float]:
    """Runs ``cmd``; returns (stdout, CPU seconds, peak RSS MB) of that child and its workers
    (``stderr_lines``, when given, receives its stderr).

    CPU comes from ``RUSAGE_CHILDREN`` deltas (exact, includes waited grandchildren); the RSS
    peak is the sum over the process tree, sampled every 50 ms.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        popen = subprocess.Popen(cmd, stdout=out, stderr=err, text=True, cwd=cwd,
                                 env={**os.environ, **env} if env else None)
        ps = psutil.Process(popen.pid)
        peak = 0
        deadline = time.monotonic() + timeout
        while popen.poll() is None:
            if time.monotonic() > deadline:
                popen.kill()
                raise RuntimeError(f"{cmd[:4]} timed out after {timeout} s")
            peak = max(peak, _tree_rss(ps))
            time.sleep(0.05)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if stderr_lines is not None:
        stderr_lines.extend(stderr.splitlines())
    if popen.returncode != 0:
        raise RuntimeError(f"{cmd[:4]} failed ({popen.returncode}): {stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return stdout, cpu, peak / 2**20


def raw_client(url: str, concurrency: int, requests: int, osl: int,
               script: str = "rawclient.py", *extra: str) -> dict[str, Any]:
    """Runs a reference client script (rawclient.py, httpxclient.py) in its own process;
    ``extra`` flags go to the script (``--loop uvloop``, ``--isl 200``)."""
    out, cpu, rss = run_child(
        [sys.executable, str(HERE / script), "--url", url, "--concurrency",
         str(concurrency), "--requests", str(requests), "--osl", str(osl), *extra]
    )
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result.update(cpu_s=cpu, rss_mb=rss)
    return result


def llmbench_profile(url: str, concurrency: int, requests: int, osl: int,
                     *extra: str, isl: int = 16, code: str | None = None,
                     stderr_lines: list[str] | None = None) -> dict[str, Any]:
    """Runs ``llmbench profile`` as a user would and returns its summary, flattened to the
    keys the scripts read (GenAI-Perf's metrics and ours side by side).

    ``code``: a folder holding another ``llmbench`` package to run instead (a baseline,
    e.g. ``git archive HEAD llmbench | tar -x -C DIR``)."""
    with tempfile.TemporaryDirectory() as tmp:
        _, cpu, rss = run_child(
            [sys.executable, "-m", "llmbench", "profile", "--url", url,
             "--concurrency", str(concurrency), "--request-count", str(requests),
             "--synthetic-input-tokens-mean", str(isl), "--output-tokens-mean", str(osl),
             "--extra-inputs", "ignore_eos:true", "--artifact-dir", tmp, *extra],
            env={"PYTHONPATH": code} if code else None, stderr_lines=stderr_lines,
            # ``python -m`` puts the working directory first on sys.path: run from a checkout,
            # the baseline would import the checkout's package instead of ``code``'s
            cwd=code,
        )
        found = next(Path(tmp).rglob("*_genai_perf.json"))
        summary: dict[str, Any] = json.loads(found.read_text())
        # (send, first token) perf_counter_ns of each measured request, for the join with
        # the sim's own records (``wave_split``)
        stamps = []
        for path in Path(tmp).rglob("*_llmbench_requests.jsonl"):
            for line in path.read_text().splitlines():
                r = json.loads(line)
                if not r["warmup"] and r["first_token_ns"]:
                    stamps.append((r["sent_ns"], r["first_token_ns"]))
    summary.update(summary.pop("llmbench", {}))
    summary["_cpu_s"], summary["_rss_mb"] = cpu, rss
    summary["_stamps"] = stamps
    return summary


def reset_truth(url: str) -> None:
    httpx.post(url + "/sim/reset", timeout=10).raise_for_status()


def sim_records(url: str) -> list[dict[str, Any]]:
    """The sim's own records of the requests since the last reset that it answered."""
    recs = httpx.get(url + "/sim/records", timeout=60).json()
    recs = recs["records"] if isinstance(recs, dict) else recs
    return [r for r in recs if r["status"] == "ok" and r["first_token_ns"]]


def server_truth(url: str, osl: int | None = None) -> dict[str, Any]:
    """Mean TTFT and ITL as the sim itself did them, for the requests since the last reset
    (only those of ``osl`` output tokens when given: a preflight probe is not the load);
    ``records`` holds them for :func:`wave_split`."""
    ok = sim_records(url)
    if osl is not None:
        ok = [r for r in ok if r["output_tokens"] == osl]
    ttft = [(r["first_token_ns"] - r["arrival_ns"]) / 1e6 for r in ok]
    itl = [(r["last_token_ns"] - r["first_token_ns"]) / 1e6 / (r["output_tokens"] - 1)
           for r in ok if r["output_tokens"] > 1]
    return {"requests": len(ok), "ttft_mean_ms": sum(ttft) / len(ttft),
            "itl_mean_ms": sum(itl) / len(itl), "records": ok}


def wave_split(stamps: list[tuple[int, int]], truth: list[dict[str, Any]],
               wave: int) -> list[tuple[float, float]]:
    """Per wave of ``wave`` requests: (send side, receive side) mean gaps in ms.

    Send side = the sim's receive time of the request head − the client's send stamp; receive
    side = the client's first-token stamp − the sim's first token write. Both clocks are
    ``CLOCK_MONOTONIC``. No per-request join is needed: in a closed loop at concurrency c with
    equal requests, the k-th c requests by send time are the k-th c the sim received (a wave
    ends before the next starts), and the mean of differences is the difference of means.
    """
    sent = sorted(s for s, _ in stamps)
    first = sorted(f for _, f in stamps)
    arrived = sorted(r["arrival_ns"] for r in truth)
    wrote = sorted(r["first_token_ns"] for r in truth)
    if len(sent) != len(arrived):
        raise RuntimeError(f"{len(sent)} client stamps against {len(arrived)} sim records")
    out = []
    for k in range(0, len(sent), wave):
        sl = slice(k, k + wave)
        n = len(sent[sl])
        out.append(((sum(arrived[sl]) - sum(sent[sl])) / n / 1e6,
                    (sum(first[sl]) - sum(wrote[sl])) / n / 1e6))
    return out


def settle(seconds: float = 0.5) -> None:
    time.sleep(seconds)
