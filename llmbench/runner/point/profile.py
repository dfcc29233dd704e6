"""One load point from start to artefacts: preflight, workload, load, metrics, files.

The order matters for trustworthy numbers: everything that costs CPU (building prompts,
counting tokens, decoding SSE, statistics) happens before the first send or after the last
token, never while the clock runs.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from llmbench.api.results import ClientHealth, PointResult
from llmbench.runner.client.records import SOURCE_TOKENIZER, RequestRecord
from llmbench.runner.client.transport import Target
from llmbench.runner.load import workload as workload_mod
from llmbench.runner.load.engine import (
    Progress,
    expected_total,
    run_load,
    run_load_workers,
)
from llmbench.runner.point.artifacts import write_profile_artifacts
from llmbench.runner.point.config import ProfileConfig
from llmbench.runner.point.metrics import stats, summarize
from llmbench.runner.report.telemetry_plot import plot_telemetry
from llmbench.runner.telemetry.summary import telemetry_section
from llmbench.tokenizer import load_tokenizer

log = logging.getLogger("llmbench.profile")

class ProfileError(Exception):
    """A problem found before any load was sent; the message names the flag or URL to fix."""


@dataclass
class ProfileResult:
    """One measured point: its result model, its records and where its files went."""

    summary: PointResult
    records: list[RequestRecord]
    artifact_dir: Path | None


def preflight(cfg: ProfileConfig, timeout: float = 10.0) -> str:
    """Checks the target answers and serves the model before any load; returns the model.

    Fails fast naming the URL (unreachable) or the model (not served). A server without
    ``/v1/models`` is accepted when ``--model`` is given.
    """
    target = Target.from_url(cfg.url, cfg.path())
    models_url = target.base_url.rstrip("/")
    models_url = (
        models_url[: -len("/v1")] if models_url.endswith("/v1") else models_url
    ) + "/v1/models"
    try:
        resp = httpx.get(models_url, headers=cfg.auth_headers(), timeout=timeout)
    except httpx.HTTPError as exc:
        raise ProfileError(f"cannot reach {target.base_url} (--url): {exc}") from exc
    if resp.status_code in (401, 403):
        raise ProfileError(
            f"{models_url} answered {resp.status_code}: pass an API key "
            "(--api-key-env NAME or --api-key-file PATH)"
        )
    served: list[str] = []
    if resp.status_code == 200:
        try:
            served = [m["id"] for m in resp.json().get("data", []) if "id" in m]
        except (ValueError, AttributeError, TypeError):
            served = []
    if cfg.model is None:
        if not served:
            raise ProfileError(f"{models_url} lists no models: pass -m/--model")
        return served[0]
    if served and cfg.model not in served:
        raise ProfileError(
            f"model {cfg.model!r} (-m/--model) is not served by {target.base_url}; "
            f"it serves: {', '.join(served)}"
        )
    return cfg.model


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
    texts = [r.output_text or "" for r in with_text]
    batch = getattr(tokenizer, "count_batch", None)
    counts = batch(texts) if batch is not None else [tokenizer.count(t) for t in texts]
    for rec, n_out in zip(with_text, counts, strict=True):
        rec.output_tokens_client = n_out
        if rec.output_tokens is None:
            rec.output_tokens, rec.output_tokens_source = n_out, SOURCE_TOKENIZER


async def run_profile(
    cfg: ProfileConfig,
    *,
    stop: asyncio.Event | None = None,
    progress: Progress | None = None,
    on_window: Callable[[str], Any] | None = None,
    write: bool = True,
) -> ProfileResult:
    """Measures one load point and (with ``write``) writes its artefacts.

    ``stop`` ends the run early and keeps what completed (``summary.interrupted``).
    ``on_window("start"|"end")`` brackets the measured load, e.g. for telemetry scrapes.
    """
    if cfg.preflight:
        cfg.model = await asyncio.to_thread(preflight, cfg)
    if cfg.model is None:
        raise ProfileError("-m/--model is required when preflight is off")
    wl = cfg.workload
    wl.model = cfg.model
    wl.endpoint_type = cfg.endpoint_type
    wl.streaming = cfg.streaming and cfg.endpoint_type != "embeddings"
    tok = await asyncio.to_thread(
        load_tokenizer, cfg.tokenizer, url=cfg.url, model=cfg.model, headers=cfg.auth_headers()
    )
    total = expected_total(cfg.load)
    # An input file is used whole (up to the requests sent); synthetic prompts are cycled.
    if wl.input_file is not None:
        distinct = total or 1_000_000
    else:
        distinct = min(total or wl.num_prompts, wl.num_prompts)
    prepared = await asyncio.to_thread(workload_mod.build_requests, wl, tok, distinct)
    bodies = [p.body for p in prepared]
    target = Target.from_url(cfg.url, cfg.path(), cfg.auth_headers())
    stop = stop or asyncio.Event()
    progress = progress or Progress()
    collector = cfg.telemetry

    async def window(phase: str) -> None:
        if collector is not None:
            await collector.on_window(phase)
        if on_window is not None:
            await _maybe_await(on_window(phase))

    await window("start")
    try:
        if cfg.load.workers > 1:
            records = await run_load_workers(target, bodies, cfg.load, progress=progress, stop=stop)
        else:
            records = await run_load(target, bodies, cfg.load, progress=progress, stop=stop)
    finally:
        await window("end")
    count_client_tokens(records, tok if cfg.tokenizer != "server" else None, prepared)
    streaming = wl.streaming
    summary = summarize(records, streaming=streaming, slo=cfg.goodput or None)
    summary.interrupted = stop.is_set()
    summary.client = client_health(progress.loop_lag_ms, cfg.load.workers)
    summary.input_config = cfg.public_dict()
    result = getattr(collector, "result", None)
    if result is not None:
        measured_osl = sum(r.output_tokens or 0 for r in records if r.ok and not r.warmup)
        summary.telemetry = telemetry_section(
            result, records, output_tokens=measured_osl, window_s=summary.window.duration_s
        )
    out_dir = cfg.resolved_artifact_dir() if write else None
    if out_dir is not None:
        inputs = workload_mod.inputs_json(prepared)
        write_profile_artifacts(out_dir, records, summary, inputs)
        if result is not None:
            await asyncio.to_thread(plot_telemetry, result, out_dir / "telemetry.png")
    return ProfileResult(summary, records, out_dir)


#: Event-loop lag (ms) above which the client's own timestamps are called into doubt: late
#: one probe in ten (p90) means the loop stopped keeping up; a p99 this high means stalls
#: long enough to matter. Below them, closed-loop slots finishing together cause short,
#: harmless bursts.
LOOP_LAG_WARN_P90_MS = 2.0
LOOP_LAG_WARN_P99_MS = 10.0


def client_health(lag_ms: list[float], workers: int) -> ClientHealth:
    """How busy the measuring loop was, with a warning when its stamps may run late.

    Every read is stamped when the loop gets to it; a loop that wakes its timers late
    would have stamped arrivals late by about as much.
    """
    lag = stats(lag_ms)
    warnings = []
    if lag is not None and (lag.p90 > LOOP_LAG_WARN_P90_MS or lag.p99 > LOOP_LAG_WARN_P99_MS):
        warnings.append(
            f"the client's event loop could not keep up (lag p90 {lag.p90:.1f} ms, p99 "
            f"{lag.p99:.1f} ms): arrival stamps may be late by as much; split the load "
            f"with --workers {workers + 1} or more"
        )
    return ClientHealth(workers=workers, loop_lag_ms=lag, warnings=warnings)


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
