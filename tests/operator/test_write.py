"""The Events the operator posts itself: their source, type and bounded message."""

from __future__ import annotations

from datetime import UTC, datetime

from llmbench.operator.write import MAX_EVENT_MESSAGE, event_object
from tests.operator.test_build import BENCH

AT = datetime(2026, 12, 1, 3, 4, 5, tzinfo=UTC)


def test_an_event_names_the_operator_as_its_source_and_the_benchmark_as_its_object() -> None:
    ev = event_object(BENCH, "TargetNotReady", "Service vllm missing", True, AT, "op-pod-1")
    assert ev["type"] == "Warning" and ev["reason"] == "TargetNotReady"
    assert ev["source"] == {"component": "llmbench-operator", "host": "op-pod-1"}
    assert (ev["reportingComponent"], ev["reportingInstance"]) == ("llmbench-operator", "op-pod-1")
    meta = BENCH["metadata"]
    assert ev["metadata"] == {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]}
    assert ev["involvedObject"]["kind"] == "LLMBenchmark"
    assert ev["involvedObject"]["name"] == meta["name"]
    assert ev["firstTimestamp"] == ev["lastTimestamp"] == "2026-12-01T03:04:05Z"
    assert event_object(BENCH, "JobCreated", "x", False, AT, "p")["type"] == "Normal"


def test_a_long_message_is_cut_to_the_event_limit() -> None:
    ev = event_object(BENCH, "RunFailed", "y" * 5000, True, AT, "p")
    assert len(ev["message"]) == MAX_EVENT_MESSAGE and ev["message"].endswith("…")
