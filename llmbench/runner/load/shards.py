"""One point driven by several runner pods: each pod's share of the load, and its records on
the wire.

Why these are pure functions beside the load engine: a shard's share must be exactly the
single runner's load cut in N, so it is cut with the worker fan-out's own splitters
(:func:`~llmbench.runner.load.workers.worker_configs`,
:func:`~llmbench.runner.load.workers.split_concurrency`, the request numbering of
:func:`~llmbench.runner.load.workers.split_indices`); and the records a shard measured must
reach the leading shard unchanged (every statistic is recomputed there from the union), so
their encoding is lossless except for one documented trim.

Shard ``i`` of ``N`` takes:

* closed loop: ``split_concurrency(concurrency, N)[i]`` slots (the slots differ by one at
  most; the admission rule ``spec.replicas-split`` keeps every shard at one slot or more);
* requests: the numbers ``i, i+N, i+2N, ...`` of ``warm-up + measured`` (so the counts sum to
  what was asked, warm-up numbers first, and request ``k`` sends the same body as in a single
  runner: same seed, same prompts);
* open loop: rate ``R/N``; Poisson with a seed of its own (independent Poisson processes of
  rate R/N add up to one of rate R), constant rate with phase ``i/R`` (the union is the
  single sender's ``n/R`` schedule); ``maxConcurrency`` split like slots.

``--workers`` inside a pod then splits the shard's share again the same way.

Records on the wire (:func:`pack_records`): one JSON document, zlib-compressed, base64 text
(a ConfigMap value is a string). Times are made relative to the shard's first send and
``chunk_ns`` is delta-encoded, which is what makes them compress. When the text exceeds its
budget, ``chunk_ns`` is cut to the first two arrivals and the last one (TTFT, TTST, e2e and
ITL = (e2e - TTFT)/(OSL - 1) need nothing else): what is lost are the inter-chunk gaps and
the ITL-by-position plot, and the merged point drops its ``inter_chunk_gap`` statistic rather
than report one from the trimmed gaps.
"""

from __future__ import annotations

import base64
import json
import zlib
from array import array
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from llmbench.api.results import ShardLoad
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.workers import split_concurrency, worker_configs

__all__ = [
    "PACK_VERSION",
    "SHARD_SEED_STRIDE",
    "pack_records",
    "shard_config",
    "shard_load",
    "skew_estimate",
    "start_spread_ms",
    "shift_records",
    "unpack_records",
]

#: A shard's schedule seed is ``seed + SHARD_SEED_STRIDE * shard``: its workers add 0..W-1,
#: so no two senders of a point share a seed (W stays far below the stride).
SHARD_SEED_STRIDE = 1 << 16
PACK_VERSION = 1

# Record fields in wire order; token sources are coded as small ints.
_TIMES = ("scheduled_ns", "sent_ns", "first_token_ns", "last_token_ns", "first_reasoning_ns",
          "first_answer_ns")
_FIELDS = (
    "index", "warmup", "worker", "scheduled_ns", "sent_ns", "first_token_ns", "last_token_ns",
    "chunk_ns", "input_tokens", "input_tokens_source", "input_tokens_client", "output_tokens",
    "output_tokens_source", "output_tokens_client", "requested_output_tokens", "status",
    "error_type", "error_message", "loop_stall_ms", "connect_ns", "first_reasoning_ns",
    "first_answer_ns", "reasoning_tokens", "reasoning_tokens_source",
)


def shard_config(cfg: LoadConfig, shard: int, shards: int) -> LoadConfig:
    """Shard ``shard``'s share of the point's load ``cfg`` (see the module docstring);
    ``shards`` 1 returns ``cfg`` unchanged."""
    if shards <= 1:
        return cfg
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} is not one of 0..{shards - 1}")
    part = worker_configs(cfg, shards)[shard]  # rate/N, maxConcurrency split, phase i/R
    slots = split_concurrency(cfg.concurrency, shards)[shard] if cfg.mode == "concurrency" \
        else cfg.concurrency
    return replace(
        part,
        concurrency=max(1, slots),
        seed=cfg.seed + SHARD_SEED_STRIDE * shard,
        shard=shard,
        shards=shards,
    )


def shift_records(records: Sequence[RequestRecord], delta_ns: int) -> None:
    """Adds ``delta_ns`` to every timestamp of ``records`` (in place): from a shard's clock
    to the leader's."""
    if not delta_ns:
        return
    for r in records:
        for name in _TIMES:
            value = getattr(r, name)
            if value is not None:
                setattr(r, name, value + delta_ns)
        r.chunk_ns = array("q", [t + delta_ns for t in r.chunk_ns])


def _row(r: RequestRecord, base: int, trim: bool) -> list[Any]:
    chunks: Sequence[int] = r.chunk_ns
    if trim and len(chunks) > 3:
        chunks = [chunks[0], chunks[1], chunks[-1]]
    deltas = [c - p for p, c in zip([base, *chunks], chunks, strict=False)]
    row: list[Any] = []
    for name in _FIELDS:
        if name == "chunk_ns":
            row.append(deltas)
        elif name in _TIMES:
            value = getattr(r, name)
            row.append(None if value is None else value - base)
        else:
            row.append(getattr(r, name))
    return row


def _encode(doc: dict[str, Any]) -> str:
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def pack_records(
    records: Sequence[RequestRecord], budget: int | None = None
) -> tuple[str, bool]:
    """``(text, trimmed)``: the records as compact, compressed base64 text; over ``budget``
    characters the chunk arrivals are trimmed (see the module docstring) and ``trimmed`` is
    True. The text may still exceed the budget: nothing else can go without losing a
    statistic, so the store decides (a refused write fails the point, saying why)."""
    base = min((r.sent_ns for r in records), default=0)
    doc: dict[str, Any] = {"v": PACK_VERSION, "base": base, "fields": list(_FIELDS)}
    doc["rows"] = [_row(r, base, False) for r in records]
    text = _encode(doc)
    if budget is None or len(text) <= budget or not any(len(r.chunk_ns) > 3 for r in records):
        return text, False
    doc["rows"] = [_row(r, base, True) for r in records]
    doc["trimmed"] = True
    return _encode(doc), True


def unpack_records(text: str) -> list[RequestRecord]:
    """The records of :func:`pack_records`' text, in the sender's own clock."""
    try:
        doc = json.loads(zlib.decompress(base64.b64decode(text.encode("ascii"))))
    except (ValueError, zlib.error) as exc:
        raise ValueError(f"shard records are not a packed record set: {exc}") from None
    if not isinstance(doc, dict) or doc.get("v") != PACK_VERSION:
        raise ValueError("shard records: unknown format version")
    base = int(doc["base"])
    names = doc["fields"]
    out = []
    for row in doc["rows"]:
        d = dict(zip(names, row, strict=True))
        for name in _TIMES:
            if d.get(name) is not None:
                d[name] += base
        t = base
        chunks = []
        for gap in d.get("chunk_ns") or []:
            t += gap
            chunks.append(t)
        d["chunk_ns"] = chunks
        out.append(RequestRecord.from_json(d))
    return out


def _p99(values: Sequence[float]) -> float | None:
    return float(np.percentile(np.asarray(values, dtype=np.float64), 99)) if values else None


def shard_load(
    shard: int,
    records: Sequence[RequestRecord],
    window: tuple[int, int] | None,
    *,
    target: float,
    node: str | None = None,
    first_send_ns: int | None = None,
    loop_lag_ms: Sequence[float] = (),
    trimmed: bool = False,
) -> ShardLoad:
    """What shard ``shard`` achieved over the merged window ``(T_x, T_y)`` (ns, the leader's
    clock): its measured requests, their mean number in flight (the time its requests spent
    in flight inside the window / the window) and completed rate; ``first_send_ns`` is the
    earliest first send of all shards, its own first send is reported relative to it."""
    measured = [r for r in records if not r.warmup]
    done = [r for r in measured if r.ok]
    in_flight = rps = None
    if window is not None and window[1] > window[0]:
        lo, hi = window
        busy = 0
        for r in measured:
            end = r.last_token_ns if r.last_token_ns is not None else hi
            busy += max(0, min(end, hi) - max(r.sent_ns, lo))
        in_flight = busy / (hi - lo)
        rps = len(done) / ((hi - lo) / 1e9)
    first = min((r.sent_ns for r in records), default=None)
    lag = [(r.sent_ns - r.scheduled_ns) / 1e6 for r in measured if r.scheduled_ns is not None]
    return ShardLoad(
        shard=shard,
        node=node,
        target=target,
        requests=len(measured),
        completed=len(done),
        errors=len(measured) - len(done),
        first_send_ms=(first - first_send_ns) / 1e6
        if first is not None and first_send_ns is not None else None,
        mean_in_flight=in_flight,
        achieved_rps=rps,
        dispatch_lag_p99_ms=_p99(lag),
        loop_lag_p99_ms=_p99(loop_lag_ms),
        chunks_trimmed=trimmed,
    )


def start_spread_ms(first_sends: Sequence[int | None]) -> float | None:
    """max - min of the shards' first sends (ns, one clock), in ms; None with fewer than two."""
    known = [t for t in first_sends if t is not None]
    return (max(known) - min(known)) / 1e6 if len(known) > 1 else None


def skew_estimate(t1: int, t2: int, t3: int, t4: int) -> tuple[float, float]:
    """``(offset_ms, uncertainty_ms)`` of the leader's realtime clock minus a shard's, from
    the barrier's exchange, as NTP estimates it: the shard said ready at ``t1`` (its clock),
    the leader saw it at ``t2`` and published the start at ``t3`` (its clock), the shard saw
    the start at ``t4`` (its clock). The true offset lies within ``uncertainty`` of the
    estimate (half the round trip, polling waits included), however asymmetric the paths."""
    offset = ((t2 - t1) + (t3 - t4)) / 2
    round_trip = (t4 - t1) - (t3 - t2)
    return offset / 1e6, max(0, round_trip) / 2e6
