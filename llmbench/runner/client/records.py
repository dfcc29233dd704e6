"""Per-request records: the raw facts every metric is computed from.

A record holds timestamps from ``time.perf_counter_ns`` taken when the bytes arrived, token
counts with their provenance, and the error (if any). Metrics never look at anything else,
so a saved ``profile_export.json`` can be re-analysed later with identical results.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field
from functools import partial
from typing import Any

#: Where a token count came from; GenAI-Perf semantics prefer the server's ``usage``.
SOURCE_SERVER = "server"
SOURCE_TOKENIZER = "tokenizer"


@dataclass(slots=True)
class RequestRecord:
    """One request as the client saw it.

    ``chunk_ns`` holds the arrival time of every SSE event that carried non-empty content,
    so inter-chunk gaps (never called ITL) and ITL-by-position can be derived later. It is an
    ``array('q')``: 8 bytes a stamp where a list of distinct ints costs 40 (a 256-token answer's
    stamps 2 KB, not 10 KB; 1,536 such answers, the c256 wave scenario, 12 MB less).
    ``scheduled_ns`` is set only in request-rate mode: the gap to ``sent_ns`` is dispatch
    lag, the evidence that an overloaded client did not pass for a fast server.
    ``connect_ns`` is set only when the request had to open its connection first (the
    server closed the slot's keep-alive connection, or an open-loop send found none idle):
    how long that took. It is never inside TTFT or e2e, whose clock (``sent_ns``) starts when
    the first byte is handed to the open connection.
    ``loop_stall_ms`` is set when the client's event loop stalled (see
    ``llmbench.runner.load.stalls.STALL_MS``) while the request was in flight: its reads were
    stamped late by up to that much, so its timestamps are unreliable.
    ``session_id`` / ``turn`` are set only in multi-turn session runs: the session (0-based)
    and the turn within it (0-based); ``turn_delay_ms`` is the wait planned after this
    turn's answer before the session's next turn (None after its last turn).
    ``first_reasoning_ns`` / ``first_answer_ns`` are set only when the answer carried
    reasoning (``reasoning_content`` or ``reasoning`` deltas, a reasoning parser's split):
    the arrival of the first reasoning and of the first answer (``content``) text, the latter
    None when no answer text came. ``first_token_ns`` stays the first of either kind.
    ``reasoning_tokens`` (of ``output_tokens``) comes from the server's
    ``usage.completion_tokens_details.reasoning_tokens`` or the tokenizer
    (``reasoning_tokens_source``); ``reasoning_text`` is dropped from the files, like
    ``output_text``.
    """

    index: int
    warmup: bool = False
    worker: int = 0
    scheduled_ns: int | None = None
    sent_ns: int = 0
    connect_ns: int | None = None
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    chunk_ns: array[int] = field(default_factory=partial(array, "q"))
    input_tokens: int | None = None
    input_tokens_source: str | None = None
    input_tokens_client: int | None = None
    output_tokens: int | None = None
    output_tokens_source: str | None = None
    output_tokens_client: int | None = None
    requested_output_tokens: int | None = None
    status: int | None = None
    error_type: str | None = None
    error_message: str | None = None
    output_text: str | None = None
    loop_stall_ms: float | None = None
    session_id: int | None = None
    turn: int | None = None
    turn_delay_ms: float | None = None
    first_reasoning_ns: int | None = None
    first_answer_ns: int | None = None
    reasoning_tokens: int | None = None
    reasoning_tokens_source: str | None = None
    reasoning_text: str | None = None

    @property
    def ok(self) -> bool:
        """A request counts as completed only without an error and with an end time."""
        return self.error_type is None and self.last_token_ns is not None

    def to_json(self) -> dict[str, Any]:
        """Plain dict for ``profile_export.json``; the output text is dropped to keep it small."""
        # Not dataclasses.asdict: it deep-copies every chunk_ns list, seconds per 10⁴ records.
        d = {name: getattr(self, name) for name in _JSON_FIELDS}
        d["chunk_ns"] = list(self.chunk_ns)
        if self.loop_stall_ms is not None:  # only a stalled run's files carry the key
            d["loop_stall_ms"] = self.loop_stall_ms
        if self.connect_ns is not None:  # only a request that opened a connection
            d["connect_ns"] = self.connect_ns
        if self.session_id is not None:  # only a session run's files carry these keys
            d["session_id"] = self.session_id
            d["turn"] = self.turn
            d["turn_delay_ms"] = self.turn_delay_ms
        if self.reasoned:  # only an answer with reasoning carries these keys
            d["first_reasoning_ns"] = self.first_reasoning_ns
            d["first_answer_ns"] = self.first_answer_ns
            d["reasoning_tokens"] = self.reasoning_tokens
            d["reasoning_tokens_source"] = self.reasoning_tokens_source
        return d

    @property
    def reasoned(self) -> bool:
        """The answer carried reasoning: reasoning text arrived, or the usage counted some."""
        return self.first_reasoning_ns is not None or bool(self.reasoning_tokens)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> RequestRecord:
        """Inverse of :meth:`to_json`; unknown keys are ignored so old exports still load."""
        names = set(cls.__dataclass_fields__)
        rec = cls(**{k: v for k, v in d.items() if k in names})
        rec.chunk_ns = array("q", rec.chunk_ns)
        return rec


#: Fields :meth:`RequestRecord.to_json` writes only when set (or never: the texts).
_OPTIONAL_JSON = (
    "output_text", "connect_ns", "loop_stall_ms", "session_id", "turn", "turn_delay_ms",
    "first_reasoning_ns", "first_answer_ns", "reasoning_tokens", "reasoning_tokens_source",
    "reasoning_text",
)

#: The keys of :meth:`RequestRecord.to_json` always written, in field order.
_JSON_FIELDS = tuple(
    name for name in RequestRecord.__dataclass_fields__ if name not in _OPTIONAL_JSON
)
