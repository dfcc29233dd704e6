"""Reasoning deltas at the response boundary: which key is read, what is stamped, what is kept.

Hand-written bodies in the shapes servers send (vLLM/SGLang ``reasoning_content``, OpenAI-style
``reasoning``, transitional servers that send both with the same text), each event stamped with
its own arrival, through :func:`fill_record` as the client runs it.
"""

from __future__ import annotations

import json
from typing import Any

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.responses import fill_record
from llmbench.runner.client.transport import Exchange

SSE = {"content-type": "text/event-stream"}


def _stream(deltas: list[dict[str, Any]], usage: dict[str, Any] | None = None) -> Exchange:
    """One event per delta at 10, 20, 30 … ns after a send at 0, then the finish, usage, DONE."""
    events = [{"choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    events.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    if usage is not None:
        events.append({"choices": [], "usage": usage})
    pieces = [(10 * (i + 1), f"data: {json.dumps(e)}\n\n".encode()) for i, e in enumerate(events)]
    pieces.append((10 * (len(pieces) + 1), b"data: [DONE]\n\n"))
    return Exchange(sent_ns=0, status=200, headers=SSE, pieces=pieces)


def _filled(ex: Exchange) -> RequestRecord:
    rec = RequestRecord(index=0)
    fill_record(rec, ex, "chat")
    assert rec.error_type is None, rec.error_message
    return rec


def test_reasoning_content_then_content_is_split_and_stamped() -> None:
    rec = _filled(_stream([{"role": "assistant", "content": ""}, {"reasoning_content": "a"},
                           {"reasoning_content": " b"}, {"content": "c"}, {"content": " d"}],
                          usage={"prompt_tokens": 3, "completion_tokens": 4,
                                 "completion_tokens_details": {"reasoning_tokens": 2}}))
    assert rec.first_token_ns == rec.first_reasoning_ns == 20  # TTFT: either kind
    assert rec.first_answer_ns == 40 and rec.last_token_ns == 50
    assert rec.chunk_ns.tolist() == [20, 30, 40, 50]
    assert (rec.reasoning_text, rec.output_text) == ("a b", "a bc d")
    assert (rec.reasoning_tokens, rec.reasoning_tokens_source) == (2, "server")
    assert rec.output_tokens == 4
    doc = rec.to_json()
    assert (doc["first_reasoning_ns"], doc["first_answer_ns"]) == (20, 40)
    assert "reasoning_text" not in doc and "output_text" not in doc
    assert RequestRecord.from_json(doc).first_answer_ns == 40


def test_openai_style_reasoning_and_a_delta_carrying_both_keys_count_once() -> None:
    rec = _filled(_stream([{"reasoning": "x"}, {"reasoning_content": "y", "reasoning": "y"},
                           {"content": "z"}]))
    assert rec.reasoning_text == "xy" and rec.output_text == "xyz"
    assert (rec.first_reasoning_ns, rec.first_answer_ns) == (10, 30)
    assert rec.reasoning_tokens is None  # no usage: the profile's tokenizer counts the text


def test_an_answer_that_never_left_reasoning_has_no_answer_stamp() -> None:
    rec = _filled(_stream([{"reasoning_content": "a"}, {"reasoning_content": "b"}]))
    assert rec.first_reasoning_ns == 10 and rec.first_answer_ns is None
    assert rec.to_json()["first_answer_ns"] is None


def test_a_plain_stream_keeps_its_record_as_it_was() -> None:
    # a server that always reports the details (0 reasoning tokens) and sends no reasoning
    rec = _filled(_stream([{"content": "a"}, {"content": "b"}],
                          usage={"prompt_tokens": 1, "completion_tokens": 2,
                                 "completion_tokens_details": {"reasoning_tokens": 0}}))
    assert rec.first_reasoning_ns is None and rec.first_answer_ns is None
    assert not rec.reasoned
    assert not [k for k in rec.to_json() if "reason" in k or "answer" in k]


def test_a_non_streamed_message_with_reasoning_is_split_at_the_body() -> None:
    body = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok",
                                                 "reasoning_content": "think"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 3,
                      "completion_tokens_details": {"reasoning_tokens": True}}}
    ex = Exchange(sent_ns=0, status=200, headers={"content-type": "application/json"},
                  pieces=[(70, json.dumps(body).encode())])
    rec = _filled(ex)
    assert rec.output_text == "okthink" and rec.reasoning_text == "think"
    assert rec.first_reasoning_ns == rec.first_answer_ns == rec.last_token_ns == 70
    assert rec.reasoning_tokens is None  # a boolean is no count
