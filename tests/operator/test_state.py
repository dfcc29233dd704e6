"""The operator's one shared object: built from the command line's config at startup, kept in
kopf's memo, with its backoff and its per-benchmark locks."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kopf
import pytest
import yaml

from llmbench.operator import state
from llmbench.operator.build import DEFAULT_RUNNER_IMAGE
from llmbench.operator.state import (
    CONFIG_KEY,
    STATE_KEY,
    Operator,
    OperatorConfig,
    Queues,
    backoff,
)


def test_backoff_doubles_from_the_retry_delay_up_to_ten_times_it() -> None:
    assert [backoff(3.0, n) for n in range(6)] == [3.0, 6.0, 12.0, 24.0, 30.0, 30.0]
    assert [backoff(0.5, n) for n in range(5)] == [0.5, 1.0, 2.0, 4.0, 5.0]


def kubeconfig(tmp_path: Path) -> Path:
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
    }))
    return path


def operator(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **config: Any) -> Operator:
    monkeypatch.setenv("KUBECONFIG", str(kubeconfig(tmp_path)))
    memo = kopf.Memo({CONFIG_KEY: OperatorConfig(**config)})
    op = state.start(memo)
    assert CONFIG_KEY not in memo and memo[STATE_KEY] is op  # one object, the config inside
    return op


def test_the_startup_state_is_the_command_lines_config_shared_by_every_handler(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    offset = tmp_path / "offset"
    op = operator(tmp_path, monkeypatch, runner_image="img:2", namespaces=("gpu",),
                  retry_delay=0.5, clock_offset_file=str(offset))
    assert (op.config.runner_image, op.config.namespaces) == ("img:2", ("gpu",))
    assert op.kube.api.configuration.host == "https://127.0.0.1:1"
    assert op.clock.offset_file == str(offset)
    # kopf gives each object's handlers a shallow copy of the memo: the same Operator
    memo = kopf.Memo({STATE_KEY: op})
    assert state.of(kopf.Memo(memo)) is op
    # started by `kopf run` without llmbench's command line: the defaults
    default = state.start(kopf.Memo())
    assert default.config == OperatorConfig() and default.config.runner_image == (
        DEFAULT_RUNNER_IMAGE)


def test_a_handler_without_the_startup_state_says_so() -> None:
    with pytest.raises(RuntimeError, match="startup handler"):
        state.of(kopf.Memo())


def test_waits_back_off_per_benchmark_and_end_when_forgotten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    op = operator(tmp_path, monkeypatch, retry_delay=2.0)
    assert op.due("llm", "a", 0.0)  # never waited
    op.back_off("llm", "a", 100.0)
    assert not op.due("llm", "a", 101.9) and op.due("llm", "a", 102.0)
    op.back_off("llm", "a", 102.0)  # the second wait is twice as long
    assert not op.due("llm", "a", 105.9) and op.due("llm", "a", 106.0)
    assert op.due("llm", "b", 102.0)  # another benchmark does not wait
    op.forget("llm", "a")
    assert op.due("llm", "a", 102.0)
    op.back_off("llm", "a", 200.0)  # after forgetting, the backoff starts over
    assert op.due("llm", "a", 202.0)
    assert op.lock("llm", "a") is op.lock("llm", "a")
    assert op.lock("llm", "a") is not op.lock("llm", "b")


def test_the_watch_keeps_each_benchmarks_small_copy_until_it_is_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    op = operator(tmp_path, monkeypatch, retry_delay=2.0)
    body = {"metadata": {"namespace": "llm", "name": "a"}, "spec": {"schedule": "@daily"},
            "status": {"phase": "Pending", "history": [{"run": 1}]}}
    op.observe(body, None)  # the watch's initial listing
    assert op.benchmarks[("llm", "a")] == state.seen(body)
    op.observe({**body, "status": {"phase": "Queued"}}, "MODIFIED")
    assert op.benchmarks[("llm", "a")]["status"] == {"phase": "Queued"}
    op.back_off("llm", "a", 100.0)
    op.observe(body, "DELETED")
    assert ("llm", "a") not in op.benchmarks and op.due("llm", "a", 100.0)


def test_the_lease_duration_spans_four_resyncs_and_at_least_two_minutes() -> None:
    assert OperatorConfig(resync_interval=30).lease_duration == 120
    assert OperatorConfig(resync_interval=60).lease_duration == 240
    assert OperatorConfig(resync_interval=2).lease_duration == 120


LEASE = ("llm", "llmbench-target-1")
OTHER_LEASE = ("llm", "llmbench-target-2")


def test_a_queue_wakes_in_the_order_its_benchmarks_queued_and_keeps_their_places() -> None:
    q = Queues()
    q.join(("llm", "c"), LEASE, "llm/a", now=3.0, check_at=33.0)
    q.join(("llm", "b"), LEASE, "llm/a", now=2.0, check_at=32.0)
    q.join(("llm", "z"), OTHER_LEASE, "llm/y", now=1.0, check_at=31.0)
    assert q.queued(("llm", "b")) and q.queued(("llm", "c"))
    assert q.checks_due(31.9) == [(OTHER_LEASE, "llm/y")]
    assert q.checks_due(32.0) == [(LEASE, "llm/a"), (OTHER_LEASE, "llm/y")]  # the earliest look
    q.checked(LEASE, 62.0)
    assert q.checks_due(40.0) == [(OTHER_LEASE, "llm/y")]
    assert q.wake(LEASE) == [("llm", "b"), ("llm", "c")]  # first queued first
    assert not q.queued(("llm", "b")) and q.queued(("llm", "z"))  # the other Lease sleeps on
    assert q.checks_due(1e9) == [(OTHER_LEASE, "llm/y")]  # no look while its queue is awake
    # the woken try in turn, one group per Lease, first queued first; others alone
    assert q.turns([("llm", "c"), ("llm", "x"), ("llm", "b")]) == [
        [("llm", "b"), ("llm", "c")], [("llm", "x")]]
    # b took the Lease; c queues behind it again and keeps its place ahead of a newcomer
    q.leave(("llm", "b"))
    q.join(("llm", "d"), LEASE, "llm/b", now=10.0, check_at=40.0)
    q.join(("llm", "c"), LEASE, "llm/b", now=11.0, check_at=41.0)
    assert q.checks_due(40.0) == [(LEASE, "llm/b"), (OTHER_LEASE, "llm/y")]
    assert q.wake(LEASE) == [("llm", "c"), ("llm", "d")]
    # a holder deleted wakes the queues behind it, only those
    assert q.wake_holder("llm/y") == [("llm", "z")]
    assert q.wake_holder("llm/nobody") == []
    for key in (("llm", "c"), ("llm", "d"), ("llm", "z")):
        q.leave(key)
    assert q.checks_due(1e9) == []  # a Lease nobody waits for is not looked at


def test_a_queued_benchmark_is_not_due_until_woken_and_a_woken_one_that_failed_backs_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    op = operator(tmp_path, monkeypatch, retry_delay=2.0)
    op.back_off("llm", "b", 0.0)  # it waited for its target before
    op.queue_behind("llm", "b", LEASE, "llm/a", now=100.0, check_at=130.0)
    assert not op.due("llm", "b", 1e9)  # queued: however long, no try of its own
    op.queues.wake(LEASE)
    assert op.due("llm", "b", 100.0)  # woken: its old backoff is over too
    op.back_off("llm", "b", 100.0)  # the woken try raised
    assert not op.due("llm", "b", 101.9) and op.due("llm", "b", 102.0)
    op.forget("llm", "b")  # it runs
    assert not op.queues.queued(("llm", "b")) and op.queues.wake(LEASE) == []


def test_the_watch_wakes_the_queue_behind_a_deleted_holder_and_drops_what_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    op = operator(tmp_path, monkeypatch)
    holder = {"metadata": {"namespace": "llm", "name": "a"}, "status": {"phase": "Running"}}
    op.observe(holder, None)
    for name in ("b", "c"):
        op.queue_behind("llm", name, LEASE, "llm/a", now=1.0, check_at=31.0)
        op.observe({"metadata": {"namespace": "llm", "name": name},
                    "status": {"phase": "Pending"}}, "MODIFIED")  # an older event
    assert op.queues.queued(("llm", "b"))  # a Pending event does not take it out of the queue
    op.observe({"metadata": {"namespace": "llm", "name": "c"}, "status": {"phase": "Running"}},
               "MODIFIED")  # c runs (another operator's turn, a restart): out of the queue
    assert not op.queues.queued(("llm", "c")) and op.due("llm", "c", 0.0)
    op.observe(holder, "DELETED")  # the holder's Lease goes with it
    assert not op.queues.queued(("llm", "b")) and op.due("llm", "b", 0.0)
