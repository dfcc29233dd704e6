"""The runner Job's loop: read the run from its store, resume, sweep, write back every point.

Why this shape (../shared/DESIGN.md, "Result flow"): one Job runs the whole sweep, and its
results ConfigMap is both the operator's view of the run and the sweep's checkpoint. So:

1. read the store: ``spec.json`` and ``context.json`` (what the operator resolved: URL, model,
   exporters, the target pods whose GPUs count), and whatever an earlier pod of this Job
   already wrote;
2. restore ``checkpoint.json`` and every ``point.<name>.json`` into the artefact folder, the
   layout :func:`~llmbench.runner.sweep.run.run_sweep` resumes from, so a retried pod repeats
   no finished point;
3. run the sweep; after each point write, in ONE merge patch, the point's result, the
   checkpoint, the digest and the summary CSV (``llmbench analyze``'s own CSV text), so the
   store never holds a checkpoint that names a point it does not hold;
4. a write that fails puts the digest into the termination message and the sweep goes on (the
   next write carries the points that were missed); at the end, the final digest goes to both.

SIGTERM (the pod deleted, ``activeDeadlineSeconds``) stops the sweep the way Ctrl-C stops
``llmbench analyze``: the running point ends and is re-run on resume. Exit codes: 0 the sweep
finished (a point may have failed; the digest says which), 1 the run failed (nothing could be
measured, the sweep stopped on a failed point, or the store/spec/context is unusable), 130
interrupted. The API key comes from the environment variable ``context.json`` names and is
never written: every value is scrubbed of it before it leaves the process.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from llmbench.api import Spec, SpecError
from llmbench.api.job import (
    CHECKPOINT_KEY,
    CONTEXT_KEY,
    DIGEST_KEY,
    ENV_NODE_NAME,
    ENV_SHARD_INDEX,
    PROGRESS_KEY,
    SPEC_KEY,
    SUMMARY_KEY,
    BaselineContext,
    RunContext,
    point_key,
    point_name_of,
)
from llmbench.api.results import Gauge, GpuSeries, PointResult, ServerSeries, SweepAnalysis
from llmbench.api.status import CurrentPoint, RunDigest, dump
from llmbench.runner.artifacts.layout import GENAI_PERF_JSON
from llmbench.runner.artifacts.write import write_atomic
from llmbench.runner.client.eventloop import run as run_loop
from llmbench.runner.job.digest import build_digest, termination_message
from llmbench.runner.job.heartbeat import Heartbeat, current_point, figures_line, wall_now
from llmbench.runner.job.scrub import Scrubber
from llmbench.runner.job.shards import Coordinator
from llmbench.runner.job.store import ResultsStore, StoreError
from llmbench.runner.load.config import expected_total
from llmbench.runner.load.result import Progress
from llmbench.runner.point.config import ProfileConfig, point_config
from llmbench.runner.point.preflight import ProfileError, preflight
from llmbench.runner.point.profile import ProfileResult, install_stop_signals, run_profile
from llmbench.runner.report.telemetry_plot import plot_point_telemetry
from llmbench.runner.report.timeseries_plot import plot_point_timeseries
from llmbench.runner.sweep.analysis import ANALYZE_CSV, analysis, summary_csv, write_exports
from llmbench.runner.sweep.run import (
    CHECKPOINT,
    DONE,
    CheckpointError,
    SweepResult,
    checkpoint_text,
    run_sweep,
)
from llmbench.runner.telemetry.collector import TelemetryCollector
from llmbench.runner.telemetry.model import GpuFilter
from llmbench.runner.telemetry.parse import metrics_urls

__all__ = [
    "DEFAULT_ARTIFACT_DIR",
    "DEFAULT_TERMINATION_LOG",
    "EXIT_DONE",
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "CONFIGMAP_LIMIT",
    "JobError",
    "collector_for_context",
    "point_text",
    "run_job",
    "shard_index",
    "too_large",
]

log = logging.getLogger("llmbench.job")

DEFAULT_ARTIFACT_DIR = Path("/tmp/llmbench-results")
DEFAULT_TERMINATION_LOG = Path("/dev/termination-log")
EXIT_DONE = 0
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130
#: Seconds the run's first preflight tries a refused connection again: the operator starts
#: the Job once the target's pods are Ready, and the Service may route from this pod's node
#: only a kube-proxy sync later (seconds on a busy node).
ROUTE_WAIT_S = 20.0

#: Bytes of point results the ConfigMap may hold in all (the API server's limit is 1 MiB for
#: the whole object; spec, context, digest, checkpoint and CSV need the rest). Each point may
#: take its share, ``POINTS_BUDGET / (points x repetitions)``; admission caps that product
#: (:data:`llmbench.api.spec.MAX_STORED_POINTS`) so that the share holds a point's figures.
POINTS_BUDGET = 800_000


class JobError(Exception):
    """The run cannot start or go on; the message says what to fix (it ends as ``failed``)."""


#: The API server's limit on a ConfigMap's data (keys and values), in bytes.
CONFIGMAP_LIMIT = 1024 * 1024


def too_large(exc: StoreError) -> bool:
    """Whether the API server refused a write for the object's size (422 ``Too long: must
    have at most 1048576 bytes``, or 413 / etcd's ``request is too large``)."""
    text = str(exc).lower()
    return exc.status in (413, 422, 500) and ("too long" in text or "too large" in text)


def point_text(summary: PointResult, budget: int) -> str:
    """A point's ``profile_export_genai_perf.json`` for the store: compact JSON that
    :func:`~llmbench.runner.artifacts.read.load_summary` reads back.

    ``telemetry_stats`` is always left out: it is derived from ``telemetry`` and reading the
    point back builds it again (a quarter of a point with eight GPUs). Over ``budget`` bytes,
    the telemetry time series (kept whole in the point's folder and its ``telemetry.png``) are
    emptied, then each GPU gauge keeps avg/p99/min/max and its sample count: a resumed sweep
    needs the figures, not the plot data or every percentile.
    """
    text = _compact(summary)
    if len(text) <= budget or summary.telemetry is None:
        return text
    slim = summary.model_copy(deep=True)
    assert slim.telemetry is not None
    for gpu in slim.telemetry.gpus.values():
        gpu.series = GpuSeries(t_s=[], power_w=[], utilization_pct=[])
    for server in slim.telemetry.server.values():
        server.series = ServerSeries(
            t_s=[], kv_cache_usage=[], requests_running=[], requests_waiting=[]
        )
    text = _compact(slim)
    if len(text) <= budget:
        return text
    for key, gpu in slim.telemetry.gpus.items():
        slim.telemetry.gpus[key] = gpu.model_copy(update={
            name: Gauge(avg=g.avg, p99=g.p99, min=g.min, max=g.max, n=g.n)
            for name, g in gpu if isinstance(g, Gauge)
        })
    return _compact(slim)


def _compact(summary: PointResult) -> str:
    doc = summary.to_dict()
    doc.pop("telemetry_stats", None)
    return json.dumps(doc, separators=(",", ":"))


def collector_for_context(ctx: RunContext) -> TelemetryCollector | None:
    """The scrapes the operator asked for: the nodes' dcgm-exporters (only the GPUs of the
    target pods kept) and the server's metrics (``auto``: ``<url>/metrics``, ``off``, a URL);
    None when there is nothing to scrape."""
    extra = [ctx.server_metrics] if ctx.server_metrics not in ("auto", "off") else []
    target = ctx.url if ctx.server_metrics == "auto" else None
    urls = metrics_urls(target, [*ctx.dcgm_urls, *extra])
    if not urls:
        return None
    return TelemetryCollector(
        urls,
        gpu_filter=GpuFilter(
            pods=tuple(ctx.target_pods),
            namespaces=(ctx.target_namespace,) if ctx.target_namespace else (),
        ),
    )


def set_aside(folder: Path, *, fresh: bool, stamp: str) -> Path | None:
    """Renames a non-empty ``folder`` to ``<folder>.replaced-<stamp>`` when the run is
    ``fresh`` (its store holds no checkpoint); returns the new name, None when nothing moved.

    Why: a persistent run folder outlives its benchmark, and a folder holding a checkpoint
    would be resumed as if it were this run's.
    """
    if not fresh or not folder.is_dir() or not any(folder.iterdir()):
        return None
    target = folder.with_name(f"{folder.name}.replaced-{stamp}")
    n = 1
    while target.exists():
        n += 1
        target = folder.with_name(f"{folder.name}.replaced-{stamp}-{n}")
    folder.rename(target)
    return target


def shard_index(value: str | None) -> int:
    """The shard index from ``$JOB_COMPLETION_INDEX`` (0 when unset: a single runner)."""
    if value is None or value == "":
        return 0
    try:
        index = int(value)
    except ValueError:
        raise ValueError(f"JOB_COMPLETION_INDEX={value!r} is not a number") from None
    if index < 0:
        raise ValueError(f"JOB_COMPLETION_INDEX={value!r} is negative")
    return index


def env_shard_index() -> int:
    """This pod's shard index (see :func:`shard_index`)."""
    return shard_index(os.environ.get(ENV_SHARD_INDEX))


class _Job:
    """One pod's run: the store, what it already holds, and the fallback channel."""

    def __init__(
        self,
        store: ResultsStore,
        artifact_dir: Path,
        termination_log: Path | None,
        runner_node: str | None,
        persist_dir: Path | None = None,
    ) -> None:
        self.store = store
        self.artifact_dir = artifact_dir
        self.persist_dir = persist_dir
        self.termination_log = termination_log
        self.runner_node = runner_node
        self.run = 1
        #: takes the API key out of the store's data, the termination message, the log and
        #: the artefacts (every encoding: :mod:`llmbench.runner.job.scrub`)
        self.scrubber = Scrubber(None)
        #: point names whose result the store holds
        self.stored: set[str] = set()
        self.total = 1
        #: what the operator asked this run to be judged against, and how strictly
        self.baseline: BaselineContext | None = None
        self.tolerances: dict[str, float] | None = None
        #: this pod's shard index (``$JOB_COMPLETION_INDEX``) and, with spec.runner.replicas
        #: > 1, its side of the several-pod protocol; only shard 0 writes results
        self.shard = 0
        self.coord: Coordinator | None = None
        #: points of the sweep ended (resumed ones included), and how long each one this pod
        #: measured took (s): the heartbeat's point number and sweep ETA
        self.points_ended = 0
        self.point_seconds: list[float] = []

    @property
    def follower(self) -> bool:
        """A shard other than 0: it measures, but the store's results are shard 0's."""
        return self.coord is not None and not self.coord.leader

    # -- start: what to run and what is already done ----------------------------------------

    def load(self) -> tuple[Spec, RunContext]:
        """Spec and context from the store; earlier pods' results restored to the folder."""
        try:
            data = self.store.read()
        except StoreError as exc:
            raise JobError(f"cannot read the run: {exc}") from None
        for key in (SPEC_KEY, CONTEXT_KEY):
            if key not in data:
                raise JobError(f"{self.store} has no {key}: the operator writes it with the run")
        try:
            ctx = RunContext.model_validate_json(data[CONTEXT_KEY])
        except ValidationError as exc:
            raise JobError(f"{CONTEXT_KEY} in {self.store} is not a RunContext: {exc}") from None
        self.run = ctx.run
        self.baseline = ctx.baseline
        try:
            spec = Spec.from_manifest(json.loads(data[SPEC_KEY]), namespace=ctx.namespace)
        except ValueError as exc:  # SpecError and json's errors are ValueErrors
            where = f"{SPEC_KEY} in {self.store}"
            raise JobError(f"{where}: {exc}" if isinstance(exc, SpecError) else
                           f"{where} is not JSON: {exc}") from None
        self.tolerances = spec.baseline.tolerances.percentages()
        if self.persist_dir is not None and (spec.runner.replicas <= 1 or self.shard == 0):
            # a run folder on the volume that the store knows nothing of is not this run's
            # (a benchmark deleted and made again under its name): kept aside, never resumed
            try:
                moved = set_aside(self.persist_dir, fresh=CHECKPOINT_KEY not in data,
                                  stamp=time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
                self.persist_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise JobError(
                    f"spec.artifacts.pvc: cannot write {self.persist_dir} ({exc}); the claim "
                    f"must be writable by the runner's uid/gid {os.getuid()}/{os.getgid()} "
                    "(most volume types honour the pod's fsGroup; hostPath does not)"
                ) from None
            if moved is not None:
                log.warning("%s held files of another run: moved to %s", self.persist_dir,
                            moved)
            self.artifact_dir = self.persist_dir
            log.info("artefacts: %s", self.persist_dir)
        self.restore(data)
        self.points_ended = len(self.stored)
        return spec, ctx

    def restore(self, data: dict[str, str]) -> None:
        """Writes the store's checkpoint and point results where the sweep resumes from.

        Files already in the folder are kept: they were written before the store (a container
        restarted in the same pod), so they are at least as new. A point is written as the
        model writes it, so its file has GenAI-Perf's ``telemetry_stats`` again.
        """
        self.artifact_dir.mkdir(parents=True, exist_ok=True)
        restored = []
        for key, text in data.items():
            name = point_name_of(key)
            if name is None or name in (".", "..") or "/" in name:
                continue
            self.stored.add(name)
            target = self.artifact_dir / name / GENAI_PERF_JSON
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                # through the model: the store's copy lacks the derived telemetry_stats
                try:
                    text = PointResult.model_validate_json(text).to_json()
                except ValidationError:
                    pass  # written as found: the sweep's own reader names what is wrong
                write_atomic(target, text)
                restored.append(name)
        ckpt = self.artifact_dir / CHECKPOINT
        if CHECKPOINT_KEY in data and not ckpt.exists():
            write_atomic(ckpt, data[CHECKPOINT_KEY])
        if restored:
            log.info("restored %d finished point(s) from %s: %s", len(restored), self.store,
                     ", ".join(sorted(restored)))

    # -- the point under way -----------------------------------------------------------------

    async def watched(
        self, spec: Spec, cfg: ProfileConfig, stop: asyncio.Event
    ) -> ProfileResult:
        """Measures one point with its heartbeat (:mod:`.heartbeat`): the load engine's live
        counters, a record in the store and a log line every ~10 s, until the point ends.
        (Several runner pods: shard 0 merges the point's counts only at its end, so a point
        they drive together has no heartbeat.)"""
        counters = Progress()
        number = self.points_ended + 1
        values = spec.points()
        index = (number - 1) // max(1, spec.repetitions)
        if spec.sweep is not None and spec.sweep.workloads is not None:
            index %= len(values)  # a grid runs every value again for each workload
        value = values[min(len(values) - 1, index)]
        name = cfg.artifact_dir.name if cfg.artifact_dir is not None else f"point {number}"
        started, t0 = wall_now(), time.monotonic()
        mean = (sum(self.point_seconds) / len(self.point_seconds)) if self.point_seconds else None

        def record() -> CurrentPoint:
            return current_point(
                name=name, value=float(value if value is not None else 0), number=number,
                total=self.total, done=counters.done, errors=counters.errors,
                requests_target=expected_total(cfg.load),
                seconds_target=cfg.load.measurement_duration_s, started=started,
                now=wall_now(), mean_point_s=mean,
            )

        beat = Heartbeat(None if self.follower else self.store, counters, record, self.total,
                         self._scrub)
        beat.start()
        try:
            return await run_profile(cfg, stop=stop, progress=counters)
        finally:
            await beat.close()
            self.point_seconds.append(time.monotonic() - t0)

    # -- writing back --------------------------------------------------------------------------

    def _scrub(self, text: str) -> str:
        return self.scrubber.text(text)

    def updates(
        self, result: SweepResult, digest: RunDigest, csv_text: str
    ) -> dict[str, str | None]:
        """Every key this write sets: points the store lacks, checkpoint, digest, CSV; and
        the ended point's progress record removed in the same patch (the operator never sees
        the new digest beside the old record)."""
        out: dict[str, str] = {}
        budget = POINTS_BUDGET // max(1, self.total)
        for r in result.runs:
            if r.status == DONE and r.summary is not None and r.name not in self.stored:
                out[point_key(r.name)] = point_text(r.summary, budget)
        out[CHECKPOINT_KEY] = checkpoint_text(result)
        out[DIGEST_KEY] = json.dumps(dump(digest), indent=1)
        out[SUMMARY_KEY] = csv_text
        return {**{k: self._scrub(v) for k, v in out.items()}, PROGRESS_KEY: None}

    @staticmethod
    def exports(result: SweepResult, data: SweepAnalysis) -> str:
        """``analyze_export_genai_perf.csv`` of ``data`` as the store holds it (its
        ``summary.csv``, the operator's ``status.summaryCSV``): ``llmbench analyze``'s CSV with
        LF line ends, as the file reads in text mode (the file keeps the csv module's CRLF, as
        GenAI-Perf's). The files go into the run folder too, as analyze leaves them; a folder
        that refuses them only warns, the store still gets the text."""
        try:
            text = write_exports(result.run_dir, data)
        except OSError as exc:
            log.warning("cannot write %s locally (%s); the store still gets it", ANALYZE_CSV, exc)
            text = summary_csv(data)
        # what reading the file back as text gave (universal newlines), without reading it
        return text.replace("\r\n", "\n").replace("\r", "\n")

    def publish(
        self, result: SweepResult, data: SweepAnalysis, *, finished: bool = False
    ) -> RunDigest:
        """One write of everything new, from the sweep and its analysis ``data`` (the digest
        built here); on failure the digest goes to the termination message. Returns the
        digest."""
        csv_text = self.exports(result, data)
        digest = build_digest(result, data, run=self.run, finished=finished,
                              baseline=self.baseline, tolerances=self.tolerances,
                              runner_node=self.runner_node)
        if finished or result.interrupted:
            # the termination message first: after SIGTERM the kubelet's grace period may
            # end while the store is still being retried
            self.terminate(digest)
        if self.follower:
            return digest
        updates = self.updates(result, digest, csv_text)
        try:
            self.store.write(updates)
        except StoreError as exc:
            if too_large(exc):  # every later write would be refused too: end the run
                raise JobError(
                    f"results exceed the ConfigMap ({self.would_hold(updates)} bytes; the API "
                    f"server takes at most {CONFIGMAP_LIMIT}): run fewer points or repetitions "
                    f"({exc})"
                ) from None
            log.error("%s; the digest goes to the termination message instead", exc)
            self.terminate(digest)
            return digest
        self.stored |= {
            name for key in updates if (name := point_name_of(key)) is not None
        }
        return digest

    def would_hold(self, updates: Mapping[str, str | None]) -> int:
        """Bytes of the ConfigMap's data with ``updates`` merged in (keys and values, as the
        API server counts them; a key set to None removed); the updates alone when the store
        cannot be read."""
        try:
            data: dict[str, str | None] = {**self.store.read(), **updates}
        except StoreError:
            data = dict(updates)
        return sum(len(k.encode()) + len(v.encode()) for k, v in data.items() if v is not None)

    def report(self, result: SweepResult, data: SweepAnalysis) -> None:
        """The HTML report and plots beside the persisted results, as ``llmbench analyze``
        leaves them, from the sweep and the analysis just published (the records are read
        from the point folders: the pod holds one point's at a time); a convenience, so a
        failure to draw only warns."""
        from llmbench.runner.report.html import (  # matplotlib: only when asked
            REPORT_HTML,
            render_report,
            saved_records,
        )

        try:
            page = render_report(result, data, saved_records(result.run_dir),
                                 result.run_dir / REPORT_HTML)
            log.info("report: %s", page)
        except Exception as exc:  # the CSV and JSON are the results
            log.warning("report skipped: %s: %s", type(exc).__name__, exc)

    def terminate(self, digest: RunDigest) -> None:
        """Writes the digest, trimmed to the kubelet's limit, as the termination message."""
        if self.termination_log is None:
            return
        try:
            self.termination_log.write_text(self._scrub(termination_message(digest)),
                                            encoding="utf-8")
        except OSError as exc:
            log.warning("cannot write the termination message to %s: %s",
                        self.termination_log, exc)

    def fail(self, reason: str) -> int:
        """The run cannot go on: a failed, finished digest to the store (if it takes it) and
        to the termination message."""
        log.error("run failed: %s", reason)
        digest = RunDigest(run=self.run, finished=True, failed=self._scrub(reason)[:1000],
                           runner_node=self.runner_node)
        self.terminate(digest)
        if self.follower:
            return EXIT_FAILED
        try:
            self.store.write({DIGEST_KEY: json.dumps(dump(digest), indent=1)})
        except StoreError as exc:
            log.error("%s", exc)
        return EXIT_FAILED

    # -- the sweep -------------------------------------------------------------------------

    async def sweep(self, spec: Spec, ctx: RunContext, stop: asyncio.Event) -> int:
        """Runs (or resumes) the sweep, publishing after every point; the exit code."""
        api_key: str | None = None
        if ctx.api_key_env:
            api_key = os.environ.get(ctx.api_key_env) or None
            if api_key is None:
                raise JobError(
                    f"the API key's environment variable {ctx.api_key_env} is empty or unset "
                    "(the Job sets it from target.apiKeySecretRef)"
                )
            self.scrubber = Scrubber(api_key)
            self.scrubber.install()
        self.total = spec.point_runs()
        replicas = spec.runner.replicas
        if not 0 <= self.shard < replicas:
            raise JobError(
                f"this pod is shard {self.shard} ({ENV_SHARD_INDEX}) but spec.runner.replicas "
                f"is {replicas}"
            )
        if replicas > 1:
            self.coord = Coordinator(self.store, self.shard, replicas, node=self.runner_node)
            log.info("shard %d of %d%s", self.shard, replicas,
                     " (leads: merges and writes the results)" if self.shard == 0 else "")
        cfg0 = point_config(spec, spec.points()[0], api_key=api_key)
        cfg0.url = ctx.url
        cfg0.route_wait_s = ROUTE_WAIT_S
        if ctx.model:
            cfg0.model = ctx.model
        try:
            model = await asyncio.to_thread(preflight, cfg0)
        except ProfileError as exc:
            raise JobError(str(exc)) from None
        options: dict[str, Any] = {"url": ctx.url}
        # telemetry is scraped once per point, by shard 0, over the merged window
        collector = collector_for_context(ctx) if not self.follower else None
        if collector is not None:
            options["telemetry"] = collector
        coord = self.coord

        def on_point(result: SweepResult) -> None:
            last = result.runs[-1]
            log.info("%s: %s%s", last.name, last.status, f" ({last.reason})" if last.reason else "")
            if last.summary is not None:
                log.info("%s", figures_line(last.name, last.summary, wall_now()))
            self.points_ended = len(result.runs)
            self.publish(result, analysis(result))
            if coord is not None:
                coord.cleanup(last.name)

        async def measure(cfg: ProfileConfig, point_stop: asyncio.Event) -> ProfileResult:
            if coord is not None:
                pr = await coord.run_point(cfg, point_stop)
            else:
                pr = await self.watched(spec, cfg, point_stop)
            if pr.artifact_dir is not None and not self.follower:  # a follower has no scrapes
                await asyncio.to_thread(plot_point_telemetry, pr.summary, pr.artifact_dir)
                await asyncio.to_thread(plot_point_timeseries, pr.timeseries, pr.artifact_dir)
            if pr.artifact_dir is not None:
                await asyncio.to_thread(self.scrubber.tree, pr.artifact_dir)
            return pr

        try:
            result = await run_sweep(
                spec, self.artifact_dir, model=model, stop=stop, notify=log.info,
                api_key=api_key, on_point=on_point, point_options=options, run_point=measure,
            )
        except CheckpointError as exc:
            raise JobError(str(exc)) from None
        data = analysis(result)
        digest = self.publish(result, data, finished=not result.interrupted)
        if coord is not None and not result.interrupted:
            coord.cleanup()
        if self.persist_dir is not None and not self.follower and not result.interrupted:
            self.report(result, data)
        # the sweep's own files (checkpoint, analyze CSV, report) beside the points'
        await asyncio.to_thread(self.scrubber.tree, self.artifact_dir)
        if result.interrupted:
            log.warning("interrupted after %d of %d points; a new pod resumes from %s",
                        digest.done, digest.total, self.store)
            return EXIT_INTERRUPTED
        if digest.failed:
            log.error("run failed: %s", digest.failed)
            return EXIT_FAILED
        log.info("done: %d of %d points", digest.done, digest.total)
        return EXIT_DONE


async def _main(
    store: ResultsStore,
    artifact_dir: Path,
    termination_log: Path | None,
    stop: asyncio.Event | None,
    runner_node: str | None,
    shard: int | None,
    persist_dir: Path | None = None,
) -> int:
    job = _Job(store, artifact_dir, termination_log, runner_node, persist_dir)
    undo: Callable[[], None] | None = None
    if stop is None:
        stop = asyncio.Event()
        undo = install_stop_signals(stop)
    try:
        try:
            job.shard = shard if shard is not None else env_shard_index()
        except ValueError as exc:
            raise JobError(str(exc)) from None
        spec, ctx = job.load()
        return await job.sweep(spec, ctx, stop)
    except JobError as exc:
        return job.fail(str(exc))
    except (OSError, ValueError) as exc:  # a folder that cannot be written, a bad input file
        log.exception("run failed")
        return job.fail(f"{type(exc).__name__}: {exc}")
    finally:
        if undo is not None:
            undo()


def run_job(
    store: ResultsStore,
    artifact_dir: Path = DEFAULT_ARTIFACT_DIR,
    *,
    termination_log: Path | None = DEFAULT_TERMINATION_LOG,
    stop: asyncio.Event | None = None,
    runner_node: str | None = None,
    shard: int | None = None,
    persist_dir: Path | None = None,
) -> int:
    """Runs the sweep the store describes, writing results back to it; the exit code.

    With ``spec.runner.replicas`` N > 1 this pod is shard ``shard`` (default
    ``$JOB_COMPLETION_INDEX``, else 0) of N driving each point together
    (:mod:`llmbench.runner.job.shards`); shard 0 merges and writes the results.

    ``stop`` ends the sweep early (tests); without one, SIGTERM and Ctrl-C do.
    ``runner_node`` defaults to ``$LLMBENCH_NODE_NAME`` (the downward API's ``spec.nodeName``).
    ``termination_log`` None writes no termination message (a local run).
    ``persist_dir`` (``spec.artifacts.pvc``): shard 0's run folder, kept after the pod, with
    the HTML report once the run ends; followers keep using ``artifact_dir``.
    """
    node = runner_node if runner_node is not None else os.environ.get(ENV_NODE_NAME) or None
    # uvloop where available, as `profile` and `analyze` measure (the runner pod is Linux).
    return run_loop(_main(store, Path(artifact_dir), termination_log, stop, node, shard,
                          persist_dir))
