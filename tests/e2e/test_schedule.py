"""Scheduled benchmarks on the real control plane: ticks, suspend, and one catch-up run after
the operator was down across many ticks. The operator's clock is moved forward through a file
(``--clock-offset-file``) instead of waiting minutes."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.test_operator import (
    OPERATOR_NS,
    RBAC_FILE,
    Operator,
    Target,
    benchmark,
    diag,
    sa_kubeconfig,
    status,
)

pytestmark = pytest.mark.e2e


class ClockedOperator(Operator):
    """The operator with a clock the test moves (``shift``)."""

    def __init__(self, kubeconfig: Path, log: Path, clock: Path) -> None:
        super().__init__(kubeconfig, log)
        self.clock = clock

    def extra_args(self) -> list[str]:
        return ["--metrics-port", "0", "--clock-offset-file", str(self.clock)]

    def shift(self, seconds: float) -> None:
        self.clock.write_text(str(seconds))


@pytest.fixture
def clocked(crd_installed: Any, tmp_path: Path) -> Iterator[ClockedOperator]:
    k8s = crd_installed
    if k8s.get("namespace", OPERATOR_NS) is None:
        k8s.kubectl("create", "namespace", OPERATOR_NS)
    k8s.kubectl("apply", "-f", str(RBAC_FILE))
    k8s.wait_for("the operator ServiceAccount",
                 lambda: k8s.get("serviceaccount", "llmbench-operator", OPERATOR_NS), 30)
    clock = tmp_path / "clock"
    clock.write_text("0")
    op = ClockedOperator(sa_kubeconfig(k8s, OPERATOR_NS, "llmbench-operator",
                                       tmp_path / "kubeconfig"), tmp_path / "operator.log", clock)
    op.start()
    try:
        yield op
    finally:
        op.stop()


def finished_run(k8s: Any, namespace: str, name: str, op: Operator, run: int) -> dict[str, Any]:
    return dict(k8s.wait_for(
        f"{name} run {run} to finish",
        lambda: (s := status(k8s, namespace, name)).get("run") == run
        and s.get("phase") in ("Succeeded", "Failed") and s,
        120, interval=0.3, diag=diag(k8s, namespace, op),
    ))


def stays_at(k8s: Any, namespace: str, name: str, run: int, seconds: float = 4.0) -> None:
    """No new run for a few seconds (the schedule timer ticks every second)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert status(k8s, namespace, name).get("run") == run
        time.sleep(0.5)


def test_ticks_run_suspend_pauses_and_an_outage_costs_one_catch_up_run(
    k8s: Any, namespace: str, clocked: ClockedOperator
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    spec: dict[str, Any] = {"telemetry": {"dcgm": "off", "serverMetrics": "off"},
                            "sweep": {"type": "concurrency", "values": [1]},
                            "load": {"requestCount": 4, "warmupRequestCount": 0},
                            "schedule": "*/5 * * * *"}
    ref = {"url": target.url, "podSelector": {"matchLabels": target.labels}}
    k8s.apply(benchmark("nightly", namespace, ref, **spec))
    st = finished_run(k8s, namespace, "nightly", clocked, 1)  # a new benchmark runs at once
    assert st["phase"] == "Succeeded" and st.get("nextRunTime")
    stays_at(k8s, namespace, "nightly", 1, 2)

    clocked.shift(6 * 60)  # a tick has passed
    st = finished_run(k8s, namespace, "nightly", clocked, 2)
    assert st["phase"] == "Succeeded" and st["lastScheduleTime"]
    assert "scheduled run" in json.dumps(st["history"]) or st["run"] == 2
    assert [h["run"] for h in st["history"]] == [1, 2]

    k8s.apply(benchmark("nightly", namespace, ref, **{**spec, "suspend": True}))
    k8s.wait_for("the suspend to be observed",
                 lambda: status(k8s, namespace, "nightly").get("observedGeneration") == 2, 30)
    assert "nextRunTime" not in status(k8s, namespace, "nightly")
    clocked.shift(30 * 60)  # several ticks, suspended: nothing runs, and no run for the edit
    stays_at(k8s, namespace, "nightly", 2)

    k8s.apply(benchmark("nightly", namespace, ref, **spec))  # resumed: one catch-up run
    st = finished_run(k8s, namespace, "nightly", clocked, 3)
    assert st["phase"] == "Succeeded"
    stays_at(k8s, namespace, "nightly", 3, 3)

    clocked.stop()
    clocked.shift(3 * 3600)  # the operator misses 30 ticks
    clocked.start()
    st = finished_run(k8s, namespace, "nightly", clocked, 4)
    stays_at(k8s, namespace, "nightly", 4, 4)  # one catch-up run, not 30
    jobs = k8s.kubectl("get", "jobs", "-n", namespace, "-o", "name").stdout.split()
    assert len(jobs) == 4
