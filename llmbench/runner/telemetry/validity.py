"""Facts that cast doubt on a point's numbers, each with the numbers behind it.

Why this module exists: a latency figure is only as good as the conditions it was measured in.
Server-side telemetry can show what the client cannot: someone else's traffic on the server, a
full queue or KV cache, token counts that disagree, GPU samples too coarse to trust; the client
adds its own dispatch lag. :func:`validity_signals` turns those into ``warning``/``error``
signals stored with the point (``profile_export_genai_perf.json["telemetry"]["validity"]``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal

from llmbench.api.results import ValiditySignal
from llmbench.runner.telemetry.model import TelemetryResult

__all__ = ["COUNT_TOLERANCE", "count_tolerance", "sum_or_none", "validity_signals"]

#: Server and client counts (completed requests, generated tokens) may differ by this fraction
#: of the client's count (at least 1) before it is a finding: a request or a few tokens at the
#: window's edges is not a verdict on the point.
COUNT_TOLERANCE = 0.01


def count_tolerance(client_count: float) -> float:
    """How far a server count may stray from the client's ``client_count`` unremarked."""
    return float(max(1, math.ceil(COUNT_TOLERANCE * client_count)))


def _signal(
    signal: str, severity: Literal["warning", "error"], message: str, **numbers: Any
) -> ValiditySignal:
    return ValiditySignal(signal=signal, severity=severity, message=message, numbers=numbers)


def validity_signals(
    result: TelemetryResult,
    *,
    client_completed: int | None = None,
    client_output_tokens: int | None = None,
    token_mismatch_count: int | None = None,
    dispatch_lag_p99_ms: float | None = None,
    dispatch_lag_threshold_ms: float = 10.0,
    foreign_tolerance: int = 0,
) -> list[ValiditySignal]:
    """Facts that cast doubt on a point's numbers, each with the numbers behind it.

    Server-side facts come from ``result``; client-side ones are passed in because only the load
    generator knows them. Each signal is a :class:`ValiditySignal` (signal, severity, message,
    numbers) with severity ``"warning"`` (look at it) or ``"error"`` (the point does not
    measure what it says).

    Args:
        result: the point's telemetry.
        client_completed: requests the client completed (successes and errors that reached the
            server) inside the window; compared with the server's completed-request delta.
        client_output_tokens: Σ OSL the client counted in the window; compared with the server's
            generation-token delta.
        token_mismatch_count: requests whose client token count disagreed with server ``usage``.
        dispatch_lag_p99_ms: p99 of (actual − scheduled send time) in open-loop runs.
        dispatch_lag_threshold_ms: lag above which the client, not the server, set the pace.
        foreign_tolerance: requests whose server-side fate is unknown (errors, aborts): the
            server may or may not count them, so the counts may differ by that many more
            than :func:`count_tolerance` either way.

    The server's counts are the ones scraped once its counters had settled after the load
    (see ``TelemetryCollector``); what still differs is reported as measured: how many, which
    way, and whether the counters had stopped moving, without guessing at the cause.
    """
    out: list[ValiditySignal] = []
    servers = list(result.servers.values())
    settle = [result.settle[s.url] for s in servers if s.url in result.settle]
    settle_s = max((st.seconds for st in settle), default=None)
    settled = all(st.settled for st in settle) if settle else None
    server_completed = sum_or_none(s.requests_completed for s in servers)
    if client_completed is not None and server_completed is not None:
        excess = server_completed - client_completed
        tolerance = count_tolerance(client_completed) + foreign_tolerance
        if excess > tolerance:
            sev: Literal["warning", "error"] = (
                "error" if excess > max(2, 0.05 * client_completed) else "warning"
            )
            out.append(
                _signal(
                    "foreign_traffic",
                    sev,
                    f"the server completed {server_completed:g} requests in the window, the "
                    f"client {client_completed}: {excess:g} came from someone else, so latency "
                    "and throughput include their load",
                    server_completed=server_completed,
                    client_completed=client_completed,
                    excess=excess,
                    tolerance=tolerance,
                )
            )
        elif -excess > tolerance:
            out.append(
                _signal(
                    "server_count_short",
                    "warning",
                    f"the scraped /metrics counted {server_completed:g} completed requests in "
                    f"the window, the client {client_completed}: {-excess:g} of the client's "
                    "requests are missing from the server's counters"
                    f"{_settle_note(settled, settle_s)}; server-side counts and means cover "
                    "only part of this point's load",
                    server_completed=server_completed,
                    client_completed=client_completed,
                    missing=-excess,
                    tolerance=tolerance,
                    settled=settled,
                    settle_s=settle_s,
                )
            )
    waiting = [s.requests_waiting for s in servers if s.requests_waiting.n]
    if waiting:
        w_avg = sum(w.avg or 0.0 for w in waiting)
        w_max = max(w.max or 0.0 for w in waiting)
        if w_max > 0:
            out.append(
                _signal(
                    "server_queueing",
                    "warning",
                    f"requests waited in the server queue (avg {w_avg:.2f}, max {w_max:g}): "
                    "TTFT includes queueing, the server is at capacity for this load",
                    waiting_avg=w_avg,
                    waiting_max=w_max,
                )
            )
    kv = [s.kv_cache_usage.max for s in servers if s.kv_cache_usage.max is not None]
    if kv and max(kv) >= 0.99:
        out.append(
            _signal(
                "kv_cache_full",
                "warning",
                f"KV cache usage reached {max(kv) * 100:.1f} %: the server preempts or queues",
                kv_cache_usage_max=max(kv),
            )
        )
    server_tokens = sum_or_none(s.generation_tokens for s in servers)
    if client_output_tokens is not None and server_tokens is not None and client_output_tokens:
        diff = server_tokens - client_output_tokens
        if abs(diff) > count_tolerance(client_output_tokens):
            out.append(
                _signal(
                    "token_count_mismatch",
                    "warning",
                    f"the scraped /metrics counted {server_tokens:g} generated tokens in the "
                    f"window, the client {client_output_tokens} ({diff:+g}, "
                    f"{diff / client_output_tokens * 100:+.1f} %)"
                    f"{_settle_note(settled, settle_s) if diff < 0 else ''}",
                    server_generation_tokens=server_tokens,
                    client_output_tokens=client_output_tokens,
                    difference=diff,
                )
            )
    if token_mismatch_count:
        out.append(
            _signal(
                "token_count_mismatch",
                "warning",
                f"{token_mismatch_count} requests: client token count differs from server usage",
                requests=token_mismatch_count,
            )
        )
    stale = [g for g in result.gpus.values() if g.stale]
    if stale:
        out.append(
            _signal(
                "stale_gpu_samples",
                "warning",
                f"{len(stale)} GPU(s) updated slower than scraped; GPU figures are coarse",
                gpus={
                    g.gpu_id: {
                        "scrapes": g.scrapes,
                        "distinct_samples": g.distinct_samples,
                        "effective_resolution_s": g.effective_resolution_s,
                    }
                    for g in stale
                },
            )
        )
    if dispatch_lag_p99_ms is not None and dispatch_lag_p99_ms > dispatch_lag_threshold_ms:
        out.append(
            _signal(
                "dispatch_lag",
                "error",
                f"p99 dispatch lag {dispatch_lag_p99_ms:.1f} ms > {dispatch_lag_threshold_ms:g} "
                "ms: the client could not send at the requested rate",
                dispatch_lag_p99_ms=dispatch_lag_p99_ms,
                threshold_ms=dispatch_lag_threshold_ms,
            )
        )
    return out


def _settle_note(settled: bool | None, seconds: float | None) -> str:
    """How long the server's counters were watched after the load, in words."""
    if settled is None or seconds is None:
        return ""
    if settled:
        return f", though they had stopped moving when re-scraped {seconds:.2f} s after the load"
    return f" and were still moving when re-scraping stopped {seconds:.1f} s after the load"


def sum_or_none(values: Iterable[float | None]) -> float | None:
    """Sum of the values that are present; ``None`` when none is (a missing figure is not 0)."""
    vals = [v for v in values if v is not None]
    return sum(vals) if vals else None
