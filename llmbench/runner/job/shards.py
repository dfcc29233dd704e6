"""Several runner pods driving each point together, coordinated through the run's store.

Why the store and not a protocol of our own: the pods of an Indexed Job share nothing but the
results ConfigMap, which their service account may ``get``/``patch`` and nothing else, and
Kubernetes already restarts a dead pod with its index. So the barrier, the records and the
result all go through keys of that one object (listed in :mod:`llmbench.api.job`):

1. every shard prepares the point (preflight, prompts), then writes ``shard.<p>.ready.<i>``
   (its process ``boot`` id and the ``after`` attempt it last took part in);
2. shard 0 polls until every other shard is ready for a new attempt, then writes
   ``shard.<p>.start``: the attempt number, the ``boots`` taking part and a realtime instant
   :attr:`ShardTiming.lead_s` ahead; every shard (its workers too) begins on that instant;
3. each follower packs its records (:func:`~llmbench.runner.load.shards.pack_records`) into
   ``shard.<p>.rec.<attempt>.<i>``, in the same write as its ready key for a repeat (its last
   write for the point: nothing can land after shard 0 removes the keys); shard 0 waits for
   all of them, moves them onto its clock (one node: the shared monotonic clock, as is;
   across nodes: through each pod's realtime offset, sampled once), merges them with its
   own, and the point is summarised, written and scraped (telemetry: shard 0 only) exactly
   as a single runner's;
4. followers take the merged result from the store (``checkpoint.json`` names the point, its
   ``point.<name>.json`` holds it), so every pod's sweep takes the same decisions (stop after
   the knee, stop on a failed point) without computing them apart;
5. shard 0 removes the point's ``shard.`` keys after writing the result.

A shard that dies is restarted by the Job with a new ``boot`` id: shard 0 sees the new ready
key, drops that attempt (its records are never read: keys carry the attempt) and runs the point
again, once per failure (at most :attr:`ShardTiming.max_repeats` times); the point then says
it was repeated and why. A restarted shard 0 resumes from the checkpoint like a single runner
and starts the interrupted point's next attempt.

Polling is bounded: a read every ``poll_first_s``, growing by half up to ``poll_max_s``, until
a deadline; every store call is counted and reported with the point.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llmbench.api.job import (
    CHECKPOINT_KEY,
    DIGEST_KEY,
    SHARD_PREFIX,
    point_key,
    shard_key,
)
from llmbench.api.results import PointResult, Shards
from llmbench.runner.artifacts.layout import GENAI_PERF_JSON
from llmbench.runner.artifacts.write import write_atomic
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.job.store import ResultsStore, StoreError
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.result import LoadResult, Progress, merge_results
from llmbench.runner.load.shards import (
    pack_records,
    shard_config,
    shard_load,
    shift_records,
    skew_estimate,
    start_spread_ms,
    unpack_records,
)
from llmbench.runner.load.stalls import Stall
from llmbench.runner.point.config import ProfileConfig
from llmbench.runner.point.metrics import summarize, window
from llmbench.runner.point.preflight import ProfileError
from llmbench.runner.point.profile import ProfileResult, run_profile

__all__ = [
    "CONFIGMAP_LIMIT",
    "SKEW_BOUND_FRACTION",
    "Coordinator",
    "IncompleteAttempt",
    "ShardTiming",
]

log = logging.getLogger("llmbench.job")

#: Bytes a ConfigMap may hold (the API server's object limit is 1 MiB).
CONFIGMAP_LIMIT = 1 << 20
#: Kept free of records for the object's metadata and the runner's other keys.
RECORDS_MARGIN = 96 * 1024
#: A start spread or a clock skew above this fraction of the window warns: T_x/T_y (and so
#: OTT and RPS) can be off by that much, which is the 1 % the error rate is held to too.
SKEW_BOUND_FRACTION = 0.01


@dataclass(frozen=True)
class ShardTiming:
    """How the shards wait for each other.

    ``lead_s``: the start instant is published this far ahead (more than a follower's
    slowest poll, so all see it in time), plus ``workers_lead_s`` when pods run ``--workers``
    processes (they start then). Polls start at ``poll_first_s`` and grow by half up to
    ``poll_max_s``. ``barrier_timeout_s`` bounds the wait for every shard to be ready (pods
    being scheduled, images pulled); ``records_timeout_s`` bounds the wait for the records
    after the leader's own load (plus its own load's duration). ``max_repeats``: attempts a
    point may be repeated after a shard failed.
    """

    lead_s: float = 1.0
    workers_lead_s: float = 3.0
    poll_first_s: float = 0.02
    poll_max_s: float = 0.4
    barrier_timeout_s: float = 900.0
    records_timeout_s: float = 120.0
    max_repeats: int = 3


class IncompleteAttempt(Exception):
    """An attempt of a point lacks a shard's records; the message says which and why."""


class _PointDone(Exception):
    """The leader published the point: a follower takes its result."""

    def __init__(self, summary: PointResult | None, reason: str | None) -> None:
        super().__init__(reason or "done")
        self.summary = summary
        self.reason = reason


class _Stopped(Exception):
    """The pod was told to stop while waiting."""


def _now() -> int:
    return time.time_ns()


def _loads(text: str | None) -> dict[str, Any] | None:
    if text is None:
        return None
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def _stall_doc(stall: Stall | None) -> dict[str, Any] | None:
    if stall is None:
        return None
    return {"start_ns": stall.start_ns, "ms": stall.ms, "worker": stall.worker,
            "overlapped_requests": stall.overlapped_requests, "cpu_ms": stall.cpu_ms}


def _interrupted(cfg: ProfileConfig) -> ProfileResult:
    summary = summarize([], streaming=cfg.streaming)
    summary.interrupted = True
    return ProfileResult(summary, [], None)


@dataclass
class Coordinator:
    """One pod's side of the several-pod protocol (see the module docstring).

    ``store`` is the run's store, ``shard`` this pod's index (0 leads) of ``replicas``;
    ``node`` its node name (shards on the leader's node share its monotonic clock).
    """

    store: ResultsStore
    shard: int
    replicas: int
    node: str | None = None
    timing: ShardTiming = field(default_factory=ShardTiming)
    boot: str = field(default_factory=lambda: uuid.uuid4().hex[:12])
    #: realtime minus monotonic, sampled once: this pod's clock onto the shared realtime base
    offset_ns: int = field(default_factory=lambda: time.time_ns() - time.perf_counter_ns())
    calls: int = 0
    last_size: int = 0

    @property
    def leader(self) -> bool:
        return self.shard == 0

    # -- the store, counted -----------------------------------------------------------------

    def read(self) -> dict[str, str]:
        self.calls += 1
        data = self.store.read()
        self.last_size = sum(len(k) + len(v) for k, v in data.items())
        return data

    def write(self, updates: dict[str, str]) -> None:
        self.calls += 1
        self.store.write(updates)

    def delete(self, keys: list[str]) -> None:
        if keys:
            self.calls += 1
            self.store.delete(keys)

    async def poll(
        self,
        check: Callable[[dict[str, str]], Any],
        stop: asyncio.Event,
        timeout_s: float,
        what: str,
        *,
        poll_max_s: float | None = None,
    ) -> Any:
        """Reads the store until ``check(data)`` returns something other than None, with
        bounded backoff; :class:`_Stopped` on ``stop``, :class:`TimeoutError` past the
        deadline (naming ``what``)."""
        deadline = time.monotonic() + timeout_s
        pause = self.timing.poll_first_s
        cap = poll_max_s if poll_max_s is not None else self.timing.poll_max_s
        while True:
            if stop.is_set():
                raise _Stopped(what)
            try:
                data = await asyncio.to_thread(self.read)
            except StoreError as exc:
                log.warning("shard %d: %s (while waiting for %s)", self.shard, exc, what)
                data = None
            if data is not None:
                found = check(data)
                if found is not None:
                    return found
            if time.monotonic() > deadline:
                raise TimeoutError(f"no {what} within {timeout_s:g} s")
            try:
                await asyncio.wait_for(stop.wait(), pause)
            except TimeoutError:
                pass
            pause = min(cap, pause * 1.5)

    # -- the sweep's point runner -----------------------------------------------------------

    async def run_point(self, cfg: ProfileConfig, stop: asyncio.Event) -> ProfileResult:
        """The sweep's ``run_point``: this pod's part in one point (see the module)."""
        name = cfg.artifact_dir.name if cfg.artifact_dir is not None else "point"
        if self.leader:
            return await self._lead(name, cfg, stop)
        return await self._follow(name, cfg, stop)

    async def _lead(self, name: str, cfg: ProfileConfig, stop: asyncio.Event) -> ProfileResult:
        repeated: list[str] = []
        for _ in range(self.timing.max_repeats + 1):
            attempt = _LeaderAttempt(self, name, stop, repeated)
            try:
                return await run_profile(cfg, stop=stop, shard=attempt)
            except _Stopped:
                return _interrupted(cfg)
            except IncompleteAttempt as exc:
                log.warning("%s: attempt %s incomplete (%s); repeating the point", name,
                            attempt.attempt, exc)
                repeated.append(f"attempt {attempt.attempt}: {exc}")
            except TimeoutError as exc:
                raise ProfileError(f"the runner shards never all became ready: {exc}") from None
        raise ProfileError(
            f"the point stayed incomplete after {len(repeated)} attempts: {'; '.join(repeated)}"
        )

    async def _follow(
        self, name: str, cfg: ProfileConfig, stop: asyncio.Event
    ) -> ProfileResult:
        after = -1
        ready_t: int | None = None
        while True:
            attempt = _FollowerAttempt(self, name, stop, after, ready_t)
            try:
                pr = await run_profile(cfg, stop=stop, shard=attempt, write=False)
            except _Stopped:
                return _interrupted(cfg)
            except _PointDone as done:
                if done.summary is None:
                    raise ProfileError(done.reason or "the leading shard failed the point") \
                        from None
                if cfg.artifact_dir is not None:  # a local resume finds it, as a leader's
                    cfg.artifact_dir.mkdir(parents=True, exist_ok=True)
                    write_atomic(cfg.artifact_dir / GENAI_PERF_JSON, done.summary.to_json())
                return ProfileResult(done.summary, [], cfg.artifact_dir)
            except TimeoutError as exc:
                raise ProfileError(f"shard {self.shard}: {exc}") from None
            if stop.is_set():
                return pr
            after, ready_t = attempt.attempt, attempt.ready_t
            # the next round usually only learns that the point is done: no probe request
            # now, while shard 0's telemetry window may still be open (it would count it)
            cfg.preflight = False

    # -- cleanup ----------------------------------------------------------------------------

    def cleanup(self, name: str | None = None) -> None:
        """Shard 0: removes a point's ``shard.`` keys (every point's with None)."""
        if not self.leader:
            return
        prefix = shard_key(name) + "." if name is not None else SHARD_PREFIX
        try:
            keys = [k for k in self.read() if k.startswith(prefix)]
            self.delete(keys)
        except StoreError as exc:
            log.warning("cannot remove the shard keys of %s: %s", name or "the run", exc)


class _Attempt:
    """What both roles share in one attempt of one point."""

    def __init__(self, coord: Coordinator, name: str, stop: asyncio.Event) -> None:
        self.c = coord
        self.name = name
        self.stop = stop
        self.attempt = -1
        self.calls0 = coord.calls
        self.full: LoadConfig | None = None

    def split(self, load: LoadConfig) -> LoadConfig:
        self.full = load
        return shard_config(load, self.c.shard, self.c.replicas)

    def target(self, shard: int) -> float:
        """Shard ``shard``'s share as a number: its slots, or its request rate."""
        assert self.full is not None
        part = shard_config(self.full, shard, self.c.replicas)
        if part.mode == "request_rate" and part.request_rate:
            return float(part.request_rate)
        return float(part.concurrency)

    def lead_ns(self, load: LoadConfig) -> int:
        lead = self.c.timing.lead_s + (self.c.timing.workers_lead_s if load.workers > 1 else 0)
        return int(lead * 1e9)

    def annotate(self, summary: PointResult) -> None:
        return None


class _LeaderAttempt(_Attempt):
    def __init__(
        self, coord: Coordinator, name: str, stop: asyncio.Event, repeated: list[str]
    ) -> None:
        super().__init__(coord, name, stop)
        self.repeated = repeated
        self.boots: dict[str, str] = {}
        self.seen: dict[str, int] = {}
        self.t3 = 0
        self.start_rt = 0
        self.last_ready = 0
        self.own_ready = 0
        self.merge_wait_ms: float | None = None
        self.parts: list[dict[str, Any]] = []
        self.own: LoadResult | None = None
        self.targets: list[float] = []

    async def start(self, load: LoadConfig) -> int | None:
        c = self.c
        self.own_ready = _now()
        others = [str(i) for i in range(1, c.replicas)]
        prev = _loads((await asyncio.to_thread(c.read)).get(shard_key(self.name, "start")))
        self.attempt = int(prev["attempt"]) + 1 if prev else 0
        if prev is not None and len(self.repeated) < self.attempt:
            # an earlier process of shard 0 started that attempt and died with its records
            self.repeated.append(f"attempt {prev['attempt']}: shard 0 restarted")
        prev_boots = (prev or {}).get("boots", {})

        def ready(data: dict[str, str]) -> bool | None:
            now = _now()
            missing = 0
            for i in others:
                doc = _loads(data.get(shard_key(self.name, "ready", i)))
                fresh = doc is not None and (
                    prev is None or doc.get("boot") != prev_boots.get(i)
                    or int(doc.get("after", -1)) >= int(prev["attempt"])
                )
                if doc is None or not fresh:
                    missing += 1
                    continue
                if self.boots.get(i) != doc.get("boot"):  # first seen ready (t2 of NTP)
                    self.boots[i] = str(doc.get("boot"))
                    self.seen[i] = now
            return True if not missing else None

        await c.poll(ready, self.stop, c.timing.barrier_timeout_s,
                     f"ready shards for {self.name}")
        self.t3 = _now()
        self.last_ready = max(self.seen.values(), default=self.t3)
        self.start_rt = self.t3 + self.lead_ns(load)
        doc = {"attempt": self.attempt, "at": self.start_rt, "boots": self.boots,
               "seen": self.seen, "t3": self.t3}
        await asyncio.to_thread(c.write, {shard_key(self.name, "start"): json.dumps(doc)})
        return self.start_rt - c.offset_ns

    async def merge(self, load: LoadResult, progress: Progress) -> LoadResult:
        c = self.c
        self.own = load
        if self.stop.is_set():
            return load
        t_own = time.monotonic()
        own_s = (_now() - self.start_rt) / 1e9
        keys = {i: shard_key(self.name, "rec", self.attempt, i) for i in self.boots}

        def arrived(data: dict[str, str]) -> list[dict[str, Any]] | None:
            docs = []
            for i, key in keys.items():
                ready = _loads(data.get(shard_key(self.name, "ready", i)))
                if ready is not None and ready.get("boot") != self.boots[i]:
                    raise IncompleteAttempt(f"shard {i} restarted during the point")
                doc = _loads(data.get(key))
                if doc is None or doc.get("boot") != self.boots[i]:
                    return None
                docs.append(doc)
            return docs

        try:
            parts = await c.poll(arrived, self.stop, c.timing.records_timeout_s + max(0, own_s),
                                 f"records of {self.name}")
        except TimeoutError as exc:
            raise IncompleteAttempt(str(exc)) from None
        self.merge_wait_ms = (time.monotonic() - t_own) * 1e3
        self.parts = parts
        results = [load]
        for doc in parts:
            records = unpack_records(doc["data"])
            same_node = c.node is not None and doc.get("node") == c.node
            # one node: one monotonic clock; else through the realtime clock
            shift_records(records, 0 if same_node else int(doc["offset"]) - c.offset_ns)
            doc["records"] = records
            stall = doc.get("stall")
            results.append(LoadResult(
                records=records,
                unrecorded_errors={k: int(v) for k, v in doc.get("unrecorded", {}).items()},
                stop_reason=doc.get("stop_reason"),
                retry_after_waits=int(doc.get("retry_waits", 0)),
                retry_after_wait_s=float(doc.get("retry_s", 0.0)),
                spilled_requests=int(doc.get("spilled", 0)),
                longest_stall=Stall(**stall) if stall else None,
                loop_lag_ms=[float(x) for x in doc.get("lag", [])],
                event_loop=str(doc.get("event_loop", load.event_loop)),
            ))
            progress.loop_lag_ms.extend(float(x) for x in doc.get("lag", []))
        merged = merge_results(results)
        merged.event_loop = load.event_loop
        return merged

    def annotate(self, summary: PointResult) -> None:
        c = self.c
        own = self.own
        if own is None:
            return
        parts: list[tuple[int, str | None, float, list[RequestRecord], list[float], bool]] = [
            (0, c.node, self.target(0), own.records, own.loop_lag_ms, False)
        ]
        for doc in self.parts:
            i = int(doc["shard"])
            parts.append((i, doc.get("node"), self.target(i), doc.get("records", []),
                          [float(x) for x in doc.get("lag", [])], bool(doc.get("trimmed"))))
        records = [r for p in parts for r in p[3]]
        win = window(records)
        firsts = [min((r.sent_ns for r in p[3]), default=None) for p in parts]
        earliest = min((t for t in firsts if t is not None), default=None)
        loads = [
            shard_load(i, recs, win, target=target, node=node, first_send_ns=earliest,
                       loop_lag_ms=lag, trimmed=trimmed)
            for i, node, target, recs, lag, trimmed in parts
        ]
        skew = unc = 0.0
        for doc in self.parts:
            who = str(doc["shard"])
            if c.node is not None and doc.get("node") == c.node:
                continue
            if who in self.seen and doc.get("t1") and doc.get("t4"):
                off, u = skew_estimate(int(doc["t1"]), self.seen[who], self.t3, int(doc["t4"]))
                if abs(off) >= abs(skew):
                    skew, unc = off, u
        spread = start_spread_ms(firsts)
        bound = summary.window.duration_s * 1e3 * SKEW_BOUND_FRACTION
        warnings = []
        if spread is not None and spread > bound:
            warnings.append(
                f"the shards' first sends spread over {spread:.1f} ms, more than 1 % of the "
                f"{summary.window.duration_s:.2f} s window ({bound:.1f} ms): the shards did "
                "not start together"
            )
        if abs(skew) - unc > bound:
            warnings.append(
                f"a shard's clock is off the leader's by about {skew:.1f} ms (+/- {unc:.1f}), "
                f"more than 1 % of the window ({bound:.1f} ms): sync the nodes' clocks (NTP)"
            )
        trimmed = any(p[5] for p in parts)
        if trimmed:
            summary.inter_chunk_gap = None
        summary.shards = Shards(
            replicas=c.replicas,
            attempts=len(self.repeated) + 1,
            repeated=list(self.repeated),
            start_spread_ms=spread,
            clock_skew_ms=skew,
            clock_skew_uncertainty_ms=unc,
            skew_bound_ms=bound,
            barrier_wait_ms=(self.start_rt - max(
                [self.own_ready, *(int(d.get("t1") or 0) for d in self.parts)]
            )) / 1e6,
            merge_wait_ms=self.merge_wait_ms,
            api_calls=(c.calls - self.calls0) + sum(int(d.get("calls", 0)) for d in self.parts),
            record_bytes=sum(len(d.get("data", "")) for d in self.parts),
            chunks_trimmed=trimmed,
            shards=sorted(loads, key=lambda s: s.shard),
            warnings=warnings,
        )


class _FollowerAttempt(_Attempt):
    """``ready_t``: when the previous round's records went out with this shard's ready key for
    the next attempt (None on a point's first round: :meth:`start` writes the key then).

    Why the records carry the next ready key: a follower that wrote it only after its records
    could do so after shard 0 had published the point and removed its ``shard.`` keys,
    leaving a stray key behind; written with the records, it lands before shard 0 can merge.
    """

    def __init__(
        self, coord: Coordinator, name: str, stop: asyncio.Event, after: int,
        ready_t: int | None = None,
    ) -> None:
        super().__init__(coord, name, stop)
        self.after = after
        self.ready_t = ready_t
        self.t1 = 0
        self.t4 = 0

    def ready_doc(self, after: int, t: int) -> dict[str, str]:
        doc = {"boot": self.c.boot, "after": after, "t": t, "node": self.c.node}
        return {shard_key(self.name, "ready", str(self.c.shard)): json.dumps(doc)}

    async def start(self, load: LoadConfig) -> int | None:
        c = self.c
        me = str(c.shard)
        if self.ready_t is None:
            self.t1 = _now()
            await asyncio.to_thread(c.write, self.ready_doc(self.after, self.t1))
        else:
            self.t1 = self.ready_t

        def go(data: dict[str, str]) -> dict[str, Any] | None:
            ckpt = _loads(data.get(CHECKPOINT_KEY)) or {}
            entry = (ckpt.get("points") or {}).get(self.name)
            if isinstance(entry, dict):
                if entry.get("status") == "done" and point_key(self.name) in data:
                    summary = PointResult.model_validate(json.loads(data[point_key(self.name)]))
                    raise _PointDone(summary, None)
                if entry.get("status") != "done":
                    raise _PointDone(None, str(entry.get("reason") or "failed"))
            digest = _loads(data.get(DIGEST_KEY)) or {}
            if digest.get("finished"):
                raise _PointDone(None, "the leading shard ended the run: "
                                 + str(digest.get("failed") or "finished"))
            start = _loads(data.get(shard_key(self.name, "start")))
            if start is None or int(start.get("attempt", -1)) <= self.after:
                return None
            if (start.get("boots") or {}).get(me) != c.boot:
                return None  # an attempt this process is not part of (it restarted)
            return start

        # followers poll fast enough to see the start before its instant
        start = await c.poll(go, self.stop, c.timing.barrier_timeout_s,
                             f"the start of {self.name}",
                             poll_max_s=min(c.timing.poll_max_s, c.timing.lead_s / 2))
        self.t4 = _now()
        self.attempt = int(start["attempt"])
        return int(start["at"]) - c.offset_ns

    async def merge(self, load: LoadResult, progress: Progress) -> LoadResult:
        c = self.c
        if self.stop.is_set():
            return load
        budget = max(4096, (CONFIGMAP_LIMIT - RECORDS_MARGIN - c.last_size)
                     // max(1, c.replicas - 1))
        data, trimmed = pack_records(load.records, budget)
        if trimmed:
            log.warning("%s: shard %d's records trimmed to the first two and last chunk "
                        "arrivals to fit the store (%d bytes)", self.name, c.shard, budget)
        doc = {
            "shard": c.shard, "attempt": self.attempt, "boot": c.boot, "node": c.node,
            "offset": c.offset_ns, "t1": self.t1, "t4": self.t4,
            "data": data, "trimmed": trimmed, "unrecorded": load.unrecorded_errors,
            "stop_reason": load.stop_reason, "retry_waits": load.retry_after_waits,
            "retry_s": load.retry_after_wait_s, "spilled": load.spilled_requests,
            "lag": [round(x, 2) for x in load.loop_lag_ms], "stall": _stall_doc(load.longest_stall),
            "event_loop": load.event_loop, "calls": c.calls - self.calls0 + 1,
        }
        key = shard_key(self.name, "rec", self.attempt, c.shard)
        self.ready_t = _now()  # ready for a repeat, should shard 0 need one
        # the ready key first: a folder store writes key by key, and shard 0 acts on the records
        updates = {**self.ready_doc(self.attempt, self.ready_t),
                   key: json.dumps(doc, separators=(",", ":"))}
        await asyncio.to_thread(c.write, updates)
        return load
