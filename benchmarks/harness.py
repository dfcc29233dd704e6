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


def run_child(cmd: list[str], timeout: float = 900,
              env: dict[str, str] | None = None) -> tuple[str, float, float]:
    """Runs ``cmd``; returns (stdout, CPU seconds, peak RSS MB) of that child and its workers.

    CPU comes from ``RUSAGE_CHILDREN`` deltas (exact, includes waited grandchildren); the RSS
    peak is the sum over the process tree, sampled every 50 ms.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        popen = subprocess.Popen(cmd, stdout=out, stderr=err, text=True,
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
                     *extra: str, isl: int = 16, code: str | None = None) -> dict[str, Any]:
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
            env={"PYTHONPATH": code} if code else None,
        )
        found = next(Path(tmp).rglob("*_genai_perf.json"))
        summary: dict[str, Any] = json.loads(found.read_text())
    summary.update(summary.pop("llmbench", {}))
    summary["_cpu_s"], summary["_rss_mb"] = cpu, rss
    return summary


def reset_truth(url: str) -> None:
    httpx.post(url + "/sim/reset", timeout=10).raise_for_status()


def server_truth(url: str) -> dict[str, float]:
    """Mean TTFT and ITL as the sim itself did them, for the requests since the last reset."""
    recs = httpx.get(url + "/sim/records", timeout=60).json()
    recs = recs["records"] if isinstance(recs, dict) else recs
    ok = [r for r in recs if r["status"] == "ok" and r["first_token_ns"]]
    ttft = [(r["first_token_ns"] - r["arrival_ns"]) / 1e6 for r in ok]
    itl = [(r["last_token_ns"] - r["first_token_ns"]) / 1e6 / (r["output_tokens"] - 1)
           for r in ok if r["output_tokens"] > 1]
    return {"requests": len(ok), "ttft_mean_ms": sum(ttft) / len(ttft),
            "itl_mean_ms": sum(itl) / len(itl)}


def settle(seconds: float = 0.5) -> None:
    time.sleep(seconds)
