"""Turns a finished exchange into a :class:`RequestRecord`.

This runs after the response is complete, never inside ``data_received``: decoding SSE and
JSON is the expensive part of a streaming client, and doing it off the measured path is why
the timestamps stay honest when hundreds of streams share one event loop.
"""

from __future__ import annotations

import json
from typing import Any

from llmbench.runner.client.records import SOURCE_SERVER, RequestRecord
from llmbench.runner.client.sse import DONE, SSEParser
from llmbench.runner.client.transport import Exchange, body_pieces

_MAX_SAMPLE = 300


def _sample(body: bytes) -> str:
    return body[:_MAX_SAMPLE].decode("utf-8", "replace")


def _choice_parts(choice: dict[str, Any]) -> tuple[str, str]:
    """``(answer, reasoning)`` text of one choice in any OpenAI shape (chat delta, chat
    message, text).

    Reasoning arrives as ``reasoning_content`` (vLLM's and SGLang's reasoning parsers) or
    ``reasoning`` (OpenAI-style, newer vLLM); a server that sends both carries the same text
    twice, so ``reasoning_content`` wins and ``reasoning`` is read only without it.
    Reasoning text counts in the output: those tokens were generated and timed like any other.
    """
    delta = choice.get("delta") or choice.get("message")
    if isinstance(delta, dict):
        content, reasoning = delta.get("content"), delta.get("reasoning_content")
        if not isinstance(reasoning, str) or not reasoning:
            reasoning = delta.get("reasoning")
        return (content if isinstance(content, str) else "",
                reasoning if isinstance(reasoning, str) else "")
    text = choice.get("text")
    return (text if isinstance(text, str) else ""), ""


def _apply_usage(rec: RequestRecord, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    prompt, completion = usage.get("prompt_tokens"), usage.get("completion_tokens")
    if isinstance(prompt, int):
        rec.input_tokens, rec.input_tokens_source = prompt, SOURCE_SERVER
    if isinstance(completion, int):
        rec.output_tokens, rec.output_tokens_source = completion, SOURCE_SERVER
    details = usage.get("completion_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, dict) else None
    if isinstance(reasoning, int) and not isinstance(reasoning, bool):
        rec.reasoning_tokens, rec.reasoning_tokens_source = reasoning, SOURCE_SERVER


def fill_record(rec: RequestRecord, ex: Exchange, endpoint_type: str) -> None:
    """Fills timestamps, text, usage and errors of ``rec`` from ``ex``.

    Every failure becomes an ``error_type`` (``http_429``, ``disconnect``, ``timeout``,
    ``interrupted``, ``malformed_sse``, ``stream_error``, ``incomplete_stream``,
    ``empty_response`` …) with a short sample message, never an exception. A request that
    failed after bytes arrived keeps its timestamps (what arrived), but only an error-free
    record counts in the statistics.
    """
    rec.sent_ns = ex.sent_ns
    if ex.connect_ns:
        rec.connect_ns = ex.connect_ns
    rec.status = ex.status or None
    if ex.error is not None and not ex.pieces:
        rec.error_type, rec.error_message = ex.error, ex.error_message
        return
    pieces, framing_error = body_pieces(ex)
    if ex.status and ex.status != 200:
        rec.error_type = f"http_{ex.status}"
        rec.error_message = _sample(b"".join(p for _, p in pieces))
        return
    if framing_error is not None and ex.error is None:
        rec.error_type, rec.error_message = "protocol", framing_error
        return
    if "text/event-stream" in ex.headers.get("content-type", ""):
        _fill_stream(rec, pieces, incomplete=ex.error is not None)
    else:
        _fill_json(rec, pieces, endpoint_type)
    if ex.error is not None and rec.error_type is None:
        # Bytes arrived, then the connection broke or timed out: the request did not complete.
        rec.error_type, rec.error_message = ex.error, ex.error_message


def _decode_events(payloads: list[bytes]) -> tuple[list[Any] | None, bytes | None]:
    """JSON objects of all events, parsed in one call; or the first malformed payload.

    One ``json.loads`` over ``[e1,e2,…]`` costs a fraction of one call per event; the slow
    per-event path runs only to find which event is broken.
    """
    try:
        objs = json.loads(b"[" + b",".join(payloads) + b"]")
        if len(objs) == len(payloads) and all(isinstance(o, dict) for o in objs):
            return objs, None
    except ValueError:
        pass
    for payload in payloads:
        try:
            if isinstance(json.loads(payload), dict):
                continue
        except ValueError:
            pass
        return None, payload
    return None, b"events do not decode one JSON object each"


def _fill_stream(rec: RequestRecord, pieces: list[tuple[int, bytes]], incomplete: bool) -> None:
    parser = SSEParser()
    payloads: list[bytes] = []
    stamps: list[int] = []
    saw_done = False
    for ts, piece in pieces:
        for payload in parser.feed(piece):
            if payload != DONE:
                payloads.append(payload)
                stamps.append(ts)
            else:
                saw_done = True
    objs, bad = _decode_events(payloads)
    if objs is None:
        rec.error_type = "malformed_sse"
        rec.error_message = (bad or b"")[:_MAX_SAMPLE].decode("utf-8", "replace")
        return
    texts: list[str] = []
    thoughts: list[str] = []
    first_answer: int | None = None
    first_thought: int | None = None
    chunk_ns = rec.chunk_ns
    # A stream is whole when it says so: [DONE], a finish_reason or the usage chunk. One that
    # stops without any of them was cut off (a crashed worker, a proxy timeout) even if its
    # HTTP framing ended cleanly; its latencies would look like a short, fast answer.
    ended = saw_done
    for obj, ts in zip(objs, stamps, strict=True):
        if "error" in obj:
            rec.error_type = "stream_error"
            rec.error_message = json.dumps(obj["error"])[:_MAX_SAMPLE]
            return
        for choice in obj.get("choices") or ():
            answer, thought = _choice_parts(choice)
            if answer or thought:
                chunk_ns.append(ts)
                texts.append(answer + thought)
                if thought:
                    thoughts.append(thought)
                    if first_thought is None:
                        first_thought = ts
                if answer and first_answer is None:
                    first_answer = ts
            if not ended and isinstance(choice, dict) and choice.get("finish_reason"):
                ended = True
        if obj.get("usage"):
            ended = True
            _apply_usage(rec, obj["usage"])
    if not chunk_ns:
        if not incomplete:
            rec.error_type, rec.error_message = "empty_response", "stream carried no content"
        return
    rec.first_token_ns = chunk_ns[0]
    rec.last_token_ns = chunk_ns[-1]
    rec.output_text = "".join(texts)
    if thoughts:  # a stream without reasoning keeps these None: its files stay as they were
        rec.first_reasoning_ns, rec.first_answer_ns = first_thought, first_answer
        rec.reasoning_text = "".join(thoughts)
    if not ended and not incomplete:
        rec.error_type = "incomplete_stream"
        rec.error_message = (
            f"the stream ended after {len(chunk_ns)} content events without a finish_reason, "
            "a usage chunk or [DONE]"
        )


def _fill_json(rec: RequestRecord, pieces: list[tuple[int, bytes]], endpoint_type: str) -> None:
    body = b"".join(p for _, p in pieces)
    try:
        obj = json.loads(body)
    except ValueError:
        rec.error_type, rec.error_message = "malformed_json", _sample(body)
        return
    if not isinstance(obj, dict) or "error" in obj:
        rec.error_type, rec.error_message = "response_error", _sample(body)
        return
    end = pieces[-1][0] if pieces else None
    rec.first_token_ns = rec.last_token_ns = end
    _apply_usage(rec, obj.get("usage"))
    if endpoint_type == "embeddings":
        rec.output_tokens, rec.output_tokens_source = 0, SOURCE_SERVER
        return
    parts = [_choice_parts(c) for c in obj.get("choices") or ()]
    rec.output_text = "".join(answer + thought for answer, thought in parts)
    thought_text = "".join(thought for _, thought in parts)
    if thought_text and end is not None:  # one body: both arrived with it
        rec.first_reasoning_ns = end
        rec.first_answer_ns = end if any(answer for answer, _ in parts) else None
        rec.reasoning_text = thought_text
    if end is not None:
        rec.chunk_ns.append(end)
