"""Incremental Server-Sent Events parser.

Bytes arrive in arbitrary pieces: several events in one read, one event split across reads,
``\\r\\n`` or ``\\r`` line endings, comments (``: keep-alive``) and events with no data. The
parser returns the ``data`` payload of each complete event, in order, and nothing else:
event names, ids and retry fields carry nothing a benchmark needs.

Example:
    >>> p = SSEParser()
    >>> p.feed(b'data: {"a": 1}\\n\\ndata: [DO')
    [b'{"a": 1}']
    >>> p.feed(b'NE]\\n\\n')
    [b'[DONE]']
"""

from __future__ import annotations

DONE = b"[DONE]"


class SSEParser:
    """Turns a byte stream into SSE ``data`` payloads, one per dispatched event."""

    __slots__ = ("_buf", "_pending_cr")

    def __init__(self) -> None:
        self._buf = b""
        self._pending_cr = False

    def feed(self, data: bytes) -> list[bytes]:
        """Consumes ``data`` and returns the payloads of the events it completed."""
        if self._pending_cr or b"\r" in data:
            data = self._normalise(data)
        blocks = (self._buf + data if self._buf else data).split(b"\n\n")
        self._buf = blocks.pop()  # the unfinished event, if any
        events: list[bytes] = []
        for block in blocks:
            if block[:6] == b"data: " and b"\n" not in block:  # the common case, kept cheap
                events.append(block[6:])
            else:
                payload = _event_payload(block)
                if payload is not None:
                    events.append(payload)
        return events

    def close(self) -> list[bytes]:
        """Ends the stream; a final event without its blank line is dropped, per the spec."""
        self._buf = b""
        self._pending_cr = False
        return []

    def _normalise(self, data: bytes) -> bytes:
        # A read that ends in "\r" ends a line now; if the next read starts with "\n", that
        # "\n" is the second half of the same "\r\n" and must not end another line.
        if self._pending_cr and data.startswith(b"\n"):
            data = data[1:]
        self._pending_cr = data.endswith(b"\r")
        return data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")


def _event_payload(block: bytes) -> bytes | None:
    """The joined ``data`` lines of one event block, or None when it has none."""
    datas: list[bytes] = []
    for line in block.split(b"\n"):
        if not line or line.startswith(b":"):
            continue
        name, sep, value = line.partition(b":")
        if name != b"data":
            continue
        if sep and value.startswith(b" "):
            value = value[1:]
        datas.append(value)
    if not datas:
        return None
    return b"\n".join(datas)


def parse_stream(pieces: list[bytes]) -> list[bytes]:
    """All payloads of a stream given as the pieces it arrived in (for tests and analysis)."""
    parser = SSEParser()
    out: list[bytes] = []
    for piece in pieces:
        out.extend(parser.feed(piece))
    return out
