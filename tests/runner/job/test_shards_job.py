"""``spec.runner.replicas``: several ``llmbench job`` processes drive each point together.

Each shard is its own process with ``JOB_COMPLETION_INDEX`` set, as an Indexed Job's pods are,
sharing one folder store (the ConfigMap's stand-in) and one ``llmbench sim`` on 127.0.0.1,
whose own records are the ground truth: what was sent, when, and how many were in flight.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmbench.api.job import (
    CHECKPOINT_KEY,
    CONTEXT_KEY,
    DIGEST_KEY,
    ENV_SHARD_INDEX,
    SHARD_PREFIX,
    SPEC_KEY,
    SUMMARY_KEY,
    RunContext,
    point_key,
    shard_key,
)
from llmbench.api.results import PointResult
from llmbench.api.status import RunDigest
from llmbench.runner.job.shards import Coordinator, ShardTiming
from llmbench.runner.job.store import DirStore
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.point.config import ProfileConfig
from llmbench.runner.point.metrics import summarize
from llmbench.runner.point.profile import ProfileResult
from llmbench.runner.workload.config import WorkloadConfig
from tests.sim_process import running_sim

REPO = Path(__file__).resolve().parents[3]
SIM = ["--ttft-ms", "20", "--itl-ms", "4", "--seed", "1"]
POINT = "llmbench-sim-openai-chat-concurrency6"


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with running_sim(SIM) as url:
        yield url


def spec(url: str, replicas: int, *, count: int = 30, warmup: int = 3,
         values: tuple[float, ...] = (6.0,), osl: int = 20) -> dict[str, Any]:
    return {
        "target": {"url": url},
        "workload": {"inputTokens": {"mean": 24, "stddev": 6}, "outputTokens": {"mean": osl},
                     "extraInputs": {"ignore_eos": True}, "seed": 11},
        "load": {"requestCount": count, "warmupRequestCount": warmup},
        "sweep": {"type": "concurrency", "values": list(values)},
        "runner": {"replicas": replicas},
    }


def seed_store(directory: Path, url: str, doc: dict[str, Any]) -> DirStore:
    store = DirStore(directory)
    store.write({
        SPEC_KEY: json.dumps(doc),
        CONTEXT_KEY: RunContext(benchmark="b", namespace="ns", url=url).model_dump_json(
            by_alias=True, exclude_none=True),
    })
    return store


def start_shard(tmp: Path, index: int, *, node: str | None = None,
                tag: str = "") -> subprocess.Popen[str]:
    env = {**os.environ, ENV_SHARD_INDEX: str(index)}
    if node is not None:
        env["LLMBENCH_NODE_NAME"] = node
    with (tmp / f"shard{index}{tag}.log").open("w") as log:  # the child keeps its own fd
        return subprocess.Popen(
            [sys.executable, "-m", "llmbench", "job", "--store-dir", str(tmp / "store"),
             "--artifact-dir", str(tmp / f"art{index}{tag}"),
             "--termination-log", str(tmp / f"term{index}{tag}")],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, text=True,
        )


def wait_all(procs: list[subprocess.Popen[str]], tmp: Path, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    try:
        for p in procs:
            p.wait(max(1.0, deadline - time.monotonic()))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    logs = "\n".join(f.read_text() for f in sorted(tmp.glob("shard*.log")))
    assert [p.returncode for p in procs] == [0] * len(procs), logs


def sim_mark(url: str) -> int:
    return int(httpx.get(f"{url}/sim/records?since=1000000000").json()["next_request_id"])


def sim_load_records(url: str, since: int) -> list[dict[str, Any]]:
    """The load requests the sim served since ``since`` (one-token probes left out)."""
    recs = httpx.get(f"{url}/sim/records?since={since}").json()["records"]
    return [r for r in recs if r["max_tokens"] != 1]


def max_in_flight(recs: list[dict[str, Any]]) -> int:
    events = sorted([(r["arrival_ns"], 1) for r in recs] + [(r["last_token_ns"], -1) for r in recs])
    now = peak = 0
    for _, step in events:
        now += step
        peak = max(peak, now)
    return peak


def point_of(store: DirStore, name: str = POINT) -> PointResult:
    return PointResult.model_validate(json.loads(store.read()[point_key(name)]))


def test_three_shards_measure_what_one_runner_measures(sim_url: str, tmp_path: Path) -> None:
    one, three = tmp_path / "one", tmp_path / "three"
    one.mkdir()
    three.mkdir()
    mark = sim_mark(sim_url)
    single = seed_store(one / "store", sim_url, spec(sim_url, 1))
    wait_all([start_shard(one, 0)], one)
    served_one = sim_load_records(sim_url, mark)

    mark = sim_mark(sim_url)
    store = seed_store(three / "store", sim_url, spec(sim_url, 3))
    wait_all([start_shard(three, i, node="node-a" if i < 2 else "node-b") for i in range(3)],
             three)
    served_three = sim_load_records(sim_url, mark)

    a, b = point_of(single), point_of(store)
    # the same requests: counts and token sums equal (same seed, same prompts, split by number)
    assert len(served_one) == len(served_three) == 33
    assert sorted(r["prompt_tokens"] for r in served_one) == \
        sorted(r["prompt_tokens"] for r in served_three)
    assert b.request_count.avg == a.request_count.avg == 30
    assert b.window.warmup_requests == a.window.warmup_requests == 3
    assert b.errors.total == 0
    for stat in ("output_sequence_length", "input_sequence_length"):
        sa, sb = getattr(a, stat), getattr(b, stat)
        assert sa is not None and sb is not None
        assert sa.avg * 30 == pytest.approx(sb.avg * 30)
        assert (sa.min, sa.max, sa.p50) == (sb.min, sb.max, sb.p50)
    # concurrency held at 6 by 3 pods of 2 slots each, as the server saw it
    assert max_in_flight(served_three) == 6
    shards = b.shards
    assert shards is not None and a.shards is None
    assert shards.replicas == 3 and shards.attempts == 1 and not shards.repeated
    assert [s.target for s in shards.shards] == [2.0, 2.0, 2.0]
    assert [s.requests for s in shards.shards] == [10, 10, 10]
    assert all(s.mean_in_flight is not None and s.mean_in_flight > 1.0 for s in shards.shards)
    assert shards.start_spread_ms is not None and shards.start_spread_ms < 250
    assert shards.api_calls and shards.record_bytes
    # latencies: the sim's injected TTFT/ITL, within run-to-run noise of one runner
    for stat in ("time_to_first_token", "inter_token_latency"):
        sa, sb = getattr(a, stat), getattr(b, stat)
        assert sa is not None and sb is not None
        assert sb.avg == pytest.approx(sa.avg, rel=0.35), stat
    digest = RunDigest.model_validate_json(store.read()[DIGEST_KEY])
    assert digest.replicas == 3 and digest.finished and not digest.failed
    (p,) = digest.points
    assert p.replicas == 3 and [s.requests for s in p.shard_load] == [10, 10, 10]
    single_digest = RunDigest.model_validate_json(single.read()[DIGEST_KEY])
    assert single_digest.replicas is None and single_digest.points[0].replicas is None
    # the summary CSV: one runner's columns, plus the replicas and each pod's load
    head3, row3 = store.read()[SUMMARY_KEY].splitlines()[:2]
    head1 = single.read()[SUMMARY_KEY].splitlines()[0]
    assert head3 == head1.replace(",Status", ",Replicas,Shard Load (achieved/target),Status")
    assert ",3," in row3 and row3.count("/2") == 3
    # the shard keys are gone once the point is written
    assert not [k for k in store.read() if k.startswith(SHARD_PREFIX)]
    # followers wrote nothing of their own to the store, but know the result
    for i in (1, 2):
        follower = PointResult.model_validate_json(
            (three / f"art{i}" / POINT / "profile_export_genai_perf.json").read_text())
        assert follower.request_count.avg == 30


FIRST = "llmbench-sim-openai-chat-concurrency3"


def killed_mid_point(sim_url: str, tmp_path: Path, victim: int) -> DirStore:
    """Three shards sweep concurrency 3 and 6 (45 requests each); shard ``victim`` is
    SIGKILLed mid-load of the first point and started again with its index, as the Job's
    retry would be. Returns the store once every shard has exited 0."""
    store = seed_store(tmp_path / "store", sim_url,
                       spec(sim_url, 3, count=45, warmup=0, values=(3.0, 6.0), osl=40))
    procs = [start_shard(tmp_path, i) for i in range(3)]
    key = shard_key(FIRST, "start")
    deadline = time.monotonic() + 120
    while key not in store.read():
        assert time.monotonic() < deadline, "the first point never started"
        assert all(p.poll() is None for p in procs)
        time.sleep(0.05)
    time.sleep(1.6)  # the start instant is 1 s ahead: the shards are mid-load now
    assert procs[victim].poll() is None
    procs[victim].send_signal(signal.SIGKILL)
    procs[victim].wait()
    procs[victim] = start_shard(tmp_path, victim, tag="-restarted")
    wait_all(procs, tmp_path)
    return store


def test_a_killed_shard_rejoins_and_the_point_is_repeated_not_double_counted(
    sim_url: str, tmp_path: Path
) -> None:
    store = killed_mid_point(sim_url, tmp_path, 2)
    p1 = point_of(store, FIRST)
    assert p1.shards is not None
    assert p1.shards.attempts == 2 and "shard 2 restarted" in p1.shards.repeated[0]
    assert p1.request_count.avg == 45 and p1.window.measured_requests == 45  # not 45 + more
    p2 = point_of(store)
    assert p2.shards is not None and p2.shards.attempts == 1 and p2.request_count.avg == 45
    digest = RunDigest.model_validate_json(store.read()[DIGEST_KEY])
    assert digest.finished and [p.repeated for p in digest.points] == [1, None]
    assert not [k for k in store.read() if k.startswith(SHARD_PREFIX)]


def test_shards_ready_at_different_times_start_each_point_together(
    sim_url: str, tmp_path: Path
) -> None:
    store = seed_store(tmp_path / "store", sim_url,
                       spec(sim_url, 3, count=18, warmup=0, values=(3.0, 6.0)))
    procs = [start_shard(tmp_path, 0), start_shard(tmp_path, 1)]
    time.sleep(3.0)  # the third pod is scheduled late
    procs.append(start_shard(tmp_path, 2))
    wait_all(procs, tmp_path)
    for name in ("llmbench-sim-openai-chat-concurrency3", POINT):
        shards = point_of(store, name).shards
        assert shards is not None
        assert shards.start_spread_ms is not None and shards.start_spread_ms < 250
        assert shards.barrier_wait_ms is not None and shards.barrier_wait_ms >= 900  # the lead
        firsts = [s.first_send_ms for s in shards.shards]
        assert all(f is not None and f < 250 for f in firsts)


def test_a_killed_leader_resumes_and_the_followers_follow_it(
    sim_url: str, tmp_path: Path
) -> None:
    """Shard 0 dies mid-point: its replacement resumes from the store, the point runs again
    with every shard, and each request of the published point is counted once."""
    store = killed_mid_point(sim_url, tmp_path, 0)
    p1 = point_of(store, FIRST)
    assert p1.shards is not None and p1.shards.attempts == 2
    assert p1.shards.repeated == ["attempt 0: shard 0 restarted"]
    assert p1.request_count.avg == 45 and p1.window.measured_requests == 45
    assert point_of(store).request_count.avg == 45
    digest = RunDigest.model_validate_json(store.read()[DIGEST_KEY])
    assert digest.finished and not digest.failed and digest.done == 2
    assert [p.repeated for p in digest.points] == [1, None]
    assert not [k for k in store.read() if k.startswith(SHARD_PREFIX)]


def test_a_follower_writes_nothing_for_a_point_after_its_records(
    sim_url: str, tmp_path: Path
) -> None:
    """Shard 0 removes a point's ``shard.`` keys right after publishing it, so a follower
    must not write to them once its records are in: a key it wrote later would be left
    behind (CI once found ``shard.<p>.ready.1`` after a run). The test plays shard 0 by hand
    against one in-process follower, so the order is the protocol's, not a race's."""
    (tmp_path / "store").mkdir()
    store = DirStore(tmp_path / "store")
    follower = Coordinator(store, 1, 2, timing=ShardTiming(lead_s=0.3))
    name = "p"
    cfg = ProfileConfig(
        url=sim_url, model="llmbench-sim", preflight=False, artifact_dir=tmp_path / "art" / name,
        load=LoadConfig(concurrency=2, request_count=8),
        workload=WorkloadConfig(synthetic_input_tokens_mean=16, output_tokens_mean=8,
                                extra_inputs={"ignore_eos": True}),
    )

    def shard_keys() -> dict[str, str]:
        return {k: v for k, v in store.read().items() if k.startswith(SHARD_PREFIX)}

    def wait_for(key: str) -> None:
        deadline = time.monotonic() + 60
        while key not in store.read():
            assert time.monotonic() < deadline, f"{key} never written"
            time.sleep(0.02)

    async def lead() -> ProfileResult:
        task = asyncio.create_task(follower.run_point(cfg, asyncio.Event()))
        await asyncio.to_thread(wait_for, shard_key(name, "ready", "1"))
        start = {"attempt": 0, "at": time.time_ns() + int(0.3e9), "boots": {"1": follower.boot}}
        store.write({shard_key(name, "start"): json.dumps(start)})
        await asyncio.to_thread(wait_for, shard_key(name, "rec", 0, 1))
        after_records = shard_keys()
        ready = json.loads(after_records[shard_key(name, "ready", "1")])
        assert ready["after"] == 0 and ready["boot"] == follower.boot  # ready for a repeat
        await asyncio.sleep(0.5)  # the follower is polling for the outcome by now
        assert shard_keys() == after_records
        summary = summarize([], streaming=True)
        store.write({point_key(name): summary.to_json(),
                     CHECKPOINT_KEY: json.dumps({"points": {name: {"status": "done"}}})})
        result = await asyncio.wait_for(task, 30)
        assert shard_keys() == after_records  # nothing written after the records, ever
        return result

    result = asyncio.run(lead())
    assert result.summary.request_count.avg == 0  # the published point, not its own share
