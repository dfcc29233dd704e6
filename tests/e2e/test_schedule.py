"""Scheduled benchmarks on the project's cluster: ticks, suspend, and one catch-up run after
the operator was down across many ticks. The operator's clock is moved forward through a file
(``--clock-offset-file``) instead of waiting minutes: the chart's operator pod gets that flag
and the file's folder as a read-only hostPath volume (every node runs on this machine)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.release import OPERATOR_NS, Release, operator_values
from tests.e2e.test_operator import (
    Target,
    benchmark,
    diag,
    status,
)

pytestmark = pytest.mark.e2e


class ClockedOperator(Release):
    """The chart's operator with a clock the test moves (``shift``), stopped and started by
    scaling its Deployment (an outage of the operator, not of the cluster)."""

    def __init__(self, k8s: Any, clock_dir: Path) -> None:
        super().__init__(k8s, "clocked", OPERATOR_NS)
        clock_dir.mkdir(parents=True, exist_ok=True)
        clock_dir.chmod(0o755)  # read by the operator's uid 65532
        self.clock_dir = clock_dir
        self.clock = clock_dir / "offset"
        self.shift(0)

    def run(self) -> None:
        """Installs the chart, then adds the clock: a hostPath volume and the flag."""
        if self.k8s.get("namespace", OPERATOR_NS) is None:
            self.k8s.kubectl("create", "namespace", OPERATOR_NS)
        self.install(**operator_values(self.k8s))
        self.ready()
        self.patch_pod([
            {"op": "add", "path": "/spec/template/spec/volumes/-",
             "value": {"name": "clock", "hostPath": {"path": str(self.clock_dir),
                                                     "type": "Directory"}}},
            {"op": "add", "path": "/spec/template/spec/containers/0/volumeMounts/-",
             "value": {"name": "clock", "mountPath": "/clock", "readOnly": True}},
            {"op": "add", "path": "/spec/template/spec/containers/0/args/-",
             "value": "--clock-offset-file=/clock/offset"},
        ])

    def shift(self, seconds: float) -> None:
        """The operator's clock ``seconds`` ahead (written whole: renamed into place)."""
        tmp = self.clock_dir / ".offset.tmp"
        tmp.write_text(str(seconds))
        tmp.chmod(0o644)
        tmp.rename(self.clock)

    def scale(self, replicas: int) -> None:
        self.k8s.kubectl("scale", "deployment", self.fullname, "-n", self.namespace,
                         f"--replicas={replicas}")
        if replicas:
            self.ready()
        else:
            self.k8s.wait_for("the operator pod to be gone",
                              lambda: not self.k8s.pods(self.namespace, self.selector), 60,
                              diag=self.diag)

    def stop(self) -> None:
        self.scale(0)

    def start(self) -> None:
        self.scale(1)


@pytest.fixture
def clocked(crd_installed: Any, tmp_path: Path) -> Iterator[ClockedOperator]:
    op = ClockedOperator(crd_installed, tmp_path / "clock")
    try:
        op.run()
        yield op
    finally:
        op.uninstall()


#: Runs a test may start for one valid measurement: on this 2-core machine, loaded by the whole
#: cluster, the runner's event loop can wake late often enough that the run is honestly marked
#: invalid (client_lag; the sim's ITL is 1 ms), and an invalid run is never judged nor a
#: baseline. Three tries were not enough in CI (three invalid runs in a row, lag p90 2.1 ms).
VALID_TRIES = 6


def finished_run(k8s: Any, namespace: str, name: str, op: Release, run: int) -> dict[str, Any]:
    return dict(k8s.wait_for(
        f"{name} run {run} to finish",
        lambda: (s := status(k8s, namespace, name)).get("run") == run
        and s.get("phase") in ("Succeeded", "Failed") and s,
        120, interval=0.3, diag=diag(k8s, namespace, op),
    ))


def stays_at(k8s: Any, namespace: str, name: str, run: int, seconds: float = 4.0) -> None:
    """No new run for a few seconds (the operator looks at schedules every second)."""
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
    ref = target.ref
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
