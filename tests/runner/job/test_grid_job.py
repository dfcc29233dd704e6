"""A two-axis sweep through the runner pod's entry point (the operator's path, without the
cluster): the store gets every cell of the grid, and the digest each workload's verdicts and
the Pareto frontier, over the kept GPUs of the simulator's exporter."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmbench.api.job import (
    CONTEXT_KEY,
    DIGEST_KEY,
    ENV_API_KEY,
    SPEC_KEY,
    SUMMARY_KEY,
    RunContext,
    point_key,
)
from llmbench.api.status import RunDigest
from llmbench.runner.job.main import run_job
from llmbench.runner.job.store import DirStore
from tests.sim_process import running_sim

KEY = "sk-llmbench-grid-test"
POD, NS = "vllm-0", "llm"
SIM_ARGS = ["--ttft-ms", "20", "--itl-ms", "4", "--itl-ms-per-seq", "4", "--api-key", KEY,
            "--dcgm", "--dcgm-gpus", "2", "--dcgm-pod", POD, "--dcgm-namespace", NS]
LABELS = ("isl16-osl12", "isl32-osl4")


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with running_sim(SIM_ARGS) as url:
        yield url


def test_grid_job_writes_every_cell_and_the_per_workload_digest(
    sim_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ENV_API_KEY, KEY)
    store = DirStore(tmp_path / "store")
    spec = {
        "target": {"url": "http://127.0.0.1:9", "apiKeySecretRef": {"name": "s", "key": "k"}},
        "workload": {"extraInputs": {"ignore_eos": True}},
        "load": {"requestCount": 8, "warmupRequestCount": 2},
        "sweep": {"type": "concurrency", "values": [1.0, 4.0],
                  "workloads": [{"inputTokens": 16, "outputTokens": 12},
                                {"inputTokens": 32, "outputTokens": 4}]},
        "slo": {"ttftP99Ms": 5000},
    }
    ctx = RunContext(benchmark="b", namespace=NS, run=1, url=sim_url, api_key_env=ENV_API_KEY,
                     dcgm_urls=[f"{sim_url}/dcgm/metrics"], target_pods=[POD],
                     target_namespace=NS)
    store.write({SPEC_KEY: json.dumps(spec),
                 CONTEXT_KEY: ctx.model_dump_json(by_alias=True, exclude_none=True)})
    rc = run_job(store, tmp_path / "art", termination_log=tmp_path / "term",
                 stop=asyncio.Event(), runner_node="node-a")
    assert rc == 0
    data = store.read()
    names = [f"llmbench-sim-openai-chat-concurrency{c}-{w}" for w in LABELS for c in (1, 4)]
    for name in names:
        assert point_key(name) in data
        osl = json.loads(data[point_key(name)])["output_sequence_length"]["avg"]
        assert osl == (12 if name.endswith("osl12") else 4)  # the cell ran its own workload
    d = RunDigest.model_validate_json(data[DIGEST_KEY])
    assert (d.total, d.done, d.finished) == (4, 4, True)
    assert [(p.name, p.workload) for p in d.points] == [(n, n.split("-", 5)[-1]) for n in names]
    assert d.workloads is not None
    # a generous SLO: each workload's best point under it is its higher load
    assert [(w.workload, w.max_under_slo) for w in d.workloads] == [(w, 4.0) for w in LABELS]
    assert d.pareto is not None and d.pareto.basis == "gpu"
    assert set(d.pareto.frontier) <= set(names) and d.pareto.frontier
    assert "Workload" in data[SUMMARY_KEY].splitlines()[0].split(",")
