"""A run in progress: which events still apply, the digest as status, the runner pods' patch."""

from __future__ import annotations

from typing import Any

from llmbench.api.status import BenchmarkStatus, CurrentPoint, PointStatus, RunDigest
from llmbench.operator.build import INDEX_ANNOTATION, REPLICAS_ANNOTATION
from llmbench.operator.progress import (
    digest_status,
    live_point,
    progress_text,
    replicas_of,
    runner_patch,
    running,
)

RUNNING: dict[str, Any] = {
    "run": 2, "phase": "Running", "observedGeneration": 4, "job": "b-run-2",
    "stack": {"targetPods": ["vllm-0"], "runnerNode": "gpu-a", "runnerImage": "img:1"},
}


def status(**kw: Any) -> BenchmarkStatus:
    return BenchmarkStatus.model_validate({**RUNNING, **kw})


def pod(node: str | None, phase: str = "Running", index: int | None = None,
        scheduled: str = "True", image: str = "img:1") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"b-run-2-{index or 0}", "creationTimestamp": "T"}
    if index is not None:
        meta["annotations"] = {INDEX_ANNOTATION: str(index), REPLICAS_ANNOTATION: "2"}
    spec: dict[str, Any] = {"containers": [{"name": "runner", "image": image}]}
    if node:
        spec["nodeName"] = node
    return {"metadata": meta, "spec": spec, "status": {"phase": phase, "conditions": [
        {"type": "PodScheduled", "status": scheduled, "reason": "Unschedulable",
         "message": "0/3 nodes are available"}]}}


def test_events_apply_only_to_the_current_running_run() -> None:
    assert running(status(), 2)
    assert not running(status(), 1)  # a late event of the previous run
    for phase in ("Pending", "Queued", "Succeeded", "Failed"):
        assert not running(status(phase=phase), 2), phase


def test_the_digest_becomes_progress_figures_and_measurement_valid() -> None:
    d = RunDigest(run=2, total=4, done=1, valid=True, points=[PointStatus(
        name="c1", value=1, state="Succeeded", ott=123.456)])
    patch = digest_status(status(), d, "csv")
    assert patch.fields["progress"] == "1/4" and patch.fields["points"][0]["ott"] == 123.46
    assert patch.fields["summaryCSV"] == "csv"
    (valid,) = patch.conditions
    assert (valid.type, valid.status, valid.observed_generation) == ("MeasurementValid", "True", 4)
    before_any_point = digest_status(status(), RunDigest(run=2, total=4), None)
    assert before_any_point.fields["progress"] == "0/4" and not before_any_point.conditions


def under_way(number: int, percent: float | None = 41.0) -> CurrentPoint:
    return CurrentPoint(name=f"c{number}", value=number, number=number, total=6,
                        requests_done=82, requests_target=200, percent=percent,
                        started="2026-12-02T03:00:00Z", updated="2026-12-02T03:00:20Z",
                        point_eta="2026-12-02T03:00:49Z", sweep_eta="2026-12-02T03:02:00Z")


def test_the_point_under_way_is_progress_and_current_point() -> None:
    d = RunDigest(run=2, total=6, done=3, valid=True, points=[
        PointStatus(name=f"c{i}", value=i, state="Succeeded") for i in (1, 2, 3)])
    patch = digest_status(status(), d, None, under_way(4))
    assert patch.fields["progress"] == "3/6 41%"
    cp = patch.fields["currentPoint"]
    assert (cp["number"], cp["requestsDone"], cp["requestsTarget"]) == (4, 82, 200)
    assert cp["pointEta"] == "2026-12-02T03:00:49Z" and cp["sweepEta"]
    # the record of a point the digest already counts is stale: no point under way
    stale = digest_status(status(), d, None, under_way(3))
    assert stale.fields["progress"] == "3/6" and stale.fields["currentPoint"] is None
    # before the first point ended there is no digest: the record alone says it
    first = digest_status(status(), None, None, under_way(1, 12.4))
    assert first.fields["progress"] == "0/6 12%" and "points" not in first.fields
    assert not first.conditions
    assert progress_text(3, 6, under_way(4, None)) == "3/6"  # no target: no percentage
    assert live_point(None, None) is None


def test_replicas_from_the_pods_annotation() -> None:
    assert replicas_of(pod("gpu-a")) == 1
    assert replicas_of(pod("gpu-a", index=1)) == 2
    broken = pod("gpu-a")
    broken["metadata"]["annotations"] = {REPLICAS_ANNOTATION: "two"}
    assert replicas_of(broken) == 1


def test_one_runner_pod_writes_only_what_changed() -> None:
    have = status(conditions=[
        {"type": "RunnerScheduled", "status": "True", "reason": "Scheduled",
         "message": "on node gpu-a"},
        {"type": "Running", "status": "True", "reason": "RunnerRunning",
         "message": "the sweep is running"},
    ])
    same = runner_patch(have, pod("gpu-a"), [], 1)
    assert not same.fields and not same.conditions  # nothing to write
    moved = runner_patch(have, pod("gpu-b", image="img:2"), [], 1)
    assert moved.fields["stack"]["runnerNode"] == "gpu-b"
    assert moved.fields["stack"]["runnerImage"] == "img:2"
    assert moved.fields["stack"]["targetPods"] == ["vllm-0"]  # the rest of the stack stays
    assert [(c.type, c.message) for c in moved.conditions] == [
        ("RunnerScheduled", "on node gpu-b")]
    stuck = runner_patch(status(), pod(None, phase="Pending", scheduled="False"), [], 1)
    assert not stuck.fields
    assert [(c.type, c.status, c.reason) for c in stuck.conditions] == [
        ("RunnerScheduled", "False", "Unschedulable")]


def test_several_runner_pods_are_judged_together() -> None:
    pods = [pod("gpu-a", index=0), pod(None, phase="Pending", index=1, scheduled="False")]
    patch = runner_patch(status(), pods[0], pods, 2)
    assert patch.fields["stack"]["runnerNodes"] == ["gpu-a", ""]
    conds = {c.type: c for c in patch.conditions}
    assert conds["RunnerScheduled"].status == "False"
    assert conds["RunnerScheduled"].message.startswith("1/2 runner pods scheduled (on gpu-a)")
    assert "1/2 runner pods running" in conds["Running"].message
    both = [pod("gpu-a", index=0), pod("gpu-b", index=1)]
    done = runner_patch(status(stack={**RUNNING["stack"], "runnerNodes": ["gpu-a", "gpu-b"]}),
                        both[1], both, 2)
    assert "stack" not in done.fields  # the nodes did not move
    assert {c.type: c.status for c in done.conditions} == {
        "RunnerScheduled": "True", "Running": "True"}
