"""Client ceiling: output tokens/s one client ingests from ``llmbench sim`` with zero delays.

Prints, per concurrency (64, 256, 512, 1024), the raw-socket reference (stdlib loop and
uvloop), an httpx client that does
no parsing at all, and ``llmbench profile`` (1 and 2 worker processes), each as the median
of ``--repeat`` runs taken in turn against the same sim, with the ratio to the raw client
and each client's CPU seconds and peak RSS (process tree). With zero delays the sim writes a
whole response at once, so these runs are short: the median of several is the figure.
For llmbench it also prints the longest event-loop stall its own probe saw (its latest
wake-up) and how many responses went to the spill file; ``--buffer-mb`` sets the
undecoded-response budget (``LLMBENCH_BUFFER_MB``) so a short run crosses it; ``--baseline
DIR`` runs another llmbench package beside it.

``--phases`` also prints, per concurrency, where llmbench's memory goes: its resident and
peak MB after each phase of its last run (imports, workload, load and decoding, summary,
exports and, with ``--plots``, plots; from ``llmbench profile -v``'s ``llmbench.memory``
lines). ``--plots`` makes every llmbench run write its PNG plots and report.html too, so the
peak RSS covers them. The issue-22 ceilings: ``--concurrency 256 --requests-per-slot 8 --osl
256`` (2,048 requests) and ``--concurrency 512 --requests-per-slot 6 --osl 256`` (3,072).

    python benchmarks/client_ceiling.py [--osl 200] [--requests-per-slot 8] [--repeat 5]
        [--buffer-mb 16] [--phases] [--plots]
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
from collections.abc import Callable
from typing import Any

from harness import llmbench_profile, raw_client, settle, start_sim, stop_sim

_PHASE = re.compile(r"memory after (.+): rss ([0-9.]+) MB, peak ([0-9.]+) MB")


def _phases(lines: list[str]) -> str:
    """``phase rss/peak`` of the ``llmbench.memory`` lines, in their order."""
    found = [_PHASE.search(line) for line in lines]
    return ", ".join(f"{m[1]} {float(m[2]):.0f}/{float(m[3]):.0f}" for m in found if m)


def _median_run(run: Callable[[], dict[str, Any]], repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        runs.append(run())
        settle(0.3)
    keys = [k for k in runs[0] if k != "stalls"]
    out = {k: statistics.median(r[k] for r in runs) for k in keys}
    out["stalls"] = "/".join(f"{r.get('stall_ms', 0):.0f}" for r in runs)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--osl", type=int, default=200)
    p.add_argument("--requests-per-slot", type=int, default=8)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--concurrency", type=int, nargs="+", default=[64, 256, 512, 1024])
    p.add_argument("--sim-workers", type=int, default=1)
    p.add_argument("--buffer-mb", type=float, help="llmbench's undecoded-response budget")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    p.add_argument("--no-httpx", action="store_true", help="skip the (slow) httpx client")
    p.add_argument("--phases", action="store_true",
                   help="print llmbench's rss/peak MB after each phase of its last run")
    p.add_argument("--plots", action="store_true",
                   help="llmbench runs also write their plots (--generate-plots)")
    p.add_argument("--baseline", metavar="DIR",
                   help="also run the llmbench package in DIR (e.g. from `git archive HEAD "
                   "llmbench | tar -x -C DIR`) as 'baseline'")
    a = p.parse_args()
    if a.buffer_mb is not None:
        os.environ["LLMBENCH_BUFFER_MB"] = str(a.buffer_mb)
    url, sim = start_sim("--ttft-ms", "0", "--itl-ms", "0", "--max-records", "0",
                         "--workers", str(a.sim_workers))
    print(f"{'client':<22}{'conc':>6}{'tok/s':>12}{'vs raw':>9}{'CPU s':>8}{'RSS MB':>8}"
          f"{'stall ms (each run)':>22}{'spilled':>9}"
          f"   (median of {a.repeat}; {a.requests_per_slot} requests per slot, OSL {a.osl})")
    phases: dict[str, str] = {}  # this concurrency's llmbench memory lines, by client
    try:
        for c in a.concurrency:
            n = c * a.requests_per_slot

            def raw(script: str, *extra: str, c: int = c, n: int = n) -> dict[str, Any]:
                r = raw_client(url, c, n, a.osl, script, *extra)
                return {"tok_s": r["tokens_per_s"], "cpu_s": r["cpu_s"], "rss_mb": r["rss_mb"]}

            phases.clear()

            def ours(workers: int, c: int = c, n: int = n,
                     code: str | None = None) -> dict[str, Any]:
                lines: list[str] = []
                flags = ["--workers", str(workers), *(["-v"] if a.phases else []),
                         *(["--generate-plots"] if a.plots else [])]
                s = llmbench_profile(url, c, n, a.osl, *flags, code=code, stderr_lines=lines)
                phases[f"{'baseline' if code else 'llmbench'} workers={workers}"] = \
                    _phases(lines)
                if s["errors"]["total"]:
                    raise RuntimeError(f"llmbench saw errors: {s['errors']}")
                client = s.get("client") or {}
                # The longest probe wake-up: the longest stall (older versions report it too).
                stall = ((client.get("loop_lag_ms") or {}).get("max") or 0.0)
                return {"tok_s": s["output_token_throughput"]["avg"], "cpu_s": s["_cpu_s"],
                        "rss_mb": s["_rss_mb"], "stall_ms": stall,
                        "spilled": client.get("spilled_requests") or 0}

            base = _median_run(lambda: raw("rawclient.py"), a.repeat)
            rows = [("raw socket", base),
                    ("raw socket uvloop",
                     _median_run(lambda: raw("rawclient.py", "--loop", "uvloop"), a.repeat))]
            if not a.no_httpx:
                rows.append(("httpx (no parsing)", _median_run(lambda: raw("httpxclient.py"), 1)))
            rows += [(f"llmbench workers={w}", _median_run(lambda w=w: ours(w), a.repeat))
                     for w in a.workers]
            if a.baseline:
                rows += [(f"baseline workers={w}",
                          _median_run(lambda w=w: ours(w, code=a.baseline), a.repeat))
                         for w in a.workers]
            for name, r in rows:
                extra = (f"{r['stalls']:>22}{r['spilled']:>9.0f}" if "spilled" in r else "")
                print(f"{name:<22}{c:>6}{r['tok_s']:>12,.0f}{r['tok_s'] / base['tok_s']:>9.0%}"
                      f"{r['cpu_s']:>8.1f}{r['rss_mb']:>8.0f}{extra}", flush=True)
            for name, line in phases.items() if a.phases else ():
                print(f"  memory of {name} at c{c} (phase rss/peak MB): {line or 'none'}")
    finally:
        stop_sim(sim)


if __name__ == "__main__":
    main()
