"""Prometheus gauges of each benchmark's last finished valid run, served on ``/metrics``.

:func:`gauges` is pure: one ``LLMBenchmark`` object (as the API server returns it) in, its
samples out. :func:`record` (the kopf event handler's body, in :mod:`.handlers`) keeps them in
an in-memory map keyed by (namespace, name), updated from every watch event's body and emptied
on ``DELETED``, and :class:`BenchmarkCollector` renders that map at each scrape: a deleted
benchmark's series disappear, no API call is made (the operator's RBAC is unchanged), and a
restarted operator refills the map from its initial listing.

Labels are exactly ``benchmark_namespace``, ``benchmark`` and ``model`` (``spec.target.model``),
plus ``phase`` on ``llmbench_phase`` (one series per phase, kube-state-metrics style),
``currency`` on the cost gauge (``spec.cost.currency``: a price has a unit the name cannot carry)
and ``result`` on ``llmbench_runs_total``: a bounded number of series per benchmark, no
per-point or per-run label. The benchmark's namespace is not called ``namespace``: Prometheus
(a ServiceMonitor or kubernetes_sd relabelling) adds ``namespace``, ``pod`` and ``service`` of
the scraped operator pod, and the two would clash (``exported_namespace`` without
``honorLabels``, the operator's namespace in every alert); ``job``, ``instance``, ``pod``,
``service``, ``endpoint`` and ``container`` are left to Prometheus too.

``llmbench_runs_total{result}`` counts the runs this operator process saw finish:
``succeeded`` (a valid measurement), ``invalid`` (finished, but ``MeasurementValid`` is not
True) and ``failed``. A counter starts at 0 with the process (Prometheus' ``rate``/``increase``
handle the reset): the run a benchmark already shows when the operator first sees it is its
baseline, not a new run, so a restart never counts a run twice; a replayed event of the same run
counts once.

Which run the result gauges describe: the current status when it is a finished run
(``phase: Succeeded``) whose ``MeasurementValid`` condition is True, with every gauge; else
(a run under way, a failed or invalid last run) the newest ``status.history`` entry that
succeeded with a valid measurement, which carries max OTT under SLO only, so only that gauge
(and ``llmbench_result_run``) is shown. Energy per output token is the knee point's (GPU
energy over its measurement window / output tokens, from dcgm-exporter; absent without GPU
telemetry).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from llmbench.api.spec import Cost
from llmbench.api.status import PHASES

__all__ = [
    "EXTRA_LABELS",
    "HELP",
    "LABELS",
    "METRICS",
    "REGISTRY",
    "RESULTS",
    "BenchmarkCollector",
    "MetricsConfig",
    "Sample",
    "finished_run",
    "forget",
    "gauges",
    "labels",
    "observe",
    "record",
    "serve_metrics",
    "start_metrics",
    "stop_metrics",
]

log = logging.getLogger("llmbench.operator")

#: The labels of every series (the benchmark's), before a metric's own (:data:`EXTRA_LABELS`).
LABELS = ("benchmark_namespace", "benchmark", "model")

#: The outcomes ``llmbench_runs_total`` counts (its ``result`` label), each exported from 0.
RESULTS = ("succeeded", "invalid", "failed")

#: Every metric this module exports, with its HELP text (gauges; ``_total``: the counter).
HELP: dict[str, str] = {
    "llmbench_max_ott_under_slo_tokens_per_second": (
        "Output token throughput of the highest-throughput point meeting every SLO, last "
        "finished valid run."
    ),
    "llmbench_ttft_p99_at_knee_seconds": "p99 time to first token at the knee point.",
    "llmbench_itl_p99_at_knee_seconds": "p99 inter-token latency at the knee point.",
    "llmbench_joules_per_output_token": (
        "GPU energy per output token at the knee point (the target's GPUs, dcgm-exporter)."
    ),
    "llmbench_cost_per_million_output_tokens": (
        "spec.cost.pricePerHour / (max OTT under SLO x 3600) x 1e6, in the currency label "
        "(spec.cost.currency)."
    ),
    "llmbench_result_run": "Run number the result gauges of this benchmark describe.",
    "llmbench_regressed": "1 if the Regressed condition is True, 0 if False; absent otherwise.",
    "llmbench_last_run_timestamp_seconds": "When the last run finished (status.lastRunTime).",
    "llmbench_last_run_duration_seconds": "Duration of the last finished run (start to finish).",
    "llmbench_scheduled": "1 if spec.schedule is set and spec.suspend is not true, else 0.",
    "llmbench_phase": "1 for the benchmark's current status.phase, 0 for the others.",
    "llmbench_runs_total": (
        "Runs this operator saw finish, by result: succeeded (valid), invalid (finished, "
        "measurement not valid), failed."
    ),
}

#: The labels a metric has after :data:`LABELS`.
EXTRA_LABELS: dict[str, tuple[str, ...]] = {
    "llmbench_phase": ("phase",),
    "llmbench_cost_per_million_output_tokens": ("currency",),
    "llmbench_runs_total": ("result",),
}


class Sample(NamedTuple):
    """One value: metric name, labels (:data:`LABELS`, then the metric's :data:`EXTRA_LABELS`)."""

    name: str
    labels: dict[str, str]
    value: float


def _time(text: Any) -> float | None:
    """RFC 3339 (``2026-12-01T11:47:21Z``) to unix seconds; None when absent or unreadable."""
    if not isinstance(text, str) or not text:
        return None
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when.timestamp() if when.tzinfo is not None else None


def _number(value: Any) -> float | None:
    """A finite float from a status field (bool and non-numbers are not figures)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    out = float(value)
    return out if math.isfinite(out) else None


def _condition(status: Mapping[str, Any], type_: str) -> str | None:
    for c in status.get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == type_:
            return str(c.get("status"))
    return None


def _knee_point(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The succeeded point whose swept value equals ``status.knee.value`` (both rounded alike)."""
    knee = status.get("knee") or {}
    value = _number(knee.get("value"))
    if not knee.get("reached") or value is None:
        return None
    for p in status.get("points") or []:
        v = _number(p.get("value"))
        if p.get("state") == "Succeeded" and v is not None and math.isclose(v, value):
            return dict(p)
    return None


def labels(body: Mapping[str, Any]) -> dict[str, str]:
    """The :data:`LABELS` of one ``LLMBenchmark`` object."""
    meta = body.get("metadata") or {}
    model = ((body.get("spec") or {}).get("target") or {}).get("model")
    return {
        "benchmark_namespace": str(meta.get("namespace") or ""),
        "benchmark": str(meta.get("name") or ""),
        "model": model if isinstance(model, str) else "",
    }


def finished_run(body: Mapping[str, Any]) -> tuple[int, str] | None:
    """``(run number, result)`` when the status shows a finished run, else None.

    The result is one of :data:`RESULTS`: ``failed`` for a Failed run, ``succeeded`` for a
    Succeeded one whose ``MeasurementValid`` condition is True, ``invalid`` for the other
    Succeeded ones (the same rule that keeps an invalid run out of the result gauges).
    """
    status = body.get("status") or {}
    run = _number(status.get("run"))
    phase = status.get("phase")
    if run is None or phase not in ("Succeeded", "Failed"):
        return None
    if phase == "Failed":
        return int(run), "failed"
    valid = _condition(status, "MeasurementValid") == "True"
    return int(run), "succeeded" if valid else "invalid"


def gauges(body: Mapping[str, Any]) -> list[Sample]:
    """The gauge samples of one ``LLMBenchmark`` object (see the module docstring)."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    status = body.get("status") or {}
    base = labels(body)
    out: list[Sample] = []

    def add(name: str, value: float | None, **extra: str) -> None:
        if value is not None:
            out.append(Sample(name, {**base, **extra}, value))

    phase = status.get("phase")
    finished = phase in ("Succeeded", "Failed")
    if phase == "Succeeded" and _condition(status, "MeasurementValid") == "True":
        add("llmbench_result_run", _number(status.get("run")))
        best = status.get("maxUnderSLO") or {}
        ott = _number(best.get("ott"))
        add("llmbench_max_ott_under_slo_tokens_per_second", ott)
        knee = _knee_point(status)
        if knee is not None:
            for metric, key in (("ttft", "ttftP99Ms"), ("itl", "itlP99Ms")):
                ms = _number(knee.get(key))
                add(f"llmbench_{metric}_p99_at_knee_seconds", None if ms is None else ms / 1e3)
            add("llmbench_joules_per_output_token", _number(knee.get("joulesPerOutputToken")))
        cost = spec.get("cost") or {}
        price = _number(cost.get("pricePerHour"))
        currency = cost.get("currency") or Cost.model_fields["currency"].default
        same_spec = status.get("observedGeneration") == meta.get("generation")
        if price is not None and ott and same_spec:
            # llmbench.runner.sweep.analysis.cost_per_million (the operator does not import the
            # runner; a test keeps the two equal)
            add("llmbench_cost_per_million_output_tokens", price / (ott * 3600.0) * 1e6,
                currency=str(currency))
    else:
        for entry in reversed(status.get("history") or []):
            if entry.get("phase") == "Succeeded" and entry.get("valid") is True:
                add("llmbench_result_run", _number(entry.get("run")))
                add("llmbench_max_ott_under_slo_tokens_per_second",
                    _number(entry.get("maxOttUnderSlo")))
                break

    regressed = _condition(status, "Regressed")
    if regressed in ("True", "False"):
        add("llmbench_regressed", 1.0 if regressed == "True" else 0.0)

    last = _time(status.get("lastRunTime"))
    add("llmbench_last_run_timestamp_seconds", last)
    if finished:
        started = _time(status.get("startedTime"))
    else:  # a run under way: the last finished one is the newest history entry
        history = status.get("history") or []
        newest = history[-1] if history else {}
        same = _time(newest.get("finishedTime")) == last
        started = _time(newest.get("startedTime")) if same else None
    if last is not None and started is not None and last >= started:
        add("llmbench_last_run_duration_seconds", last - started)

    add("llmbench_scheduled", 1.0 if spec.get("schedule") and spec.get("suspend") is not True
        else 0.0)
    for p in PHASES:
        add("llmbench_phase", 1.0 if phase == p else 0.0, phase=p)
    return out


@dataclass
class _Runs:
    """One benchmark's run counts (``llmbench_runs_total``): the object's uid (a benchmark
    deleted and created again under its name starts over), the newest finished run already
    counted or taken as the baseline, and the counts by result."""

    uid: str
    last: int
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(RESULTS, 0))


class BenchmarkCollector(Collector):
    """Renders the samples of every known benchmark at each scrape; thread-safe (the HTTP
    server's thread reads while kopf's loop writes)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: dict[tuple[str, str], list[Sample]] = {}
        self._runs: dict[tuple[str, str], _Runs] = {}
        self._labels: dict[tuple[str, str], dict[str, str]] = {}

    def set(self, namespace: str, name: str, samples: list[Sample]) -> None:
        with self._lock:
            self._samples[(namespace, name)] = samples

    def count(self, body: Mapping[str, Any]) -> None:
        """Counts the run ``body`` shows finished, once; the first body seen of an object is
        its baseline (see the module docstring)."""
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        uid = str(meta.get("uid") or "")
        done = finished_run(body)
        with self._lock:
            self._labels[key] = labels(body)
            runs = self._runs.get(key)
            if runs is None or runs.uid != uid:
                self._runs[key] = _Runs(uid, done[0] if done else 0)
            elif done is not None and done[0] > runs.last:
                runs.last = done[0]
                runs.counts[done[1]] += 1

    def remove(self, namespace: str, name: str) -> None:
        with self._lock:
            self._samples.pop((namespace, name), None)
            self._runs.pop((namespace, name), None)
            self._labels.pop((namespace, name), None)

    def collect(self) -> Iterator[Metric]:
        with self._lock:
            samples = [s for key in sorted(self._samples) for s in self._samples[key]]
            samples += [
                Sample("llmbench_runs_total", {**self._labels[key], "result": result}, float(n))
                for key in sorted(self._runs) for result, n in self._runs[key].counts.items()
            ]
        families: dict[str, tuple[GaugeMetricFamily | CounterMetricFamily, list[str]]] = {}
        for s in samples:
            if s.name not in families:
                names = [*LABELS, *EXTRA_LABELS.get(s.name, ())]
                kind = CounterMetricFamily if s.name.endswith("_total") else GaugeMetricFamily
                families[s.name] = (kind(s.name, HELP[s.name], labels=names), names)
            family, names = families[s.name]
            family.add_metric([s.labels[k] for k in names], s.value)
        for family, _names in families.values():
            yield family


@dataclass
class MetricsConfig:
    """``--metrics-port`` (0: no endpoint, no bookkeeping) and the listening address."""

    port: int = 0
    addr: str = "0.0.0.0"
    server: Any = field(default=None, repr=False)


METRICS = MetricsConfig()
COLLECTOR = BenchmarkCollector()
REGISTRY = CollectorRegistry()
REGISTRY.register(COLLECTOR)


def observe(body: Mapping[str, Any]) -> None:
    """Stores the samples of a benchmark from an event's body, and counts a finished run."""
    meta = body.get("metadata") or {}
    COLLECTOR.set(str(meta.get("namespace") or ""), str(meta.get("name") or ""), gauges(body))
    COLLECTOR.count(body)


def forget(namespace: str, name: str) -> None:
    COLLECTOR.remove(namespace, name)


def record(
    body: Mapping[str, Any], type: str | None, namespace: str | None, name: str  # noqa: A002
) -> None:
    """A watch event of a benchmark: stateless, the event's body is all the gauges need (no
    API call); ``DELETED`` drops its series. Nothing is kept while the endpoint is off."""
    if not METRICS.port:
        return
    if type == "DELETED":
        forget(namespace or "", name)
    else:
        observe(body)


def serve_metrics() -> None:
    """Serves ``/metrics`` on ``--metrics-port`` (once; a server already up is kept).

    ``llmbench operator`` calls it before it stands by for the leader's Lease, so a standby
    (or a leader that has not started kopf yet) answers a scrape with no benchmark series
    rather than refusing it: a Ready pod behind the metrics Service whose scrape failed would
    read ``up == 0`` (a target-down alert) for as long as it stands by.
    """
    if not METRICS.port or METRICS.server is not None:
        return
    try:
        server, _thread = start_http_server(METRICS.port, addr=METRICS.addr, registry=REGISTRY)
    except OSError as exc:  # the gauges are an extra: the operator runs on without them
        log.error("no Prometheus metrics: cannot listen on %s:%d: %s", METRICS.addr,
                  METRICS.port, exc)
        METRICS.port = 0
        return
    METRICS.server = server
    log.info("serving Prometheus metrics on %s:%d/metrics", METRICS.addr, METRICS.port)


async def start_metrics() -> None:
    """:func:`serve_metrics` from kopf's startup (an operator run without ``llmbench
    operator``'s entry point)."""
    serve_metrics()


async def stop_metrics() -> None:
    """Stops the ``/metrics`` server, if one runs."""
    if METRICS.server is not None:
        METRICS.server.shutdown()
        METRICS.server.server_close()
        METRICS.server = None
