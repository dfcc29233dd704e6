"""Per-point metrics with GenAI-Perf semantics, computed from request records only.

Definitions (see DESIGN.md):
* TTFT = first non-empty content received − request sent; e2e = last content − sent.
* ITL = (e2e − TTFT) / (OSL − 1); requests with OSL ≤ 1 have no ITL.
* OTT = Σ OSL / (T_y − T_x), RPS = completed / (T_y − T_x), where T_x is the first measured
  send and T_y the last token of the last measured request. Warm-up records never count.
* Goodput = completed requests meeting every SLO / (T_y − T_x).
* Inter-chunk gaps are reported under their own name: with multi-token chunks they are not ITL.
* Open loop: TTFT and e2e also from the *scheduled* send (``…_from_schedule`` = the figure +
  dispatch lag), and goodput judged from there, since a user waits from the schedule
  (coordinated omission otherwise hides a client that fell behind); see docs/metrics.md.
* Reasoning (answers with ``reasoning_content`` / ``reasoning`` deltas): TTFT stays the first
  token of either kind; time to the first reasoning and to the first answer token, reasoning
  and answer token counts and the answer's ITL are reported beside it, only when some answer
  reasoned, so other points' files stay as they were.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from llmbench.api.results import (
    Connects,
    Count,
    Dispatch,
    ErrorKind,
    Errors,
    Figure,
    Goodput,
    InterArrival,
    PointResult,
    Stat,
    TokenCounts,
    Window,
)
from llmbench.runner.client.records import SOURCE_SERVER, RequestRecord

_PCTS = (1, 5, 10, 25, 50, 75, 90, 95, 99)

#: SLO keys accepted by ``--goodput``: ceilings in milliseconds, except ``otpu`` (output
#: tokens per second per request, 1000 / ITL in ms), which is a floor.
SLO_KEYS = ("ttft", "itl", "e2e", "ttst", "otpu")


def stats(values: Iterable[float], unit: str | None = None) -> Stat | None:
    """avg/min/max/percentiles/std of ``values``; None for an empty set (reported as N/A).

    Percentiles interpolate linearly and std is the population std, as numpy (and so
    GenAI-Perf) computes them by default. ``unit`` is left unset for internal figures (lags),
    which the JSON lists without one.
    """
    arr = np.fromiter(values, dtype=np.float64)
    if arr.size == 0:
        return None
    pct = np.percentile(arr, _PCTS)
    out: dict[str, Any] = {"avg": float(arr.mean()), "min": float(arr.min())}
    out["max"] = float(arr.max())
    for p, v in zip(_PCTS, pct, strict=True):
        out[f"p{p}"] = float(v)
    out["std"] = float(arr.std())
    return Stat(**out) if unit is None else Stat(unit=unit, **out)


@dataclass(frozen=True, slots=True)
class PerRequest:
    """Derived per-request latencies in ms (None where undefined)."""

    ttft_ms: float | None
    e2e_ms: float
    itl_ms: float | None
    ttst_ms: float | None
    osl: int | None
    isl: int | None
    #: open loop: TTFT and e2e from the scheduled send (None in closed loop)
    ttft_from_schedule_ms: float | None = None
    e2e_from_schedule_ms: float | None = None
    #: reasoning: the request's answer carried reasoning (else the fields below are unset)
    reasoned: bool = False
    ttfr_ms: float | None = None
    ttfa_ms: float | None = None
    reasoning_tokens: int | None = None
    answer_tokens: int | None = None
    answer_itl_ms: float | None = None

    def judged(self) -> PerRequest:
        """The latencies a user waits, for SLOs: from the scheduled send where there is one."""
        if self.e2e_from_schedule_ms is None:
            return self
        return replace(
            self, ttft_ms=self.ttft_from_schedule_ms, e2e_ms=self.e2e_from_schedule_ms
        )


def per_request(rec: RequestRecord, streaming: bool) -> PerRequest:
    """Latencies of one completed request."""
    assert rec.last_token_ns is not None
    e2e = (rec.last_token_ns - rec.sent_ns) / 1e6
    lag = None if rec.scheduled_ns is None else (rec.sent_ns - rec.scheduled_ns) / 1e6
    osl = rec.output_tokens if rec.output_tokens is not None else rec.output_tokens_client
    isl = rec.input_tokens if rec.input_tokens is not None else rec.input_tokens_client
    ttft = itl = ttst = None
    if streaming and rec.first_token_ns is not None:
        ttft = (rec.first_token_ns - rec.sent_ns) / 1e6
        if osl is not None and osl > 1:
            itl = (e2e - ttft) / (osl - 1)
        if len(rec.chunk_ns) > 1:
            ttst = (rec.chunk_ns[1] - rec.chunk_ns[0]) / 1e6
    out = PerRequest(ttft, e2e, itl, ttst, osl, isl)
    if lag is not None:
        out = replace(
            out,
            ttft_from_schedule_ms=None if ttft is None else ttft + lag,
            e2e_from_schedule_ms=e2e + lag,
        )
    return reasoning_split(rec, out, streaming) if rec.reasoned else out


def reasoning_split(rec: RequestRecord, pr: PerRequest, streaming: bool) -> PerRequest:
    """``pr`` with the reasoning/answer split of a request whose answer reasoned.

    Time to the first reasoning / answer token from the send (streaming only; no answer
    text: no TTFA). Answer tokens = OSL − reasoning tokens; the answer's ITL =
    (e2e − TTFA) / (answer tokens − 1), as ITL is over the whole output.
    """
    ttfr = ttfa = answer_itl = None
    if streaming and rec.first_reasoning_ns is not None:
        ttfr = (rec.first_reasoning_ns - rec.sent_ns) / 1e6
        if rec.first_answer_ns is not None:
            ttfa = (rec.first_answer_ns - rec.sent_ns) / 1e6
    elif streaming:  # the usage counted reasoning but none came as its own deltas
        ttfa = pr.ttft_ms
    thought = rec.reasoning_tokens
    answer = None if thought is None or pr.osl is None else max(pr.osl - thought, 0)
    if ttfa is not None and answer is not None and answer > 1:
        answer_itl = (pr.e2e_ms - ttfa) / (answer - 1)
    return replace(
        pr, reasoned=True, ttfr_ms=ttfr, ttfa_ms=ttfa, reasoning_tokens=thought,
        answer_tokens=answer, answer_itl_ms=answer_itl,
    )


def meets_slo(pr: PerRequest, slo: dict[str, float]) -> bool:
    """True when the request meets every SLO; an undefined metric (ITL of OSL 1) cannot fail.

    Latencies must not exceed their limit; ``otpu`` (GenAI-Perf's
    ``output_token_throughput_per_user`` = 1 / ITL) must reach its limit.
    """
    otpu = 1000.0 / pr.itl_ms if pr.itl_ms else None
    values = {"ttft": pr.ttft_ms, "itl": pr.itl_ms, "e2e": pr.e2e_ms, "ttst": pr.ttst_ms}
    for key, limit in slo.items():
        if key == "otpu":
            if otpu is not None and otpu < limit:
                return False
            continue
        value = values[key]
        if value is not None and value > limit:
            return False
    return True


def window(records: Sequence[RequestRecord]) -> tuple[int, int] | None:
    """(T_x, T_y) in ns over measured records, or None if nothing completed."""
    measured = [r for r in records if not r.warmup]
    ends = [r.last_token_ns for r in measured if r.ok and r.last_token_ns is not None]
    if not measured or not ends:
        return None
    return min(r.sent_ns for r in measured), max(ends)


def summarize(
    records: Sequence[RequestRecord],
    *,
    streaming: bool,
    slo: dict[str, float] | None = None,
    unrecorded_errors: Mapping[str, int] | None = None,
) -> PointResult:
    """All point metrics, the model of ``profile_export_genai_perf.json``.

    Keys follow GenAI-Perf (``time_to_first_token``, ``inter_token_latency``, …) so existing
    tooling can read our exports; our additions (errors, token provenance, inter-chunk gaps,
    dispatch lag) sit beside them under names of their own. The profile runner adds what only
    it knows (``interrupted``, ``client``, ``input_config``, ``telemetry``).
    """
    measured = [r for r in records if not r.warmup]
    ok = [r for r in measured if r.ok]
    win = window(records)
    duration = (win[1] - win[0]) / 1e9 if win else 0.0
    derived = [per_request(r, streaming) for r in ok]

    def per_second(n: float) -> float | None:
        return n / duration if duration else None

    def streamed(unit: str, values: Iterable[float | None]) -> Stat | None:
        return stats((v for v in values if v is not None), unit) if streaming else None

    optional: dict[str, Any] = {}
    open_loop = any(d.e2e_from_schedule_ms is not None for d in derived)
    if slo:
        good = sum(1 for d in derived if meets_slo(d.judged(), slo))
        optional["goodput"] = Goodput(
            unit="requests/sec", avg=per_second(good), slo=dict(slo), good_requests=good,
            latency_from="schedule" if open_loop else "send",
        )
    if open_loop:
        optional["time_to_first_token_from_schedule"] = streamed(
            "ms", (d.ttft_from_schedule_ms for d in derived)
        )
        optional["request_latency_from_schedule"] = stats(
            (d.e2e_from_schedule_ms for d in derived if d.e2e_from_schedule_ms is not None), "ms"
        )
    if streaming:
        gaps = ((b - a) / 1e6 for r in ok for a, b in zip(r.chunk_ns, r.chunk_ns[1:], strict=False))
        optional["inter_chunk_gap"] = stats(gaps, "ms")
    if any(d.reasoned for d in derived):
        optional.update(reasoning_metrics(derived, streaming))
    lag = [(r.sent_ns - r.scheduled_ns) / 1e6 for r in measured if r.scheduled_ns is not None]
    lag_stats = stats(lag)
    if lag_stats is not None:
        sends = sorted(r.sent_ns for r in measured)
        span = (sends[-1] - sends[0]) / 1e9
        optional["dispatch"] = Dispatch(
            lag_ms=lag_stats,
            achieved_request_rate=(len(sends) - 1) / span if span > 0 else None,
            scheduled_gaps=inter_arrival(
                [r.scheduled_ns for r in measured if r.scheduled_ns is not None]
            ),
            achieved_gaps=inter_arrival(sends),
        )
    connects = [r.connect_ns / 1e6 for r in measured if r.connect_ns is not None]
    connect_stats = stats(connects, "ms")
    if connect_stats is not None:
        optional["connects"] = Connects(requests=len(connects), ms=connect_stats)
    return PointResult(
        request_throughput=Figure(unit="requests/sec", avg=per_second(len(ok))),
        request_latency=stats((d.e2e_ms for d in derived), "ms"),
        time_to_first_token=streamed("ms", (d.ttft_ms for d in derived)),
        time_to_second_token=streamed("ms", (d.ttst_ms for d in derived)),
        inter_token_latency=streamed("ms", (d.itl_ms for d in derived)),
        output_token_throughput_per_user=streamed(
            "tokens/sec/user", (1000.0 / d.itl_ms for d in derived if d.itl_ms)
        ),
        output_sequence_length=stats((d.osl for d in derived if d.osl is not None), "tokens"),
        input_sequence_length=stats((d.isl for d in derived if d.isl is not None), "tokens"),
        output_token_throughput=Figure(
            unit="tokens/sec", avg=per_second(sum(d.osl or 0 for d in derived))
        ),
        request_count=Count(unit="count", avg=len(ok)),
        errors=error_summary(measured, unrecorded_errors),
        token_counts=token_provenance(ok),
        window=Window(
            start_ns=win[0] if win else None,
            end_ns=win[1] if win else None,
            duration_s=duration,
            measured_requests=len(measured) + sum((unrecorded_errors or {}).values()),
            completed_requests=len(ok),
            warmup_requests=len(records) - len(measured),
        ),
        **optional,
    )


def reasoning_metrics(derived: Sequence[PerRequest], streaming: bool) -> dict[str, Stat | None]:
    """The reasoning fields of a point where some answer reasoned.

    A request whose answer did not reason counts as what it is: its first token was its
    first answer token (TTFA = TTFT), none of its tokens reasoned (answer = OSL), its answer
    ITL is its ITL. Time to the first reasoning token is over the requests that reasoned.
    """

    def answer_of(d: PerRequest) -> tuple[float | None, int | None, float | None]:
        if d.reasoned:
            return d.ttfa_ms, d.answer_tokens, d.answer_itl_ms
        return d.ttft_ms, d.osl, d.itl_ms

    split = [answer_of(d) for d in derived]

    def ms(values: Iterable[float | None]) -> Stat | None:
        return stats((v for v in values if v is not None), "ms")

    out = {
        "reasoning_token_count": stats(
            (n for n in (d.reasoning_tokens if d.reasoned else 0 for d in derived)
             if n is not None), "tokens"
        ),
        "answer_token_count": stats((n for _, n, _ in split if n is not None), "tokens"),
    }
    if streaming:  # without streaming the times are absent, as TTFT is
        out["time_to_first_reasoning_token"] = ms(d.ttfr_ms for d in derived if d.reasoned)
        out["time_to_first_answer_token"] = ms(ttfa for ttfa, _, _ in split)
        out["answer_inter_token_latency"] = ms(itl for _, _, itl in split)
    return out


def inter_arrival(stamps_ns: Sequence[int]) -> InterArrival | None:
    """Mean (ms) and CV of the gaps between consecutive sends; None under three sends."""
    if len(stamps_ns) < 3:
        return None
    gaps = np.diff(np.sort(np.asarray(stamps_ns, dtype=np.float64))) / 1e6
    mean = float(gaps.mean())
    return InterArrival(
        gaps=int(gaps.size), mean_ms=mean, cv=float(gaps.std() / mean) if mean > 0 else 0.0
    )


def error_summary(
    records: Iterable[RequestRecord], unrecorded: Mapping[str, int] | None = None
) -> Errors:
    """Errors by type with a count and one sample message each; never dropped silently.

    ``unrecorded`` adds, per type, the failures that were counted but not kept as records
    (see ``LoadConfig.error_records_kept``); they are part of ``count`` and said apart.
    """
    unrecorded = {k: v for k, v in (unrecorded or {}).items() if v}
    counts: Counter[str] = Counter(unrecorded)
    samples: dict[str, str] = {}
    for r in records:
        if r.error_type is not None:
            counts[r.error_type] += 1
            samples.setdefault(r.error_type, (r.error_message or "")[:300])
        elif r.last_token_ns is None:
            counts["incomplete"] += 1
            samples.setdefault("incomplete", "request did not finish before the run ended")
    return Errors(
        total=sum(counts.values()),
        by_type={
            k: ErrorKind(count=v, sample=samples.get(k, ""))
            if k not in unrecorded
            else ErrorKind(count=v, sample=samples.get(k, ""), unrecorded=unrecorded[k])
            for k, v in sorted(counts.items())
        },
    )


def token_provenance(ok: Iterable[RequestRecord]) -> TokenCounts:
    """Where ISL/OSL came from and how often the client's tokenizer disagreed with the server."""
    osl_src: Counter[str] = Counter()
    isl_src: Counter[str] = Counter()
    osl_mismatch = isl_mismatch = 0
    for r in ok:
        osl_src[r.output_tokens_source or "unknown"] += 1
        isl_src[r.input_tokens_source or "unknown"] += 1
        if (
            r.output_tokens_source == SOURCE_SERVER
            and r.output_tokens_client is not None
            and r.output_tokens_client != r.output_tokens
        ):
            osl_mismatch += 1
        if (
            r.input_tokens_source == SOURCE_SERVER
            and r.input_tokens_client is not None
            and r.input_tokens_client != r.input_tokens
        ):
            isl_mismatch += 1
    return TokenCounts(
        output_tokens_source=dict(osl_src),
        input_tokens_source=dict(isl_src),
        output_tokens_mismatch=osl_mismatch,
        input_tokens_mismatch=isl_mismatch,
    )


def itl_by_position(records: Iterable[RequestRecord]) -> list[float]:
    """Mean inter-chunk gap (ms) at each chunk position across requests, for position plots."""
    sums: list[float] = []
    counts: list[int] = []
    for r in records:
        if r.warmup or not r.ok:
            continue
        for i, (a, b) in enumerate(zip(r.chunk_ns, r.chunk_ns[1:], strict=False)):
            if i == len(sums):
                sums.append(0.0)
                counts.append(0)
            sums[i] += (b - a) / 1e6
            counts[i] += 1
    return [s / c for s, c in zip(sums, counts, strict=True)]
