"""``spec.trigger.onTargetChange``: the target's digest and what a look at it does."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from llmbench.api.status import StackStatus
from llmbench.operator.loop import due_work
from llmbench.operator.reconcile import target_cause, tick_cause, tick_decision
from llmbench.operator.state import seen
from llmbench.operator.trigger import stack_digest, target_decision, target_digest

SHA_A = "docker.io/library/sim@sha256:" + "a" * 64
SHA_B = "docker.io/library/sim@sha256:" + "b" * 64


def pod(name: str, image_id: str = SHA_A, args: list[str] | None = None,
        image: str = "sim:1") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "vllm", "image": image,
                                 "args": ["--model", "m"] if args is None else args}]},
        "status": {"phase": "Running", "containerStatuses": [{"imageID": image_id}]},
    }


def test_the_digest_is_what_every_ready_pod_agrees_on() -> None:
    one = target_digest([pod("a"), pod("b")])
    assert one is not None and len(one) == 16
    assert target_digest([pod("b"), pod("a")]) == one  # which pods, and their order, do not count
    assert target_digest([pod("c")]) == one
    assert target_digest([]) is None
    assert target_digest([pod("a"), pod("b", image_id=SHA_B)]) is None  # a rollout in progress
    assert target_digest([pod("a", image_id=SHA_B)]) not in (None, one)  # a tag rebuilt
    assert target_digest([pod("a", args=["--model", "m", "--max-num-seqs", "8"])]) not in (
        None, one)
    # the snapshot's own redaction applies first: a rotated token is not a new stack
    t1 = target_digest([pod("a", args=["--api-key", "s3cret"])])
    assert t1 == target_digest([pod("a", args=["--api-key", "0ther"])])
    # an image ID not known yet: the image name stands in
    assert stack_digest(StackStatus(target_pods=["a"], target_image="sim:1")) != stack_digest(
        StackStatus(target_pods=["a"], target_image="sim:2"))
    assert stack_digest(StackStatus()) is None


@pytest.mark.parametrize(
    ("recorded", "observed", "action"),
    [
        (None, None, "none"),  # nothing settled to look at
        ("d1", None, "none"),
        (None, "d1", "record"),  # the first look records, no run
        ("d1", "d1", "none"),
        ("d1", "d2", "start"),
    ],
)
def test_what_a_look_at_the_target_does(
    recorded: str | None, observed: str | None, action: str
) -> None:
    assert target_decision(recorded, observed) == action


def test_a_target_change_follows_the_schedules_concurrency_policy() -> None:
    cause = target_cause("d2", "target image sim:1 -> sim:2")
    assert cause.start == "the target changed: target image sim:1 -> sim:2"
    assert cause.fields == {"targetDigest": "d2"}
    # Forbid: it waits for the run in progress and is not recorded as handled, so it runs after
    assert tick_decision("ensure", None) == "skip" and cause.skip_fields == {}
    assert cause.skipped.format(run=4).startswith(
        "the target changed (target image sim:1 -> sim:2); run 4 is still in progress")
    assert tick_decision("wait", "Replace") == "replace"
    assert cause.replacing == "the run for the target change (target image sim:1 -> sim:2)"
    assert tick_decision("done", None) == "start"
    tick = tick_cause({}, datetime(2026, 12, 1, 2, tzinfo=UTC))
    assert tick.skip_fields["lastScheduleTime"] == "2026-12-01T02:00:00Z"


def test_the_loop_looks_at_the_target_each_resync_unless_suspended() -> None:
    def bench(spec: dict[str, Any], phase: str | None = "Succeeded") -> dict[str, Any]:
        return seen({"metadata": {"namespace": "llm", "name": "b"}, "spec": spec,
                     "status": {"phase": phase}})
    on = {"trigger": {"onTargetChange": True}, "target": {"service": {"name": "s", "port": 1}}}
    assert due_work(bench(on), resync=True) == ("target",)
    assert due_work(bench(on), resync=False) == ()
    assert due_work(bench(on, "Running"), resync=True) == ("check", "target")
    assert due_work(bench({**on, "suspend": True}), resync=True) == ()
    assert due_work(bench({"trigger": {"onTargetChange": False}}), resync=True) == ()
