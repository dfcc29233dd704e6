"""How many points × repetitions does the results ConfigMap hold?

The runner writes every finished repetition of every point (``point.<name>.json``) plus the
checkpoint, the digest and ``summary.csv`` into the run's ConfigMap, whose data the API server
caps at 1 MiB (:mod:`llmbench.api.job`). This script measures what those keys really weigh:

1. it runs the real runner (``llmbench job``'s :func:`~llmbench.runner.job.main.run_job`, a
   folder as store) against ``llmbench sim`` serving ``--gpus`` simulated GPUs in
   dcgm-exporter's format and its inference-server ``/metrics``, for a few points with
   repetitions: the point results it stores are the real shapes (GPU and server telemetry,
   series, input config, client figures);
2. for sweeps of N values × R repetitions it clones those results into a sweep of that size
   and hands it to the runner's own serialiser (``_Job.updates``: the same per-point budget,
   the same shedding of telemetry series, the same checkpoint, digest and CSV), then counts
   the ConfigMap's data as the API server does (keys and values, spec.json and context.json
   included);

and prints one row per sweep size (bytes in all, per repetition) and the fit
``bytes = fixed + per_value × N + per_repetition × N × R`` from which
:data:`llmbench.api.spec.root.MAX_STORED_POINTS` is derived.

    .venv/bin/python benchmarks/result_size.py [--gpus 8] [--requests 40]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from llmbench.api import Spec
from llmbench.api.job import CONTEXT_KEY, SPEC_KEY, RunContext, point_name_of
from llmbench.api.results import PointResult
from llmbench.api.spec import MAX_STORED_POINTS
from llmbench.runner.job.digest import build_digest
from llmbench.runner.job.main import CONFIGMAP_LIMIT, _Job, run_job
from llmbench.runner.job.store import DirStore
from llmbench.runner.sweep.analysis import analysis
from llmbench.runner.sweep.run import DONE, PointRun, SweepResult, point_name
from llmbench.sim import spawn_sim

__all__ = ["configmap_bytes", "measured_points", "sweep_doc"]

MODEL = "llmbench-sim"
POD, NS = "vllm-0", "llm"
#: Sweep sizes measured: (values, repetitions).
SIZES = ((1, 1), (8, 1), (16, 1), (32, 1), (40, 1), (1, 40), (8, 5), (20, 2), (64, 1),
         (100, 1), (10, 10))


def sweep_doc(values: int, repetitions: int, url: str = "http://vllm.llm.svc:8000",
              requests: int = 40) -> dict[str, Any]:
    """A benchmark's spec as the operator stores it (``spec.json``): a concurrency sweep of
    ``values`` points, each run ``repetitions`` times, with an SLO and GPU telemetry."""
    return {
        "target": {"url": url, "model": MODEL},
        "workload": {"inputTokens": {"mean": 512}, "outputTokens": {"mean": 128}},
        "load": {"requestCount": requests, "warmupRequestCount": 4},
        "sweep": {"type": "concurrency", "values": [float(v) for v in range(1, values + 1)]},
        "repetitions": repetitions,
        "slo": {"ttftP99Ms": 2000, "itlP99Ms": 50},
    }


def _context(url: str, gpus: int) -> RunContext:
    return RunContext(
        benchmark="result-size", namespace=NS, run=1, url=url,
        dcgm_urls=[f"{url}/dcgm/metrics"], target_pods=[POD], target_namespace=NS,
    )


def measured_points(root: Path, *, gpus: int = 8, requests: int = 40) -> list[PointResult]:
    """Point results as the real runner stores them: a 4-value × 2-repetition sweep against
    ``llmbench sim`` with ``gpus`` simulated GPUs of the target pod (their series included)."""
    url, proc = spawn_sim(["--ttft-ms", "20", "--itl-ms", "4", "--dcgm", "--dcgm-gpus",
                           str(gpus), "--dcgm-pod", POD, "--dcgm-namespace", NS,
                           "--dcgm-collect-interval", "0"])
    try:
        store = DirStore(root / "store")
        doc = sweep_doc(0, 2, url, requests)
        doc["sweep"]["values"] = [1.0, 2.0, 4.0, 8.0]
        store.write({SPEC_KEY: json.dumps(doc),
                     CONTEXT_KEY: _context(url, gpus).model_dump_json(by_alias=True,
                                                                       exclude_none=True)})
        rc = run_job(store, root / "art", termination_log=None, stop=asyncio.Event())
        if rc != 0:
            raise RuntimeError(f"the runner ended with {rc}; see its log above")
        data = store.read()
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    return [PointResult.model_validate(json.loads(text)) for key, text in sorted(data.items())
            if point_name_of(key) is not None]


def configmap_bytes(templates: list[PointResult], values: int, repetitions: int,
                    root: Path) -> dict[str, int]:
    """The results ConfigMap's data bytes per key kind for a finished sweep of ``values`` ×
    ``repetitions``, each repetition's result one of ``templates`` (in turn), serialised by the
    runner's own code as its last write leaves the ConfigMap."""
    doc = sweep_doc(values, repetitions)
    # built past admission's cap too (model_copy does not validate): the rows beyond it show
    # why it is there
    base = Spec.from_manifest(sweep_doc(1, 1))
    assert base.sweep is not None
    spec = base.model_copy(update={
        "repetitions": repetitions,
        "sweep": base.sweep.model_copy(update={"values": doc["sweep"]["values"]}),
    })
    result = SweepResult(spec=spec, run_dir=root / "run", model=MODEL,
                         sweep_type="concurrency", values=spec.points())
    i = 0
    for v in result.values:
        for rep in range(1, repetitions + 1):
            name = point_name(spec, MODEL, "concurrency", v, rep)
            result.runs.append(PointRun(name=name, value=v, repetition=rep, status=DONE,
                                        summary=templates[i % len(templates)]))
            i += 1
    result.run_dir.mkdir(parents=True, exist_ok=True)
    job = _Job(DirStore(root / "store"), root / "art", None, None)
    job.total = values * repetitions
    data = analysis(result)
    digest = build_digest(result, data, run=1, finished=True, baseline=None, tolerances=None,
                          runner_node="node-a")
    updates = job.updates(result, digest, job.exports(result, data))
    updates[SPEC_KEY] = json.dumps(doc)
    updates[CONTEXT_KEY] = _context(doc["target"]["url"], 8).model_dump_json(
        by_alias=True, exclude_none=True)
    sizes: dict[str, int] = {}
    for key, text in updates.items():
        if text is None:  # a key the write removes (the ended point's progress record)
            continue
        kind = "points" if point_name_of(key) is not None else key
        sizes[kind] = sizes.get(kind, 0) + len(key.encode()) + len(text.encode())
    sizes["total"] = sum(sizes.values())
    return sizes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", type=int, default=8, help="simulated GPUs of the target pod")
    parser.add_argument("--requests", type=int, default=40, help="requests per point")
    args = parser.parse_args()
    os.environ.setdefault("LLMBENCH_LOG_LEVEL", "WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        templates = measured_points(root / "measure", gpus=args.gpus, requests=args.requests)
        whole = [len(t.to_json()) for t in templates]
        print(f"measured {len(templates)} point results, {args.gpus} GPUs: "
              f"{min(whole)}-{max(whole)} bytes each as written to the point's folder")
        print(f"{'values':>6} {'reps':>5} {'points':>6} {'total B':>9} {'points B':>9} "
              f"{'B/rep':>7} {'digest B':>8} {'csv B':>7} {'ckpt B':>7} {'of 1 MiB':>8}")
        for n, r in SIZES:
            s = configmap_bytes(templates, n, r, root / f"s{n}x{r}")
            print(f"{n:>6} {r:>5} {n * r:>6} {s['total']:>9} {s['points']:>9} "
                  f"{s['points'] // (n * r):>7} {s['digest.json']:>8} {s['summary.csv']:>7} "
                  f"{s['checkpoint.json']:>7} {s['total'] / CONFIGMAP_LIMIT:>8.0%}"
                  f"{'  (over the cap)' if n * r > MAX_STORED_POINTS else ''}")


if __name__ == "__main__":
    main()
