"""SSE parsing: any split or merge of a stream gives the same events."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from llmbench.runner.client.sse import DONE, SSEParser, parse_stream

EVENTS = [
    {"choices": [{"delta": {"role": "assistant", "content": ""}}]},
    {"choices": [{"delta": {"content": " hello"}}]},
    {"choices": [{"delta": {"content": " wörld\u2028"}}]},
    {"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}},
]


def _stream(line_end: bytes = b"\n") -> tuple[bytes, list[bytes]]:
    payloads = [json.dumps(e).encode() for e in EVENTS] + [DONE]
    parts = [b": keep-alive" + line_end + line_end]
    for i, p in enumerate(payloads):
        parts.append(b"data: " + p + line_end + line_end)
        if i == 1:
            parts.append(b":ping" + line_end + line_end)  # a comment-only event: no payload
    return b"".join(parts), payloads


def test_whole_stream_in_one_read() -> None:
    raw, expected = _stream()
    assert SSEParser().feed(raw) == expected


def test_event_split_across_reads_is_returned_once_complete() -> None:
    p = SSEParser()
    assert p.feed(b'data: {"a"') == []
    assert p.feed(b": 1}\n") == []
    assert p.feed(b"\n") == [b'{"a": 1}']


def test_multi_line_data_is_joined_with_newlines_and_other_fields_ignored() -> None:
    raw = b"event: message\nid: 7\ndata: first\ndata:second\nretry: 10\n\n"
    assert SSEParser().feed(raw) == [b"first\nsecond"]


def test_crlf_split_between_reads() -> None:
    raw, expected = _stream(b"\r\n")
    p = SSEParser()
    out = []
    for i in range(len(raw)):
        out.extend(p.feed(raw[i : i + 1]))
    assert out == expected


def test_bare_cr_line_endings() -> None:
    raw, expected = _stream(b"\r")
    assert parse_stream([raw]) == expected


def test_incomplete_final_event_is_dropped() -> None:
    p = SSEParser()
    assert p.feed(b"data: [DONE]") == []
    assert p.close() == []


@settings(max_examples=200, deadline=None)
@given(
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
    line_end=st.sampled_from([b"\n", b"\r\n", b"\r"]),
    repeat=st.integers(min_value=1, max_value=5),
)
def test_any_split_gives_the_same_events(cuts: list[int], line_end: bytes, repeat: int) -> None:
    raw, expected = _stream(line_end)
    raw, expected = raw * repeat, expected * repeat
    points = sorted({c % (len(raw) + 1) for c in cuts})
    pieces = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    assert parse_stream(pieces) == expected
