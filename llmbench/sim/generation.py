"""Generation: one completion request from admission to its last chunk, on known deadlines.

Why a module of its own: this is the timing model the oracle promises, and the hot path
(one timer callback and one write per token). Per request, all deadlines are absolute so
event-loop lag never accumulates:

* arrival: ``perf_counter_ns()`` when the bytes completing the request head arrived;
* admitted: arrival, or when a decode slot frees up if ``max_num_seqs`` are running (FIFO);
* first chunk deadline: admitted + ttft (± jitter) + prefill_ms_per_token x prompt tokens;
* chunk ``k`` deadline: chunk ``k-1`` deadline + itl (± jitter) + itl_ms_per_seq x running,
  counted from when chunk 0 was actually written;
* chunks whose deadlines have passed (the sim ran behind, or ITL is 0) are written together
  in one write, still one SSE event each, as vLLM merges outputs for a slow consumer;
  ``--max-events-per-write 1`` forces one event per write (syscall-bound, ~8 us/token);
* when the client stops reading (transport paused) the stream is held and resumes with a
  burst of what is due, so memory stays bounded; ``stalled_writes`` in the record says so.

Non-streaming responses are written once the last token is due (first = last token time).

Reasoning (``--reasoning-tokens N``, chat only): the first N tokens of each answer go out as
``reasoning_content`` (or ``reasoning``, ``--reasoning-field``) deltas on the same deadlines,
the rest as ``content``; a chunk never straddles the boundary, the usage says
``completion_tokens_details.reasoning_tokens`` (unless ``--no-reasoning-usage``) and the record
keeps both first-token times.

``time.perf_counter_ns`` is ``CLOCK_MONOTONIC`` on Linux, so a client process on the same
host can compare its own timestamps with ``GET /sim/records`` directly. Timers fire with the
event loop's millisecond granularity (epoll), so a chunk is written 0-1 ms after its
deadline; the records hold the real write times, which is what an oracle must report.

What a generation needs of the server (its clock, slots, queue, metrics and ring) is the
``Host`` protocol declared here, so this module does not import ``server`` (which starts
generations) back.
"""

from __future__ import annotations

import asyncio
import time
from time import perf_counter_ns
from typing import TYPE_CHECKING, Any, Protocol

from llmbench.sim.wire import DONE_CHUNK, dumps, http_response

if TYPE_CHECKING:
    import random
    from collections import deque

    from llmbench.sim.config import SimConfig
    from llmbench.sim.metrics import Metrics
    from llmbench.sim.records import SimRecord
    from llmbench.sim.wire import Conn

__all__ = ["Gen", "Host"]


class Host(Protocol):
    """The server state a generation reads and updates (``server.SimServer`` provides it)."""

    config: SimConfig
    _words: tuple[str, ...]
    _words_b: tuple[bytes, ...]
    _model_json: str
    _id_prefix: str
    _rng: random.Random
    _loop: asyncio.AbstractEventLoop
    _running: int
    _running_gens: set[Gen]
    _waiting: deque[Gen]
    _metrics: Metrics

    def _add_record(self, rec: SimRecord) -> None:
        """Keeps a finished (or aborted) request's ground-truth record."""

    def _admit_waiting(self, now: int) -> None:
        """Gives freed decode slots to queued generations, oldest first."""


_WAITING, _PREFILL, _DECODE, _DONE_STATE = range(4)


class Gen:
    """One generation request: queued, then emits chunks on absolute deadlines via call_at."""

    __slots__ = ("sim", "conn", "rec", "stream", "chat", "n", "sent", "prefix", "suffix",
                 "woff", "handle", "deadline_ns", "state", "include_usage", "finish_reason",
                 "malformed_at", "disconnect_at", "last_write_ns", "created", "rid_s", "held",
                 "reasoning", "rprefix")

    def __init__(self, sim: Host, conn: Conn, rec: SimRecord, stream: bool, chat: bool,
                 n: int, finish_reason: str, include_usage: bool) -> None:
        self.sim = sim
        self.conn = conn
        self.rec = rec
        self.stream = stream
        self.chat = chat
        self.n = n
        self.sent = 0
        self.finish_reason = finish_reason
        self.include_usage = include_usage
        self.handle: asyncio.TimerHandle | asyncio.Handle | None = None
        self.deadline_ns = 0
        self.state = _WAITING
        self.malformed_at = -1
        self.disconnect_at = -1
        self.last_write_ns = 0
        self.held = False
        self.woff = rec.request_id % len(sim._words)
        self.created = int(time.time())
        model = sim._model_json
        #: the first ``reasoning`` tokens go out as reasoning deltas (chat only)
        self.reasoning = min(sim.config.reasoning_tokens, n) if chat else 0
        self.rprefix = b""
        if chat:
            self.rid_s = f"chatcmpl-{sim._id_prefix}{rec.request_id}"
            head = (f'data: {{"id":"{self.rid_s}","object":"chat.completion.chunk",'
                    f'"created":{self.created},"model":{model},"choices":[{{"index":0,'
                    f'"delta":{{"')
            self.prefix = f'{head}content":"'.encode()
            if self.reasoning:
                self.rprefix = f'{head}{sim.config.reasoning_field}":"'.encode()
            self.suffix = b'"},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            self.rid_s = f"cmpl-{sim._id_prefix}{rec.request_id}"
            self.prefix = (f'data: {{"id":"{self.rid_s}","object":"text_completion",'
                           f'"created":{self.created},"model":{model},"choices":[{{"index":0,'
                           f'"text":"').encode()
            self.suffix = b'","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'

    # scheduling ------------------------------------------------------------------------
    def admit(self, now_ns: int) -> None:
        """Takes a decode slot: the first chunk is due after TTFT and prefill."""
        sim = self.sim
        cfg = sim.config
        self.state = _PREFILL
        self.rec.admitted_ns = now_ns
        ttft = cfg.ttft_ms
        if cfg.ttft_jitter_ms:
            ttft = max(0.0, ttft + sim._rng.uniform(-cfg.ttft_jitter_ms, cfg.ttft_jitter_ms))
        ttft += cfg.prefill_ms_per_token * self.rec.prompt_tokens
        self.deadline_ns = now_ns + int(ttft * 1e6)
        self._schedule()

    def _schedule(self) -> None:
        sim = self.sim
        delay = (self.deadline_ns - perf_counter_ns()) / 1e9
        if delay <= 0:
            self.handle = sim._loop.call_soon(self.tick)
        else:
            self.handle = sim._loop.call_at(sim._loop.time() + delay, self.tick)

    def resume(self) -> None:
        """The paused client drained its buffer: write what fell due meanwhile, now."""
        self.handle = self.sim._loop.call_soon(self.tick)

    def _step_ns(self) -> int:
        cfg = self.sim.config
        step = cfg.itl_ms
        if cfg.itl_jitter_ms:
            step = max(0.0, step + self.sim._rng.uniform(-cfg.itl_jitter_ms, cfg.itl_jitter_ms))
        if cfg.itl_ms_per_seq:
            step += cfg.itl_ms_per_seq * self.sim._running
        return int(step * 1e6)

    # emission --------------------------------------------------------------------------
    def _content(self, start: int, count: int) -> bytes:
        words = self.sim._words_b
        nw = len(words)
        base = self.woff + start
        if count == 1:
            return words[base % nw]
        return b"".join(words[(base + i) % nw] for i in range(count))

    def tick(self) -> None:
        """Timer callback: writes every chunk that is due, in one write.

        Normally that is one chunk. When the sim runs behind (or ITL is zero) the overdue
        chunks leave together, still as separate SSE events, like vLLM merging outputs for
        a slow consumer; ``max_events_per_write`` caps that burst.
        """
        self.handle = None
        conn = self.conn
        transport = conn.transport
        if conn.closed or transport is None:
            self.abort("client_closed")
            return
        if conn.paused and self.stream:
            if not self.held:  # a write that found the socket full: one stall per hold
                self.rec.stalled_writes += 1
            self.held = True  # resume_writing() calls tick again; overdue chunks then burst
            return
        now = perf_counter_ns()
        sim = self.sim
        if not self.stream:
            self._finish_json(now)
            return
        cfg = sim.config
        tpc = cfg.tokens_per_chunk
        limit = cfg.max_events_per_write or 1 << 62
        n = self.n
        words = sim._words_b
        nw = len(words)
        prefix = self.prefix
        suffix = self.suffix
        sent = self.sent
        reasoning = self.reasoning
        parts: list[bytes] = []
        if transport.get_write_buffer_size():
            self.rec.stalled_writes += 1
        if sent == 0:
            # Decode steps count from the first token actually written, so a late first
            # token (loop lag, timer granularity) shows in TTFT only, never in ITL.
            self.deadline_ns = now
            self.rec.first_token_ns = now
            if reasoning:
                self.rec.first_reasoning_ns = now
            if self.chat:
                parts.append(self._role_chunk())
        else:
            sim._metrics.itl.observe((now - self.last_write_ns) / 1e9)
        self.last_write_ns = now
        fixed_step = not (cfg.itl_jitter_ms or cfg.itl_ms_per_seq)
        step = int(cfg.itl_ms * 1e6)
        events = 0
        while True:
            # A chunk is reasoning or answer, never both: it ends at the boundary.
            if sent < reasoning:
                k = tpc if sent + tpc <= reasoning else reasoning - sent
                head = self.rprefix
            else:
                k = tpc if sent + tpc <= n else n - sent
                head = prefix
                if sent == reasoning:
                    self.rec.first_answer_ns = now
            if k == 1:
                content = words[(self.woff + sent) % nw]
            else:
                content = self._content(sent, k)
            if sent <= self.malformed_at < sent + k:
                event = head + content + b'"}\n\n'  # truncated JSON: a malformed event
                self.rec.status = "malformed"
            else:
                event = head + content + suffix
            parts.append(b"%x\r\n%b\r\n" % (len(event), event))
            sent += k
            events += 1
            if events > 1:  # events written together: zero gaps, as a client sees them
                itl = sim._metrics.itl
                itl.counts[0] += 1
                itl.count += 1
            if 0 <= self.disconnect_at <= sent:
                # Injected fault: the server drops the connection mid-stream (no tail).
                # The record is complete before the bytes leave, so a client that has
                # seen the end can always find it (also from another thread).
                self.sent = sent
                self.rec.status = "disconnect"
                self.rec.last_token_ns = now
                self.rec.output_tokens = sent
                self.rec.reasoning_tokens = min(sent, reasoning)
                conn.closed = True
                conn.gen = None
                self._release(now, "abort")
                transport.write(b"".join(parts))
                transport.close()
                return
            if sent >= n:
                self.sent = sent
                parts.append(self._tail())
                self._complete(now)
                transport.write(b"".join(parts))
                conn.finish()
                return
            self.deadline_ns += step if fixed_step else self._step_ns()
            if self.deadline_ns > now or events >= limit:
                break
        self.sent = sent
        self.state = _DECODE
        transport.write(b"".join(parts))
        if self.deadline_ns <= now:
            self.handle = sim._loop.call_soon(self.tick)
        else:
            self.handle = sim._loop.call_at(sim._loop.time() + (self.deadline_ns - now) / 1e9,
                                            self.tick)

    def _role_chunk(self) -> bytes:
        event = (f'data: {{"id":"{self.rid_s}","object":"chat.completion.chunk",'
                 f'"created":{self.created},"model":{self.sim._model_json},"choices":[{{'
                 f'"index":0,"delta":{{"role":"assistant","content":""}},"logprobs":null,'
                 f'"finish_reason":null}}]}}\n\n').encode()
        return b"%x\r\n%b\r\n" % (len(event), event)

    def _usage(self) -> dict[str, Any]:
        """OpenAI's usage, with ``completion_tokens_details.reasoning_tokens`` when the
        answer reasoned (as OpenAI reports it; the reasoning is part of the completion)."""
        p = self.rec.prompt_tokens
        usage: dict[str, Any] = {"prompt_tokens": p, "total_tokens": p + self.n,
                                 "completion_tokens": self.n}
        if self.reasoning and self.sim.config.reasoning_usage:
            usage["completion_tokens_details"] = {"reasoning_tokens": self.reasoning}
        return usage

    def _usage_json(self) -> str:
        return dumps(self._usage())

    def _tail(self) -> bytes:
        """Finish-reason chunk, optional usage-only chunk, ``[DONE]``, end of chunked body."""
        head = (f'data: {{"id":"{self.rid_s}","object":'
                f'"{"chat.completion.chunk" if self.chat else "text_completion"}",'
                f'"created":{self.created},"model":{self.sim._model_json},"choices":')
        if self.chat:
            fin = (f'{head}[{{"index":0,"delta":{{}},"logprobs":null,'
                   f'"finish_reason":"{self.finish_reason}","stop_reason":null}}]}}\n\n')
        else:
            fin = (f'{head}[{{"index":0,"text":"","logprobs":null,'
                   f'"finish_reason":"{self.finish_reason}","stop_reason":null}}]}}\n\n')
        events = [fin]
        if self.include_usage:
            events.append(f'{head}[],"usage":{self._usage_json()}}}\n\n')
        out = []
        for e in events:
            b = e.encode()
            out.append(b"%x\r\n%b\r\n" % (len(b), b))
        out.append(DONE_CHUNK)
        return b"".join(out)

    def _finish_json(self, now: int) -> None:
        """Non-streaming: the whole completion is sent once the last token is 'generated'."""
        if self.state == _PREFILL and self.n > 1:
            # Decode time still to come: the response is due after n-1 more steps.
            self.state = _DECODE
            steps = -(-self.n // self.sim.config.tokens_per_chunk) - 1
            self.deadline_ns += sum(self._step_ns() for _ in range(steps))
            if self.deadline_ns > now:
                self._schedule()
                return
        r = self.reasoning
        text = self._content(r, self.n - r).decode()
        rid = self.rid_s
        if self.chat:
            message: dict[str, Any] = {"role": "assistant", "content": text}
            if r:
                message[self.sim.config.reasoning_field] = self._content(0, r).decode()
            choice: dict[str, Any] = {"index": 0, "message": message,
                                      "logprobs": None, "finish_reason": self.finish_reason,
                                      "stop_reason": None}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None,
                      "finish_reason": self.finish_reason, "stop_reason": None}
            obj = "text_completion"
        body = dumps({"id": rid, "object": obj, "created": self.created,
                      "model": self.sim.config.model, "choices": [choice],
                      "usage": self._usage()}).encode()
        if self.malformed_at >= 0:
            body = body[: len(body) // 2]
            self.rec.status = "malformed"
        self.rec.first_token_ns = now
        if r:
            self.rec.first_reasoning_ns = now
        if r < self.n:
            self.rec.first_answer_ns = now
        self.sent = self.n
        self.rec.reasoning_tokens = r
        if self.disconnect_at >= 0:
            self.rec.status = "disconnect"
            self.rec.last_token_ns = now
            self.conn.closed = True
            self.conn.gen = None
            self._release(now, "abort")
            self.conn.transport.close()  # type: ignore[union-attr]
            return
        self._complete(now)
        self.conn.send(http_response(200, body))

    # bookkeeping ----------------------------------------------------------------------
    def _complete(self, now: int) -> None:
        self.rec.last_token_ns = now
        self.rec.output_tokens = self.n
        self.rec.reasoning_tokens = self.reasoning
        self.rec.finish_reason = self.finish_reason
        self._release(now, self.finish_reason)

    def abort(self, status: str) -> None:
        """The client went away (or the server stops): free the slot, keep the record."""
        if self.state == _DONE_STATE:
            return
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        now = perf_counter_ns()
        if self.rec.status == "ok":
            self.rec.status = status
        if self.sent:
            self.rec.last_token_ns = self.last_write_ns
        self.rec.output_tokens = self.sent
        self.rec.reasoning_tokens = min(self.sent, self.reasoning)
        if self.state == _WAITING:
            try:
                self.sim._waiting.remove(self)
            except ValueError:
                pass
            self.state = _DONE_STATE
            self.sim._add_record(self.rec)
            return
        self._release(now, "abort")

    def _release(self, now: int, reason: str) -> None:
        self.state = _DONE_STATE
        sim = self.sim
        rec = self.rec
        m = sim._metrics
        m.success[reason] = m.success.get(reason, 0) + 1
        m.generation_tokens += self.sent
        if rec.first_token_ns:
            m.ttft.observe((rec.first_token_ns - rec.arrival_ns) / 1e9)
        m.e2e.observe((now - rec.arrival_ns) / 1e9)
        m.queue.observe((rec.admitted_ns - rec.arrival_ns) / 1e9)
        m.req_prompt.observe(rec.prompt_tokens)
        m.req_generation.observe(self.sent)
        sim._running_gens.discard(self)
        sim._add_record(rec)
        sim._running -= 1
        sim._admit_waiting(now)
