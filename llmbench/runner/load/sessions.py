"""Multi-turn sessions (``--num-sessions``, ``--session-concurrency N``): N in flight.

Each session sends its turns one after another with the chat history so far (its user turns
and the replies it actually got), the next turn a planned delay after the previous answer.
The plan (turns per session, delays) is drawn up front, seeded, as GenAI-Perf draws it.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import numpy as np

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.responses import fill_record
from llmbench.runner.client.transport import Client, Connection, Exchange
from llmbench.runner.load.arrivals import sleep_until
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.faults import after_failure
from llmbench.runner.load.result import Progress
from llmbench.runner.load.state import RunState

__all__ = ["SessionCursor", "SessionPlan", "session_plan", "session_slot"]


@dataclass(frozen=True, slots=True)
class SessionPlan:
    """The sessions of a run: how many turns each has and the delay (ms) after each of its
    answers but the last. Turn ``t`` of session ``s`` is request ``first[s] + t``."""

    turns: tuple[int, ...]
    delays_ms: tuple[tuple[int, ...], ...]

    @property
    def total(self) -> int:
        return sum(self.turns)

    def first(self) -> list[int]:
        """The request number of each session's first turn (sessions are numbered in order)."""
        out, k = [], 0
        for n in self.turns:
            out.append(k)
            k += n
        return out


def session_plan(cfg: LoadConfig) -> SessionPlan:
    """Turns per session and delays, as GenAI-Perf draws them: normal, rounded, turns at
    least 1 and delays at least 0 ms; seeded by ``--random-seed``, so a run is repeatable."""
    n = cfg.num_sessions
    rng = np.random.default_rng([cfg.seed, 11])
    if cfg.session_turns_stddev > 0:
        draws = np.rint(rng.normal(cfg.session_turns_mean, cfg.session_turns_stddev, n))
        turns = tuple(int(x) for x in np.maximum(draws, 1))
    else:
        turns = (max(1, int(cfg.session_turns_mean)),) * n
    delay_rng = np.random.default_rng([cfg.seed, 12])
    delays = []
    for t in turns:
        if cfg.session_turn_delay_stddev_ms > 0:
            d = np.rint(
                delay_rng.normal(
                    cfg.session_turn_delay_mean_ms, cfg.session_turn_delay_stddev_ms, t - 1
                )
            )
            delays.append(tuple(int(x) for x in np.maximum(d, 0)))
        else:
            delays.append((max(0, round(cfg.session_turn_delay_mean_ms)),) * (t - 1))
    return SessionPlan(turns, tuple(delays))


class SessionCursor:
    """Hands out the sessions, in order, to the session slots."""

    def __init__(self, plan: SessionPlan) -> None:
        self.plan = plan
        self.firsts = plan.first()
        self.next = 0

    def take(self) -> int | None:
        if self.next >= len(self.plan.turns):
            return None
        self.next += 1
        return self.next - 1


def _reply_text(ex: Exchange, endpoint_type: str) -> str | None:
    """The assistant's reply of a finished turn, or None when the turn failed."""
    scratch = RequestRecord(index=0)
    fill_record(scratch, ex, endpoint_type)
    if not scratch.ok:
        return None
    return scratch.output_text or ""


async def session_slot(
    client: Client,
    conn: Connection | None,
    bodies: Sequence[bytes],
    cfg: LoadConfig,
    state: RunState,
    progress: Progress,
    worker: int,
    cursor: SessionCursor,
) -> None:
    """One session in flight at a time: its turns in order, each sent with the history so
    far (the earlier user turns and the replies actually received), the next one the planned
    delay after this one's answer arrived. A failed turn ends its session (there is no answer
    to continue from); the slot goes on with the next session."""
    timeout = cfg.request_timeout_s
    plan = cursor.plan
    failures = 0
    while not state.stopped:
        s = cursor.take()
        if s is None:
            return
        first = cursor.firsts[s]
        history: list[Any] = []
        model: Any = None
        delays = plan.delays_ms[s]
        for t in range(plan.turns[s]):
            if state.stopped:
                return
            k = first + t
            turn = json.loads(bodies[k])
            if t == 0:
                model = turn.get("model")
            else:
                turn["model"] = model  # a session talks to one model
            asked = list(turn.get("messages") or ())
            turn["messages"] = history + asked
            body = json.dumps(turn, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
            state.sent_bodies[k] = body
            delay = delays[t] if t < len(delays) else None
            rec = RequestRecord(
                index=k, worker=worker, session_id=s, turn=t,
                turn_delay_ms=float(delay) if delay is not None else None,
            )
            ex = Exchange()
            progress.sent += 1
            try:
                conn = await client.exchange(conn, body, timeout, ex)
            except asyncio.CancelledError:
                state.add(rec, ex)
                raise
            answered = perf_counter_ns()
            if state.tx is None:
                state.tx = ex.sent_ns
            ok = ex.error is None and ex.status == 200
            reply = _reply_text(ex, cfg.endpoint_type) if ok else None
            state.add(rec, ex)
            progress.done += 1
            if reply is not None:
                failures = 0
                state.reached()
                if delay is None:
                    break
                history = [*turn["messages"], {"role": "assistant", "content": reply}]
                await sleep_until(answered + delay * 1_000_000)
                continue
            progress.errors += 1
            if t < plan.turns[s] - 1:
                state.sessions_abandoned += 1
            failures = await after_failure(state, ex, cfg, failures)
            break
