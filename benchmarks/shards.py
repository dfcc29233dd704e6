"""What does driving one point from several runner pods cost, and what does it buy?

Runs ``llmbench job`` as 1, 2 and 4 shard processes (``JOB_COMPLETION_INDEX`` set, one folder
store, as an Indexed Job's pods share the results ConfigMap) against a zero-delay
``llmbench sim`` (TTFT = ITL = 0: the server answers as fast as it can), one closed-loop
point each, and prints per shard count:

* the aggregate ingest: output tokens/s and requests/s of the merged point, and the CPU the
  sim process used (near 100 % of one core = the sim, not the client, is the limit: on a
  2-core machine the shards and the sim share the cores);
* the coordination overhead per point: the barrier wait beyond the slowest shard (start
  instant - last ready, minus the published lead, which is a fixed choice), the leader's
  wait for the records after its own load, the store calls and record bytes;

then an on-paper estimate for 64 shards on a real API server (calls and ConfigMap bytes per
point), from the per-shard figures measured here.

    .venv/bin/python benchmarks/shards.py [--requests 12000] [--concurrency 32] [--osl 64]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from llmbench.api.job import CONTEXT_KEY, ENV_SHARD_INDEX, SPEC_KEY, RunContext, point_key
from llmbench.api.results import PointResult
from llmbench.runner.job.shards import CONFIGMAP_LIMIT, ShardTiming
from llmbench.runner.job.store import DirStore
from llmbench.sim import spawn_sim

REPO = Path(__file__).resolve().parents[1]


def _proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return sum(int(x) for x in parts[11:13]) / os.sysconf("SC_CLK_TCK")


def run_point(url: str, sim_pid: int, shards: int, args: argparse.Namespace) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        store = DirStore(root / "store")
        spec = {
            "target": {"url": url},
            "workload": {"inputTokens": {"mean": 32}, "outputTokens": {"mean": args.osl},
                         "extraInputs": {"ignore_eos": True}},
            "load": {"concurrency": args.concurrency, "requestCount": args.requests,
                     "warmupRequestCount": args.concurrency},
            "runner": {"replicas": shards},
        }
        store.write({SPEC_KEY: json.dumps(spec), CONTEXT_KEY: RunContext(
            benchmark="b", namespace="ns", url=url).model_dump_json(by_alias=True)})
        cpu0, t0 = _proc_cpu_s(sim_pid), time.monotonic()
        procs = [
            subprocess.Popen(
                [sys.executable, "-m", "llmbench", "job", "--store-dir", str(root / "store"),
                 "--artifact-dir", str(root / f"a{i}"), "--termination-log", str(root / f"t{i}")],
                cwd=REPO, env={**os.environ, ENV_SHARD_INDEX: str(i)},
                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
            )
            for i in range(shards)
        ]
        errs = [p.communicate(timeout=600)[1] for p in procs]
        wall = time.monotonic() - t0
        cpu = _proc_cpu_s(sim_pid) - cpu0
        if any(p.returncode for p in procs):
            raise SystemExit(f"{shards} shards failed:\n" + "\n".join(errs))
        data = store.read()
        (key,) = [k for k in data if k.startswith("point.")]
        point = PointResult.model_validate(json.loads(data[key]))
        assert key == point_key(key[len("point."):-len(".json")])
    return {"shards": shards, "point": point, "wall_s": wall, "sim_cpu_s": cpu}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=12000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--osl", type=int, default=64)
    ap.add_argument("--shards", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()
    url, sim = spawn_sim(["--ttft-ms", "0", "--itl-ms", "0"])
    lead_ms = ShardTiming().lead_s * 1e3
    rows = []
    try:
        for n in args.shards:
            rows.append(run_point(url, sim.pid, n, args))
    finally:
        sim.terminate()
        sim.wait(10)
    print(f"one point: concurrency {args.concurrency}, {args.requests} requests, OSL "
          f"{args.osl}, zero-delay sim (1 process); {os.cpu_count()} CPUs\n")
    print(f"{'shards':>6} {'tok/s':>9} {'req/s':>8} {'window s':>8} {'sim CPU':>8} "
          f"{'barrier+':>9} {'merge ms':>8} {'calls':>6} {'rec KB':>7} {'spread ms':>9}")
    per_follower_calls: list[float] = []
    bytes_per_req: list[float] = []
    for r in rows:
        p: PointResult = r["point"]
        sh = p.shards
        window = p.window.duration_s
        beyond = (sh.barrier_wait_ms or 0) - lead_ms if sh else None
        print(f"{r['shards']:>6} {p.output_token_throughput.avg or 0:>9.0f} "
              f"{p.request_throughput.avg or 0:>8.0f} {window:>8.2f} "
              f"{100 * r['sim_cpu_s'] / max(window, 1e-9):>7.0f}% "
              f"{beyond if beyond is not None else 0:>9.1f} "
              f"{(sh.merge_wait_ms or 0) if sh else 0:>8.1f} "
              f"{(sh.api_calls or 0) if sh else 0:>6} "
              f"{((sh.record_bytes or 0) / 1024) if sh else 0:>7.1f} "
              f"{(sh.start_spread_ms or 0) if sh else 0:>9.2f}")
        if sh is not None and r["shards"] > 1:
            per_follower_calls.append((sh.api_calls or 0) / r["shards"])
            sent = sum(s.requests for s in sh.shards[1:])
            bytes_per_req.append((sh.record_bytes or 0) / max(1, sent))
    print("\n(sim CPU: the sim process's CPU over the window; near 100 % it is the limit. "
          "barrier+: start instant - last ready - the "
          f"{lead_ms:.0f} ms lead; merge: the leader's wait for the records after its load)")
    if not bytes_per_req:
        return
    calls = max(per_follower_calls)
    bpr = max(bytes_per_req)
    n64 = 64
    requests = args.requests
    ready_start = n64 * 160 + n64 * 70  # ready docs + the start doc's boots/seen per shard
    records = bpr * requests
    print(f"\n64 shards, on paper (from the figures above: {calls:.1f} store calls per shard "
          f"per point, {bpr:.0f} record bytes per request with every chunk kept):")
    print(f"  store calls per point   ~ {calls * n64:.0f} (each GET returns the whole ConfigMap)")
    print(f"  ConfigMap bytes/point   ~ {ready_start + records:,.0f} for {requests} requests "
          f"(ready+start {ready_start:,} B + records {records:,.0f} B); limit {CONFIGMAP_LIMIT:,}")
    room = CONFIGMAP_LIMIT - 96 * 1024 - ready_start
    print(f"  requests per point that fit with full chunks ~ {room / bpr:,.0f}; beyond, "
          "chunk_ns is trimmed to first two + last (inter-chunk gaps lost)")


if __name__ == "__main__":
    main()
