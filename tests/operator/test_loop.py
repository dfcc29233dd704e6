"""The operator-level loop: what it does for each benchmark, from the watch's small copy."""

from __future__ import annotations

from llmbench.operator.loop import due_work
from llmbench.operator.state import seen


def bench(spec: dict[str, object], phase: str | None) -> dict[str, object]:
    return seen({"metadata": {"namespace": "llm", "name": "b"}, "spec": spec,
                 "status": {"phase": phase} if phase else {}})


def test_scheduled_benchmarks_tick_waiting_ones_retry_running_ones_are_resynced() -> None:
    cron = {"schedule": "*/5 * * * *"}
    assert due_work(bench(cron, "Succeeded"), resync=False) == ("tick",)
    assert due_work(bench({**cron, "suspend": True}, "Succeeded"), resync=True) == ()
    assert due_work(bench(cron, "Pending"), resync=False) == ("tick", "retry")
    assert due_work(bench({}, "Queued"), resync=True) == ("retry",)
    assert due_work(bench({}, "Running"), resync=False) == ()
    assert due_work(bench({}, "Running"), resync=True) == ("check",)
    assert due_work(bench({}, "Failed"), resync=True) == ()
    assert due_work(bench({}, None), resync=True) == ()  # not seen by reconcile yet


def test_the_loops_copy_keeps_only_what_it_decides_from() -> None:
    body = {
        "metadata": {"namespace": "llm", "name": "b", "creationTimestamp": "t0",
                     "managedFields": [{"big": "x" * 1000}]},
        "spec": {"schedule": "@hourly", "timeZone": "UTC", "target": {"url": "http://x"}},
        "status": {"phase": "Running", "run": 3, "lastScheduleTime": "t1",
                   "history": [{"run": 1}] * 100, "points": [{}] * 100},
    }
    assert seen(body) == {
        "metadata": {"namespace": "llm", "name": "b", "creationTimestamp": "t0"},
        "spec": {"schedule": "@hourly", "timeZone": "UTC"},
        "status": {"phase": "Running", "run": 3, "lastScheduleTime": "t1"},
    }
