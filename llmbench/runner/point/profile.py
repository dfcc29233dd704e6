"""One load point from start to artefacts: preflight, workload, load, metrics, files.

The order matters for trustworthy numbers: everything that costs CPU (building prompts,
counting tokens, decoding SSE, statistics) happens before the first send or after the last
token, never while the clock runs.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from llmbench.api.results import (
    ClientHealth,
    ConcurrencyRamp,
    LoopStall,
    PointResult,
    TimeSeries,
)
from llmbench.runner.artifacts.input_config import genai_perf_input_config
from llmbench.runner.artifacts.write import write_profile_artifacts
from llmbench.runner.client.records import SOURCE_TOKENIZER, RequestRecord
from llmbench.runner.client.transport import Target
from llmbench.runner.load.config import LoadConfig, expected_total
from llmbench.runner.load.engine import run_load
from llmbench.runner.load.result import LoadResult, Progress, SlotStarts
from llmbench.runner.load.sessions import session_plan
from llmbench.runner.load.workers import run_load_workers
from llmbench.runner.point.config import ProfileConfig
from llmbench.runner.point.memory import note_memory, release_memory
from llmbench.runner.point.metrics import stats, summarize
from llmbench.runner.point.preflight import ProfileError, preflight
from llmbench.runner.point.stability import (
    WindowProgress,
    measure_windows,
    settle_records,
    watch_windows,
)
from llmbench.runner.point.timeseries import build_timeseries
from llmbench.runner.telemetry.summary import telemetry_section
from llmbench.runner.workload import datasets
from llmbench.runner.workload import requests as workload_mod
from llmbench.tokenizer import load_tokenizer

log = logging.getLogger("llmbench.profile")


class PointShard(Protocol):
    """One runner pod's part in a point that several pods drive (``spec.runner.replicas``).

    Why hooks into :func:`run_profile` rather than a second point runner: the merged point
    must come out of the very same path as a single runner's (the same summarize, files and
    telemetry), so the pods differ only where these hooks sit: the share of the load, the
    start instant, and the records before they are summarised.
    """

    def split(self, load: LoadConfig) -> LoadConfig:
        """This pod's share of the point's load."""
        ...

    async def start(self, load: LoadConfig) -> int | None:
        """Waits until every pod is ready; the instant (``perf_counter_ns``) to begin on."""
        ...

    async def merge(self, load: LoadResult, progress: Progress) -> LoadResult:
        """This pod's records out (and, for the leader, everyone's in): the point's load."""
        ...

    def annotate(self, summary: PointResult) -> None:
        """Adds what the pods did (``summary.shards``) to the merged point."""
        ...


@dataclass
class ProfileResult:
    """One measured point: its result model, its records, its time series (None: nothing
    completed) and where its files went."""

    summary: PointResult
    records: list[RequestRecord]
    artifact_dir: Path | None
    timeseries: TimeSeries | None = None




#: Answers tokenized per batch by :func:`count_client_tokens`.
_COUNT_SLICE = 128


def count_client_tokens(
    records: list[RequestRecord], tokenizer: Any, prepared: list[workload_mod.PreparedRequest]
) -> None:
    """Client-side ISL/OSL for every record; the tokenizer count is used where usage is missing.

    Runs after the load, so tokenizing costs no measured time.
    """
    n = len(prepared)
    for rec in records:
        if n:
            sent = prepared[rec.index % n]
            rec.requested_output_tokens = sent.requested_output_tokens
            rec.input_tokens_client = sent.input_tokens
            if rec.input_tokens is None:
                rec.input_tokens, rec.input_tokens_source = (
                    rec.input_tokens_client,
                    SOURCE_TOKENIZER,
                )
    if tokenizer is None:
        return
    with_text = [r for r in records if r.output_text is not None]
    batch = getattr(tokenizer, "count_batch", None)
    # In slices: one batch of every answer holds all their encodings (ids, offsets, tokens)
    # at once, tens of MB at a few thousand answers, which stay in the process's peak.
    for i in range(0, len(with_text), _COUNT_SLICE):
        part = with_text[i : i + _COUNT_SLICE]
        texts = [r.output_text or "" for r in part]
        counts = batch(texts) if batch is not None else [tokenizer.count(t) for t in texts]
        for rec, n_out in zip(part, counts, strict=True):
            rec.output_tokens_client = n_out
            if rec.output_tokens is None:
                rec.output_tokens, rec.output_tokens_source = n_out, SOURCE_TOKENIZER
    # Reasoning the server's usage did not count: the tokenizer counts its text.
    thinking = [r for r in records if r.reasoning_text and r.reasoning_tokens is None]
    for i in range(0, len(thinking), _COUNT_SLICE):
        part = thinking[i : i + _COUNT_SLICE]
        texts = [r.reasoning_text or "" for r in part]
        counts = batch(texts) if batch is not None else [tokenizer.count(t) for t in texts]
        for rec, n_out in zip(part, counts, strict=True):
            rec.reasoning_tokens, rec.reasoning_tokens_source = n_out, SOURCE_TOKENIZER


async def run_profile(
    cfg: ProfileConfig,
    *,
    stop: asyncio.Event | None = None,
    progress: Progress | None = None,
    on_window: Callable[[str], Any] | None = None,
    write: bool = True,
    shard: PointShard | None = None,
) -> ProfileResult:
    """Measures one load point and (with ``write``) writes its artefacts.

    ``stop`` ends the run early and keeps what completed (``summary.interrupted``).
    ``on_window("start"|"end")`` brackets the measured load, e.g. for telemetry scrapes.
    ``shard`` makes this one pod of several driving the point (:class:`PointShard`); the
    telemetry window then closes only once every pod's records are in.
    """
    if shard is not None and (cfg.stability is not None or cfg.load.mode in (
        "session_concurrency", "fixed_schedule"
    )):
        raise ProfileError(
            "a point driven by several runner pods cannot use --measurement-interval, "
            "sessions or a fixed schedule (spec rule spec.replicas-split)"
        )
    note_memory("imports")
    if cfg.preflight:
        cfg.model = await asyncio.to_thread(preflight, cfg)
    if cfg.model is None:
        raise ProfileError("-m/--model is required when preflight is off")
    wl = cfg.workload
    wl.model = cfg.model
    wl.endpoint_type = cfg.endpoint_type
    wl.streaming = cfg.streaming and cfg.endpoint_type != "embeddings"
    tok = await asyncio.to_thread(
        load_tokenizer,
        cfg.tokenizer,
        url=cfg.url,
        model=cfg.model,
        headers=cfg.auth_headers(),
        revision=cfg.tokenizer_revision,
    )
    if cfg.load.mode == "fixed_schedule" and cfg.load.schedule_ns is None:
        if wl.input_file is None:
            raise ProfileError("--fixed-schedule needs --input-file (a trace with timestamps)")
        offsets = await asyncio.to_thread(
            datasets.trace_schedule_ns, wl.input_file, wl.endpoint_type
        )
        cfg.load = replace(cfg.load, request_count=len(offsets), schedule_ns=tuple(offsets))
    total = expected_total(cfg.load)
    # An input file is used whole (up to the requests sent); synthetic prompts are cycled, and
    # all --num-dataset-entries of them are built: inputs.json lists them, as GenAI-Perf's does.
    if cfg.load.mode == "session_concurrency":
        # Every turn of every session has a prompt of its own; the history goes before it
        # as the session runs.
        turns = session_plan(cfg.load).turns
        prepared = await asyncio.to_thread(workload_mod.build_session_turns, wl, tok, turns)
    else:
        if wl.input_file is not None:
            distinct = total or 1_000_000
        else:
            distinct = wl.num_prompts
        prepared = await asyncio.to_thread(workload_mod.build_requests, wl, tok, distinct)
    bodies = [p.body for p in prepared]
    note_memory("workload")
    target = Target.from_url(cfg.url, cfg.path(), cfg.auth_headers())
    stop = stop or asyncio.Event()
    progress = progress or Progress()
    collector = cfg.telemetry

    async def window(phase: str) -> None:
        if collector is not None:
            await collector.on_window(phase)
        if on_window is not None:
            await _maybe_await(on_window(phase))

    load_cfg = cfg.load if shard is None else shard.split(cfg.load)
    start_at = None if shard is None else await shard.start(load_cfg)
    # One offset from our monotonic stamps to epoch time, taken as the point starts
    # (profile_export.json carries epoch ns, as perf_analyzer's does).
    epoch_offset_ns = time.time_ns() - time.perf_counter_ns()
    await window("start")
    bounds: list[tuple[int, int]] = []
    counter = tok if cfg.tokenizer != "server" else None
    if cfg.stability is not None:
        load, bounds = await _run_windows(cfg, target, bodies, progress, stop, window)
    else:
        try:
            if load_cfg.workers > 1:
                load = await run_load_workers(
                    target, bodies, load_cfg, progress=progress, stop=stop,
                    start_at_ns=start_at,
                )
            else:
                load = await run_load(
                    target, bodies, load_cfg, progress=progress, stop=stop,
                    start_at_ns=start_at,
                )
            if shard is not None:
                # token counts need the reply texts, which stay in this pod
                count_client_tokens(load.records, counter, prepared)
                load = await shard.merge(load, progress)
        finally:
            await window("end")
    records = load.records
    release_memory()  # the decoded responses' bytes: before the summary and files build
    note_memory("load and decoding")
    inputs = workload_mod.inputs_json(prepared)
    if load.sent_bodies:
        # A session's turn sent its history too: what was sent is what counts and is exported.
        prepared, bodies = _as_sent(prepared, load.sent_bodies, tok)
    if shard is None:
        count_client_tokens(records, counter, prepared)
    stability = None
    if cfg.stability is not None:
        stability = measure_windows(records, bounds, cfg.stability)
        settle_records(records, stability)
    streaming = wl.streaming
    summary = summarize(
        records,
        streaming=streaming,
        slo=cfg.goodput or None,
        unrecorded_errors=load.unrecorded_errors,
    )
    summary.interrupted = stop.is_set()
    summary.stability = stability
    if (
        stability is not None
        and not summary.interrupted
        and load.stop_reason is None
        and not summary.window.completed_requests
    ):
        summary.stop_reason = (
            f"no request was sent and completed within the last {stability.reported_windows} "
            f"windows of {stability.measurement_interval_ms:g} ms: the requests take longer "
            "than that; raise --measurement-interval"
        )
    summary.window.epoch_offset_ns = epoch_offset_ns
    if load.stop_reason is not None:
        summary.stop_reason = load.stop_reason
    summary.client = client_health(
        progress.loop_lag_ms, cfg.load.workers, load, summary.window.start_ns
    )
    if load.slot_starts is not None and cfg.load.ramp_up_s:
        summary.ramp = ramp_result(load.slot_starts, cfg.load.ramp_up_s)
    if load.sessions_abandoned:
        summary.client.warnings.append(
            f"{load.sessions_abandoned} sessions ended before their last turn: a turn failed "
            "(see the errors), so there was no answer to continue the conversation from"
        )
    summary.input_config = cfg.public_dict()
    if shard is not None:
        shard.annotate(summary)
    result = getattr(collector, "result", None)
    if result is not None:
        measured_osl = sum(r.output_tokens or 0 for r in records if r.ok and not r.warmup)
        summary.telemetry = telemetry_section(
            result, records, output_tokens=measured_osl, window_s=summary.window.duration_s
        )
    timeseries = build_timeseries(
        records, result, interval_s=cfg.timeseries_interval_s, streaming=streaming,
        epoch_offset_ns=epoch_offset_ns,
    )
    note_memory("summary")
    out_dir = cfg.resolved_artifact_dir() if write else None
    if out_dir is not None:
        # the summary is complete before it is written: the file and what the caller keeps
        # (the digest, the store) are the same document
        summary.genai_perf_config = genai_perf_input_config(
            summary.input_config, stem=cfg.export_stem, artifact_dir=out_dir.parent
        )
        write_profile_artifacts(
            out_dir, records, summary, inputs, stem=cfg.export_stem, bodies=bodies,
            timeseries=timeseries,
        )
        release_memory()  # before the caller's plots, which need ~40 MB of their own
        note_memory("exports")
    return ProfileResult(summary, records, out_dir, timeseries)


def _as_sent(
    prepared: list[workload_mod.PreparedRequest], sent: dict[int, bytes], tok: Any
) -> tuple[list[workload_mod.PreparedRequest], list[bytes]]:
    """The requests as the session turns sent them (history included), with their client-side
    input token counts; turns never sent keep their own prompt."""
    keys = sorted(k for k in sent if k < len(prepared))
    counts = workload_mod.conversation_tokens(tok, [sent[k] for k in keys])
    out = list(prepared)
    for k, n in zip(keys, counts, strict=True):
        out[k] = replace(out[k], body=sent[k], input_tokens=n)
    return out, [p.body for p in out]


async def _run_windows(
    cfg: ProfileConfig,
    target: Target,
    bodies: list[bytes],
    progress: Progress,
    stop: asyncio.Event,
    window: Callable[[str], Any],
) -> tuple[LoadResult, list[tuple[int, int]]]:
    """The load of a ``--measurement-interval`` point: no request budget; it runs until the
    windows agree (:func:`~llmbench.runner.point.stability.watch_windows`), the user stops it,
    or the target is lost. The window phase ends when the last window does."""
    assert cfg.stability is not None
    counters = WindowProgress()
    load_stop = asyncio.Event()
    relay = asyncio.ensure_future(_relay(stop, load_stop, counters, progress))
    watcher = asyncio.ensure_future(
        watch_windows(counters, cfg.stability, cfg.load.warmup_request_count, load_stop)
    )
    try:
        load = await run_load(target, bodies, cfg.load, progress=counters, stop=load_stop)
    finally:
        load_stop.set()
        relay.cancel()
        await window("end")
    bounds = await watcher
    progress.sent, progress.done, progress.errors = counters.sent, counters.done, counters.errors
    progress.loop_lag_ms.extend(counters.loop_lag_ms)
    progress.stalls.extend(counters.stalls)
    return load, bounds


async def _relay(
    stop: asyncio.Event, load_stop: asyncio.Event, counters: Progress, progress: Progress
) -> None:
    """Passes a user's stop on to the windowed load and its counts to the caller's display."""
    while not load_stop.is_set():
        progress.sent, progress.done, progress.errors = (
            counters.sent, counters.done, counters.errors
        )
        if stop.is_set():
            load_stop.set()
            return
        await asyncio.sleep(0.05)


#: Event-loop lag (ms) above which the client's own timestamps are called into doubt: late
#: one probe in ten (p90) means the loop stopped keeping up; a p99 this high means stalls
#: long enough to matter. Below them, closed-loop slots finishing together cause short,
#: harmless bursts.
LOOP_LAG_WARN_P90_MS = 2.0
LOOP_LAG_WARN_P99_MS = 10.0


def ramp_result(ramp: SlotStarts, ramp_up_s: float) -> ConcurrencyRamp:
    """The closed-loop ramp as planned and as achieved: when the slots sent their first
    requests against :func:`~llmbench.runner.load.arrivals.slot_start_offsets`' plan."""
    slots = len(ramp.planned_ns)
    started = [
        (sent, plan) for sent, plan in zip(ramp.sent_ns, ramp.planned_ns, strict=True)
        if sent is not None
    ]
    return ConcurrencyRamp(
        seconds=ramp_up_s,
        slots=slots,
        step_s=ramp_up_s / (slots - 1) if slots > 1 else 0.0,
        started_slots=len(started),
        last_slot_s=(
            round((max(s for s, _ in started) - ramp.start_ns) / 1e9, 6) if started else None
        ),
        max_lag_ms=round(max((s - p) / 1e6 for s, p in started), 3) if started else None,
    )


def client_health(
    lag_ms: list[float],
    workers: int,
    load: LoadResult | None = None,
    start_ns: int | None = None,
) -> ClientHealth:
    """How busy the measuring loop was, with a warning when its stamps may run late.

    Every read is stamped when the loop gets to it; a loop that wakes its timers late
    would have stamped arrivals late by about as much. A single long stall hides in the
    percentiles (one probe in thousands), so the longest one is named on its own with the
    requests it overlapped. ``load`` adds the run's stall, ``Retry-After`` and spill figures;
    ``start_ns`` (the first measured send) places the stall in the run.
    """
    lag = stats(lag_ms)
    warnings = []
    extra: dict[str, Any] = {}
    stall = load.longest_stall if load is not None else None
    if lag is not None and (lag.p90 > LOOP_LAG_WARN_P90_MS or lag.p99 > LOOP_LAG_WARN_P99_MS):
        worst = f", longest stall {stall.ms:.0f} ms" if stall is not None else ""
        warnings.append(
            f"the client's event loop could not keep up (lag p90 {lag.p90:.1f} ms, p99 "
            f"{lag.p99:.1f} ms{worst}): arrival stamps may be late by as much; split the load "
            f"with --workers {workers + 1} or more"
        )
    if stall is not None:
        at_s = (stall.start_ns - start_ns) / 1e9 if start_ns is not None else None
        where = f" {at_s:.1f} s into the run" if at_s is not None else ""
        why = (
            "the runner itself was busy"
            if stall.cpu_ms >= stall.ms / 2
            else "the runner was not scheduled: the machine is too busy to measure on"
        )
        warnings.append(
            f"the client's event loop stalled for {stall.ms:.0f} ms{where} (worker "
            f"{stall.worker}; it used {stall.cpu_ms:.0f} ms of CPU meanwhile: {why}): the "
            f"timestamps of the {stall.overlapped_requests} requests in flight across it are "
            "unreliable (marked loop_stall_ms in their records)"
        )
        extra["longest_stall"] = LoopStall(
            ms=stall.ms,
            at_s=at_s,
            worker=stall.worker,
            overlapped_requests=stall.overlapped_requests,
            cpu_ms=stall.cpu_ms,
        )
    if load is not None:
        extra["event_loop"] = load.event_loop
        if load.retry_after_waits:
            extra["retry_after_waits"] = load.retry_after_waits
            extra["retry_after_wait_s"] = load.retry_after_wait_s
        if load.spilled_requests:
            extra["spilled_requests"] = load.spilled_requests
    return ClientHealth(workers=workers, loop_lag_ms=lag, warnings=warnings, **extra)


async def _maybe_await(x: Any) -> None:
    if asyncio.iscoroutine(x) or isinstance(x, asyncio.Future):
        await x


def install_stop_signals(stop: asyncio.Event) -> Callable[[], None]:
    """Ctrl-C and SIGTERM set ``stop`` (first time) so the run ends and keeps its results.

    A second Ctrl-C restores the default handler's behaviour and aborts. Returns an undo.
    """
    loop = asyncio.get_running_loop()
    hits = {"n": 0}

    def handler(signame: str) -> None:
        hits["n"] += 1
        if hits["n"] > 1:
            raise KeyboardInterrupt
        log.warning("%s received: stopping, results so far will be written", signame)
        stop.set()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, handler, sig.name)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):
            pass

    def undo() -> None:
        for s in installed:
            loop.remove_signal_handler(s)

    return undo
