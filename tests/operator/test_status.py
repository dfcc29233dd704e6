"""Status decisions: conditions flip with their time, runs are never doubled, status stays small."""

from __future__ import annotations

import json
from typing import Any

from llmbench.api.status import (
    SUMMARY_CSV_LIMIT,
    SUMMARY_CSV_MOVED,
    BenchmarkStatus,
    KneeStatus,
    MaxUnderSloStatus,
    ParetoStatus,
    PointStatus,
    RunDigest,
    WorkloadStatus,
    dump,
)
from llmbench.operator.status import (
    MAX_STATUS_BYTES,
    bounded_status,
    condition,
    decide,
    digest_patch,
    history_entry,
    image_pull_failure,
    job_outcome,
    oom_killed,
    runner_pod_conditions,
    set_condition,
    validity_condition,
)


def test_last_transition_time_moves_only_on_a_flip() -> None:
    c1 = set_condition([], condition("TargetReady", False, "ServiceNotFound", "x"), at="T1")
    assert c1[0]["lastTransitionTime"] == "T1"
    c2 = set_condition(c1, condition("TargetReady", False, "PodsNotReady", "y"), at="T2")
    assert c2[0]["lastTransitionTime"] == "T1" and c2[0]["reason"] == "PodsNotReady"
    c3 = set_condition(c2, condition("TargetReady", True, "Resolved"), at="T3")
    assert c3[0]["lastTransitionTime"] == "T3" and c3[0]["status"] == "True"
    c4 = set_condition(c3, condition("Accepted", True, "Valid"), at="T4")
    assert [c["type"] for c in c4] == ["TargetReady", "Accepted"]


def test_decide_never_starts_a_second_run_for_one_generation() -> None:
    meta = {"generation": 3}
    assert decide(meta, {}).action == "start" and decide(meta, {}).run == 1
    running = {"run": 2, "phase": "Running", "observedGeneration": 3, "job": "b-run-2"}
    assert decide(meta, running).action == "ensure"
    assert decide(meta, {**running, "phase": "Pending"}).action == "ensure"
    assert decide(meta, {**running, "phase": "Succeeded"}).action == "done"
    again = decide({"generation": 4}, {**running, "phase": "Failed"})
    assert (again.action, again.run) == ("start", 3)
    wait = decide({"generation": 4}, running)
    assert wait.action == "wait" and "finishes" in wait.message


def test_job_outcome() -> None:
    assert job_outcome(None) is None
    assert job_outcome({"status": {}}) == "Running"
    done = {"status": {"conditions": [{"type": "Complete", "status": "True"}]}}
    assert job_outcome(done) == "Succeeded"
    failed = {"status": {"conditions": [{"type": "FailureTarget", "status": "True"}]}}
    assert job_outcome(failed) == "Failed"


def test_runner_pod_pending_for_the_scheduler_says_why() -> None:
    pod = {"status": {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/3 nodes are available: 3 node(s) didn't match pod affinity rules."}]}}
    (c,) = runner_pod_conditions(pod, 1)
    assert (c.type, c.status, c.reason) == ("RunnerScheduled", "False", "Unschedulable")
    assert "pod affinity" in c.message
    running = {"spec": {"nodeName": "gpu-a"}, "status": {"phase": "Running", "conditions": [
        {"type": "PodScheduled", "status": "True"}]}}
    assert [(c.type, c.status) for c in runner_pod_conditions(running, 1)] == [
        ("RunnerScheduled", "True"), ("Running", "True")]


def test_a_runner_image_the_kubelet_backs_off_pulling_is_a_failure_naming_it() -> None:
    def pod(reason: str, message: str = "") -> dict[str, Any]:
        return {"status": {"phase": "Pending", "containerStatuses": [{
            "name": "runner", "image": "localhost/llmbench:nope",
            "state": {"waiting": {"reason": reason, "message": message}}}]}}

    # the first failed pull gets the kubelet's retry: not yet a failure
    assert image_pull_failure(pod("ErrImagePull", "connection refused")) is None
    assert image_pull_failure(pod("ContainerCreating")) is None
    msg = image_pull_failure(pod("ImagePullBackOff", 'Back-off pulling image "x"'))
    assert msg is not None and "localhost/llmbench:nope" in msg
    assert "ImagePullBackOff: Back-off pulling image" in msg and "spec.runner.image" in msg
    assert "InvalidImageName" in (image_pull_failure(pod("InvalidImageName")) or "")


def test_an_oom_killed_runner_is_named_with_its_limit_and_the_fix() -> None:
    spec = {"containers": [{"name": "runner", "resources": {"limits": {"memory": "40Mi"}}}]}
    retried = {"spec": spec, "status": {"containerStatuses": [{
        "state": {"running": {}},
        "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}}}]}}
    assert oom_killed([retried]) == (
        "the runner container was OOMKilled (limits.memory 40Mi): raise "
        "spec.runner.limits.memory")
    failed = {"spec": spec, "status": {"containerStatuses": [{
        "state": {"terminated": {"reason": "Error", "exitCode": 1}}}]}}
    assert oom_killed([failed]) is None and oom_killed([]) is None


def big_digest() -> RunDigest:
    points = [
        PointStatus(name=f"m-openai-chat-concurrency{2**i}", value=2**i, state="Succeeded",
                    ttft_p99_ms=45.0 * (i + 1), itl_p99_ms=5.1, e2e_p99_ms=900.0, ott=1000.0 * i,
                    rps=3.0, goodput=2.5, slo_met=i < 5, gpu_power_w=8 * 650.0,
                    gpu_energy_j=8 * 65000.0, gpu_utilization_pct=93.0, gpus=8, valid=True,
                    warnings=["exporter sampled slower than the scrape"] * 3)
        for i in range(9)
    ]
    return RunDigest(run=1, total=9, done=9, points=points,
                     knee=KneeStatus(reached=True, value=16, label="16", rule="ttft-2x",
                                     message="p99 TTFT 45 -> 98 ms"),
                     max_under_slo=MaxUnderSloStatus(value=16, ott=4000.0, ttft_p99_ms=98.0),
                     valid=True, finished=True)


def test_a_nine_point_eight_gpu_status_fits_well_under_64_kib() -> None:
    csv = "Config Name,Concurrency," + ",".join(["x"] * 20) + "\r\n"
    csv = csv * 30
    patch = digest_patch(big_digest(), csv)
    status = BenchmarkStatus.model_validate({**patch, "phase": "Succeeded", "run": 1})
    size = len(json.dumps(dump(status)))
    assert size < MAX_STATUS_BYTES / 4, size
    assert patch["progress"] == "9/9" and patch["maxUnderSLO"]["ott"] == 4000.0


def test_measurement_valid_from_the_digest() -> None:
    d = big_digest()
    assert validity_condition(RunDigest(), 1) is None
    c = validity_condition(d, 1)
    assert c is not None and c.status == "True"
    d.invalid_reasons = ["foreign traffic: the server completed 200 requests, the client 160"]
    c = validity_condition(d, 1)
    assert c is not None and c.status == "False" and "foreign traffic" in c.message
    d.invalid_reasons, d.error_rate = [], 0.05
    c = validity_condition(d, 1)
    assert c is not None and (c.status, c.reason) == ("False", "ErrorRate")


def test_status_figures_are_rounded_for_people_the_csv_keeps_them() -> None:
    d = RunDigest(total=1, done=1, points=[PointStatus(
        name="p", value=4, state="Succeeded", ott=1025.5455689606135, ttft_p99_ms=31.2057693)],
        max_under_slo=MaxUnderSloStatus(value=4, ott=1025.5455689606135))
    patch = digest_patch(d, "csv,1025.5455689606135\r\n")
    assert patch["points"][0]["ott"] == 1025.55 and patch["points"][0]["ttftP99Ms"] == 31.21
    assert patch["maxUnderSLO"]["ott"] == 1025.55
    assert patch["summaryCSV"] == "csv,1025.5455689606135\r\n"


def test_two_axis_digest_sets_workloads_and_frontier() -> None:
    w = WorkloadStatus.model_validate({"workload": "isl16-osl6", "knee": 2.0,
                                       "maxUnderSLO": 4.0, "maxOtt": 93.6612, "message": "m"})
    d = RunDigest(total=2, done=2, workloads=[w],
                  pareto=ParetoStatus(basis="gpu", frontier=["a", "b"]))
    patch = digest_patch(d, None)
    assert patch["workloads"] == [{"workload": "isl16-osl6", "knee": 2.0, "maxUnderSLO": 4.0,
                                   "maxOtt": 93.66, "message": "m"}]
    assert patch["pareto"] == {"basis": "gpu", "frontier": ["a", "b"]}
    # what the status model reads back, and a one-axis digest sets neither
    status = BenchmarkStatus.model_validate(patch)
    assert status.workloads == [WorkloadStatus.model_validate(patch["workloads"][0])]
    assert "workloads" not in digest_patch(RunDigest(total=1, done=1), None)


def test_history_keeps_the_last_runs_and_names_the_ones_to_delete() -> None:
    from llmbench.operator.status import history_entry, with_history

    def entry(run: int) -> Any:
        return history_entry(run, "Succeeded", big_digest(), started="S", finished=f"T{run}",
                             valid=True, config_map=f"b-run-{run}", message=f"run {run} done")

    e = entry(1)
    assert (e.knee, e.max_ott_under_slo, e.ttft_p99_ms, e.points) == ("16", 4000.0, 98.0, 9)
    history: list[dict[str, Any]] = []
    dropped_all: list[int] = []
    for run in range(1, 6):
        history, dropped = with_history(history, entry(run), limit=3)
        dropped_all += dropped
    assert [h["run"] for h in history] == [3, 4, 5] and dropped_all == [1, 2]
    assert history[-1]["configMap"] == "b-run-5" and history[-1]["maxOttUnderSlo"] == 4000.0
    again, dropped = with_history(history, entry(5), limit=3)  # the same run twice: one entry
    assert [h["run"] for h in again] == [3, 4, 5] and dropped == []


def test_a_64_shard_status_sheds_the_per_shard_load_before_it_is_too_big() -> None:
    """Status keeps the figures; the CSV, warnings and per-shard load go to the ConfigMap
    only when the patch would not fit (a 30-point sweep by 64 runner pods)."""
    point = {"name": "c64", "value": 64.0, "state": "Succeeded", "ott": 1234.5,
             "replicas": 64, "warnings": ["foreign_traffic: " + "x" * 200],
             "shardLoad": [{"shard": i, "target": 1.0, "achieved": 0.98, "requests": 100,
                            "node": f"gpu-node-{i:02d}"} for i in range(64)]}
    small = {"points": [point], "summaryCSV": "a,b\n"}
    assert bounded_status(small, "cm") is small  # fits: untouched
    big = {"points": [dict(point, value=float(v)) for v in range(30)], "summaryCSV": "a" * 9000}
    out = bounded_status(big, "b-run-1")
    assert len(json.dumps(out)) <= MAX_STATUS_BYTES
    assert out["summaryCSV"].startswith("(too large for status: see ConfigMap b-run-1")
    assert all("shardLoad" not in p and p["ott"] == 1234.5 and p["replicas"] == 64
               for p in out["points"])
    assert "shardLoad" in big["points"][0]  # the caller's patch is not changed


def test_the_whole_status_history_included_stays_under_the_bound() -> None:
    """historyLimit 1000 with long messages: the whole status (what is stored, not just the
    patch) fits; the newest entries and the run just ended keep their words."""
    history = [dump(history_entry(
        run, "Succeeded", None, started="2026-12-01T00:00:00Z", finished="2026-12-01T01:00:00Z",
        valid=True, config_map=f"b-run-{run}", message=f"run {run} finished " + "m" * 200,
    )) for run in range(1, 1001)]
    current = {"run": 1000, "phase": "Running", "history": history[:-1],
               "summaryCSV": "a,b\n" * 2000}
    patch = {"phase": "Succeeded", "history": history}
    out = bounded_status(patch, "b-run-1000", current)
    whole = {**current, **out}
    assert len(json.dumps(whole, separators=(",", ":"))) <= MAX_STATUS_BYTES
    assert out["summaryCSV"].startswith("(too large for status: see ConfigMap b-run-1000")
    kept = out["history"]
    assert kept[-1] == history[-1]  # the run that just ended, message and all
    assert [h["run"] for h in kept] == list(range(1001 - len(kept), 1001))  # oldest go first
    assert len(kept) > 100
    assert patch["history"] is history and "message" in history[0]  # the caller's is untouched
    # a patch that does not touch history still bounds the stored whole
    small = bounded_status({"message": "x"}, "b-run-1000", {**current, "history": history})
    assert len(json.dumps({**current, **small}, separators=(",", ":"))) <= MAX_STATUS_BYTES
    assert "history" in small


def test_a_summary_csv_over_16_kib_stays_in_the_configmap_only() -> None:
    d = RunDigest(run=1, total=1, done=1)
    small = "Config Name,Concurrency\nc1,1\n"
    assert digest_patch(d, small)["summaryCSV"] == small
    exact = "x" * SUMMARY_CSV_LIMIT
    assert digest_patch(d, exact)["summaryCSV"] == exact
    big = digest_patch(d, "x" * (SUMMARY_CSV_LIMIT + 1))["summaryCSV"]
    assert big == SUMMARY_CSV_MOVED and "summary.csv" in big
