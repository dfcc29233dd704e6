"""Nightly regression verdicts on the project's cluster: scheduled runs of one benchmark while
the simulator behind it is redeployed slower, and a run spoiled by someone else's traffic.

The schedule's ticks come from the operator's test clock (``ClockedOperator``), so five
nightly runs take about a minute."""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from typing import Any

import pytest

from tests.e2e.test_operator import (
    Target,
    benchmark,
    cond,
    roll_out_sim,
)
from tests.e2e.test_schedule import VALID_TRIES, ClockedOperator, clocked, finished_run

pytestmark = pytest.mark.e2e
__all__ = ["clocked"]  # the fixture, used by name

NAME = "nightly"
TICK_S = 6 * 60  # the schedule is */5: each shift of the clock passes one tick


def redeploy(k8s: Any, target: Target, ttft: str) -> None:
    """The simulator rolled out with another time to first token (a 'deploy' of the model
    server), old pod gone before the new one serves (Recreate)."""
    roll_out_sim(k8s, target, ttft, 90, strategy={"type": "Recreate"})


class ForeignTraffic:
    """Someone else's requests to the same server while our run measures (bounded: it stops
    when told, or after 120 s)."""

    def __init__(self, url: str, streams: int = 3) -> None:
        self.url, self.stop, self.sent = url, threading.Event(), 0
        self.threads = [threading.Thread(target=self._loop, daemon=True) for _ in range(streams)]

    def _loop(self) -> None:
        body = json.dumps({"model": "e2e-model", "max_tokens": 4,
                           "messages": [{"role": "user", "content": "hello"}]}).encode()
        deadline = time.monotonic() + 120
        while not self.stop.is_set() and time.monotonic() < deadline:
            req = urllib.request.Request(f"{self.url}/v1/chat/completions", data=body,
                                         headers={"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=10) as resp:
                    resp.read()
                self.sent += 1
            except OSError:
                time.sleep(0.05)

    def __enter__(self) -> ForeignTraffic:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)


def regressed(st: dict[str, Any]) -> tuple[str, str, str]:
    c = cond(st, "Regressed")
    return c.get("status", ""), c.get("reason", ""), c.get("message", "")


def valid_run(k8s: Any, namespace: str, clocked: ClockedOperator, run: int
              ) -> tuple[dict[str, Any], int]:
    """Run ``run`` (its tick: the clock ``run - 1`` ticks on), or the next one while a run's
    measurement is invalid, at most ``VALID_TRIES``: on this shared machine the runner's loop
    lag can mark a run invalid, and an invalid run is never judged nor a baseline (asserted
    below with foreign traffic), so the verdicts under test need valid runs."""
    for n in range(run, run + VALID_TRIES):
        if n > 1:
            clocked.shift((n - 1) * TICK_S)
        st = finished_run(k8s, namespace, NAME, clocked, n)
        if cond(st, "MeasurementValid")["status"] == "True":
            return st, n
    raise AssertionError(
        f"runs {run}-{run + VALID_TRIES - 1} all invalid: {cond(st, 'MeasurementValid')}")


def test_a_slower_deploy_is_a_regression_and_foreign_traffic_is_never_judged(
    k8s: Any, namespace: str, clocked: ClockedOperator
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    spec: dict[str, Any] = {
        "telemetry": {"dcgm": "off", "serverMetrics": "auto"},
        "sweep": {"type": "concurrency", "values": [1, 2]},
        "load": {"requestCount": 8, "warmupRequestCount": 0},
        "schedule": "*/5 * * * *",
        # only a several-fold slowdown counts: this shared machine's noise must not
        "baseline": {"tolerances": {"ttftP99": "+200%"}},
    }
    ref = target.ref
    k8s.apply(benchmark(NAME, namespace, ref, **spec))

    st, first = valid_run(k8s, namespace, clocked, 1)
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    assert regressed(st)[:2] == ("Unknown", "NoBaseline")  # a first run has nothing to beat

    st, good = valid_run(k8s, namespace, clocked, first + 1)
    status_, reason, message = regressed(st)
    assert (status_, reason) == ("False", "WithinTolerance"), message
    assert f"within tolerance of run {first}" in message
    assert st["history"][-1]["regressed"] is False

    redeploy(k8s, target, "80ms")  # the 'deploy' that makes the model slower
    st, slow = valid_run(k8s, namespace, clocked, good + 1)
    status_, reason, message = regressed(st)
    assert (status_, reason) == ("True", "Regressed"), message
    assert f"against run {good}" in message and "ttft_p99" in message
    assert f"since run {good}: target args: --time-to-first-token 10ms -> 80ms" in message
    rows = st["regression"]["rows"]
    assert {r["metric"] for r in rows} == {"ttft_p99"} and len(rows) == 2  # both points
    assert all(r["value"] > 3 * r["baseline"] for r in rows)
    assert st["history"][-1]["regressed"] is True
    events = k8s.kubectl("get", "events", "-n", namespace, "--field-selector",
                         "reason=Regressed", "-o", "json").stdout
    (event,) = json.loads(events)["items"]
    assert event["type"] == "Warning" and "ttft_p99" in event["message"]

    clocked.shift(slow * TICK_S)
    with ForeignTraffic(target.host_url) as foreign:  # through the ClusterIP
        st = finished_run(k8s, namespace, NAME, clocked, slow + 1)
    assert foreign.sent > 0
    assert cond(st, "MeasurementValid")["status"] == "False", cond(st, "MeasurementValid")
    status_, reason, message = regressed(st)
    assert (status_, reason) == ("Unknown", "InvalidMeasurement"), message
    assert st["history"][-1]["valid"] is False and "regressed" not in st["history"][-1]
    assert "regression" not in st  # the verdict of a run not judged is not shown

    st, _ = valid_run(k8s, namespace, clocked, slow + 2)  # still slow: still flagged,
    status_, reason, message = regressed(st)               # against the last good run
    assert (status_, reason) == ("True", "Regressed"), message
    assert f"against run {good}" in message  # not the regressed run nor the invalid one
