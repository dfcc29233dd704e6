"""Turns a finished exchange into a :class:`RequestRecord`.

This runs after the response is complete, never inside ``data_received``: decoding SSE and
JSON is the expensive part of a streaming client, and doing it off the measured path is why
the timestamps stay honest when hundreds of streams share one event loop.
"""

from __future__ import annotations

import json
from typing import Any

from .records import SOURCE_SERVER, RequestRecord
from .sse import DONE, SSEParser
from .transport import Exchange

_MAX_SAMPLE = 300


def _body_text(ex: Exchange) -> str:
    return b"".join(p for _, p in ex.pieces)[:_MAX_SAMPLE].decode("utf-8", "replace")


def _choice_text(choice: dict[str, Any]) -> str:
    """Generated text of one choice in any OpenAI shape (chat delta, chat message, text).

    Reasoning text counts: those tokens were generated and timed like any other.
    """
    delta = choice.get("delta") or choice.get("message")
    if isinstance(delta, dict):
        parts = [delta.get("content"), delta.get("reasoning_content"), delta.get("reasoning")]
        return "".join(p for p in parts if isinstance(p, str))
    text = choice.get("text")
    return text if isinstance(text, str) else ""


def _apply_usage(rec: RequestRecord, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int):
        rec.input_tokens, rec.input_tokens_source = prompt, SOURCE_SERVER
    if isinstance(completion, int):
        rec.output_tokens, rec.output_tokens_source = completion, SOURCE_SERVER


def fill_record(rec: RequestRecord, ex: Exchange, sent_ns: int, endpoint_type: str) -> None:
    """Fills timestamps, text, usage and errors of ``rec`` from ``ex``.

    Every failure becomes an ``error_type`` (``http_429``, ``disconnect``, ``malformed_sse``,
    ``stream_error``, ``empty_response`` …) with a short sample message, never an exception.
    """
    rec.sent_ns = sent_ns
    rec.status = ex.status or None
    if ex.error is not None and not ex.pieces:
        rec.error_type, rec.error_message = ex.error, ex.error_message
        return
    if ex.status and ex.status != 200:
        rec.error_type = f"http_{ex.status}"
        rec.error_message = _body_text(ex)
        return
    if "text/event-stream" in ex.headers.get("content-type", ""):
        _fill_stream(rec, ex)
    else:
        _fill_json(rec, ex, endpoint_type)
    if ex.error is not None and rec.error_type is None:
        # Bytes arrived, then the connection broke or timed out: the request did not complete.
        rec.error_type, rec.error_message = ex.error, ex.error_message


def _fill_stream(rec: RequestRecord, ex: Exchange) -> None:
    parser = SSEParser()
    texts: list[str] = []
    chunk_ns = rec.chunk_ns
    loads = json.loads
    for ts, piece in ex.pieces:
        for payload in parser.feed(piece):
            if payload == DONE:
                continue
            try:
                obj = loads(payload)
            except ValueError:
                rec.error_type = "malformed_sse"
                rec.error_message = payload[:_MAX_SAMPLE].decode("utf-8", "replace")
                return
            if not isinstance(obj, dict):
                rec.error_type = "malformed_sse"
                rec.error_message = payload[:_MAX_SAMPLE].decode("utf-8", "replace")
                return
            if "error" in obj:
                rec.error_type = "stream_error"
                rec.error_message = json.dumps(obj["error"])[:_MAX_SAMPLE]
                return
            for choice in obj.get("choices") or ():
                text = _choice_text(choice)
                if text:
                    chunk_ns.append(ts)
                    texts.append(text)
            if obj.get("usage"):
                _apply_usage(rec, obj["usage"])
    if not chunk_ns:
        if ex.error is None:
            rec.error_type, rec.error_message = "empty_response", "stream carried no content"
        return
    rec.first_token_ns = chunk_ns[0]
    rec.last_token_ns = chunk_ns[-1]
    rec.output_text = "".join(texts)


def _fill_json(rec: RequestRecord, ex: Exchange, endpoint_type: str) -> None:
    body = b"".join(p for _, p in ex.pieces)
    try:
        obj = json.loads(body)
    except ValueError:
        rec.error_type, rec.error_message = "malformed_json", _body_text(ex)
        return
    if not isinstance(obj, dict) or "error" in obj:
        rec.error_type, rec.error_message = "response_error", _body_text(ex)
        return
    end = ex.pieces[-1][0] if ex.pieces else None
    rec.first_token_ns = rec.last_token_ns = end
    _apply_usage(rec, obj.get("usage"))
    if endpoint_type == "embeddings":
        rec.output_tokens, rec.output_tokens_source = 0, SOURCE_SERVER
        return
    rec.output_text = "".join(_choice_text(c) for c in obj.get("choices") or ())
    if end is not None:
        rec.chunk_ns.append(end)
