"""``llmbench sim`` as a process for the tests that need a real server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx

from llmbench.api.results import PointResult
from llmbench.sim import spawn_sim

__all__ = ["SimFactory", "profile_point", "running_sim", "sim_pool", "sim_records"]


@contextlib.contextmanager
def running_sim(args: list[str]) -> Iterator[str]:
    """``llmbench sim`` with ``args`` in its own process; yields its base URL and stops it (and
    closes its output pipe) afterwards. Module fixtures wrap this."""
    url, proc = spawn_sim(args)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


SimFactory = Callable[..., str]


@contextlib.contextmanager
def sim_pool() -> Iterator[SimFactory]:
    """One ``llmbench sim`` per distinct flag set, started on first use and stopped at the end:
    ``url = get("--ttft-ms", "5")``."""
    running: dict[tuple[str, ...], tuple[str, subprocess.Popen[str]]] = {}

    def get(*flags: str) -> str:
        if flags not in running:
            running[flags] = spawn_sim(list(flags))
        return running[flags][0]

    try:
        yield get
    finally:
        for _, proc in running.values():
            proc.terminate()
            proc.wait(10)


def sim_records(url: str) -> list[dict[str, Any]]:
    """The sim's per-request records of the run, without preflight's one-token probe."""
    doc = httpx.get(url + "/sim/records").json()
    recs = doc["records"] if isinstance(doc, dict) else doc
    assert recs[0]["max_tokens"] == 1  # preflight's probe
    return list(recs[1:])


def profile_point(tmp: Path, url: str, *flags: str) -> tuple[int, PointResult, Path]:
    """``llmbench profile`` into ``tmp/art``: its exit code, its result and its point folder."""
    from llmbench.cli import main

    out = tmp / "art"
    code = main(["profile", "--url", url, "--artifact-dir", str(out), *flags])
    (point,) = [p for p in out.iterdir() if p.is_dir()]
    result = PointResult.model_validate_json(
        (point / "profile_export_genai_perf.json").read_text()
    )
    return code, result, point
