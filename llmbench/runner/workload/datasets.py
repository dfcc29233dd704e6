"""``--input-file`` and ``--fixed-schedule``: reading GenAI-Perf JSONL rows and ShareGPT files.

Two shapes, told apart row by row, in a JSONL file or a JSON array (ShareGPT's own files are
one JSON array):

* GenAI-Perf's rows: ``text`` (or ``text_input``/``prompt``) or, for chat, ``messages``;
  optional ``output_length``/``max_tokens``; for trace replay ``timestamp`` (ms); and the
  Mooncake trace fields ``input_length`` (a synthetic prompt of that many tokens when the
  row has no text) with ``hash_ids`` (one id per 512-token block: rows naming the same id
  share that block's text, so they share a cacheable prefix).
* ShareGPT conversations: ``{"conversations": [{"from": "human", "value": ...},
  {"from": "gpt", "value": ...}, ...]}`` (``role``/``content`` keys work too): the first
  human turn is the prompt; the reply after it sets the output length (its token count)
  unless the row or ``--output-tokens-mean`` says otherwise. A conversation without a
  human turn is skipped, as vLLM's ShareGPT benchmark skips it.

Every error names the file and the line of the row, so a bad trace is fixed where it is.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "HASH_BLOCK_TOKENS",
    "InputRow",
    "read_input_file",
    "read_input_rows",
    "trace_schedule_ns",
]

#: Tokens per ``hash_ids`` block of a Mooncake-style trace row (GenAI-Perf's default).
HASH_BLOCK_TOKENS = 512

_HUMAN = ("human", "user")
_ASSISTANT = ("gpt", "assistant", "chatgpt", "bard", "model")
_TEXT_KEYS = ("text", "text_input", "prompt")


@dataclass(frozen=True, slots=True)
class InputRow:
    """One prompt of an ``--input-file``.

    Attributes:
        prompt: the text or chat messages; ``None`` for a Mooncake row made synthetic.
        output_tokens: ``output_length``/``max_tokens`` of the row.
        reply: a ShareGPT row's reference answer (its token count is the default output).
        input_length: a Mooncake row's prompt length in tokens (``prompt`` is ``None``).
        hash_ids: a Mooncake row's block ids.
        timestamp_ms: when to send it, for ``--fixed-schedule``.
        where: ``--input-file F line N``, for errors about the row found later.
    """

    prompt: str | list[dict[str, Any]] | None
    output_tokens: int | None = None
    reply: str | None = None
    input_length: int | None = None
    hash_ids: tuple[int, ...] | None = None
    timestamp_ms: float | None = None
    where: str = ""


def _check_messages(value: Any, where: str) -> list[dict[str, Any]]:
    if not isinstance(value, list) or not value:
        raise ValueError(f"{where}: 'messages' must be a non-empty list of chat messages")
    for m in value:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ValueError(f"{where}: each message needs a string 'role'")
        if not isinstance(m.get("content"), str | list):
            raise ValueError(f"{where}: each message needs 'content' (a string or parts list)")
    return value


def _positive_int(obj: dict[str, Any], key: str, where: str) -> int | None:
    if key not in obj:
        return None
    val = obj[key]
    if isinstance(val, bool) or not isinstance(val, int) or val < 1:
        raise ValueError(f"{where}: '{key}' must be a positive integer")
    return val


def _sharegpt_row(obj: dict[str, Any], where: str) -> InputRow | None:
    turns = obj["conversations"]
    if not isinstance(turns, list):
        raise ValueError(f"{where}: 'conversations' must be a list of turns")
    parsed: list[tuple[str, str]] = []
    for k, turn in enumerate(turns):
        if not isinstance(turn, dict):
            raise ValueError(f"{where}: conversations[{k}] must be an object")
        role = turn.get("from", turn.get("role"))
        value = turn.get("value", turn.get("content"))
        if not isinstance(role, str):
            raise ValueError(f"{where}: conversations[{k}] needs a string 'from' (or 'role')")
        if not isinstance(value, str):
            raise ValueError(
                f"{where}: conversations[{k}] needs a string 'value' (or 'content')"
            )
        parsed.append((role.lower(), value))
    first = next((k for k, (role, v) in enumerate(parsed) if role in _HUMAN and v), None)
    if first is None:
        return None
    reply = None
    if first + 1 < len(parsed) and parsed[first + 1][0] in _ASSISTANT:
        reply = parsed[first + 1][1] or None
    out = _positive_int(obj, "output_length", where) or _positive_int(obj, "max_tokens", where)
    return InputRow(parsed[first][1], out, reply=reply, where=where)


def _genai_perf_row(obj: dict[str, Any], where: str, endpoint_type: str) -> InputRow:
    if "session_id" in obj:
        raise ValueError(
            f"{where}: 'session_id' rows are multi-turn sessions, which llmbench does not run"
        )
    prompt: str | list[dict[str, Any]] | None = None
    texts = [k for k in _TEXT_KEYS if k in obj]
    if "messages" in obj:
        if endpoint_type != "chat":
            raise ValueError(
                f"{where}: 'messages' rows need --endpoint-type chat "
                f"(this run uses {endpoint_type}); give 'text' instead"
            )
        prompt = _check_messages(obj["messages"], where)
    elif len(texts) > 1:
        raise ValueError(f"{where}: give only one of {', '.join(repr(k) for k in texts)}")
    elif texts:
        key = texts[0]
        prompt = obj[key]
        if not isinstance(prompt, str) or not prompt:
            raise ValueError(f"{where}: '{key}' must be a non-empty string")
    input_length = _positive_int(obj, "input_length", where)
    hash_ids: tuple[int, ...] | None = None
    if "hash_ids" in obj:
        ids = obj["hash_ids"]
        if not isinstance(ids, list) or not ids or not all(
            isinstance(h, int) and not isinstance(h, bool) and h >= 0 for h in ids
        ):
            raise ValueError(
                f"{where}: 'hash_ids' must be a non-empty list of integers >= 0"
            )
        hash_ids = tuple(ids)
    if prompt is None:
        if input_length is None:
            raise ValueError(
                f"{where}: needs 'text' (or 'prompt'), 'messages', ShareGPT 'conversations' "
                "or a Mooncake 'input_length'"
            )
        if hash_ids is not None:
            last = input_length - (len(hash_ids) - 1) * HASH_BLOCK_TOKENS
            if not 0 < last <= HASH_BLOCK_TOKENS:
                raise ValueError(
                    f"{where}: 'input_length' {input_length} does not fit {len(hash_ids)} "
                    f"'hash_ids' blocks of {HASH_BLOCK_TOKENS} tokens (the last block would "
                    f"have {last})"
                )
    timestamp: float | None = None
    if "timestamp" in obj:
        ts = obj["timestamp"]
        if isinstance(ts, bool) or not isinstance(ts, int | float) or not ts >= 0:
            raise ValueError(f"{where}: 'timestamp' must be a number of milliseconds >= 0")
        timestamp = float(ts)
    out = _positive_int(obj, "output_length", where)
    if out is None:
        out = _positive_int(obj, "max_tokens", where)
    return InputRow(
        prompt, out, input_length=input_length if prompt is None else None,
        hash_ids=hash_ids if prompt is None else None, timestamp_ms=timestamp, where=where,
    )


def _json_entries(text: str, label: str) -> Iterator[tuple[int, Any]]:
    """``(line, value)`` of each entry of a JSON array document, with the line it starts on."""
    dec = json.JSONDecoder()
    pos = text.index("[") + 1
    n = len(text)

    def skip(p: int) -> int:
        while p < n and text[p] in " \t\r\n":
            p += 1
        return p

    pos = skip(pos)
    if pos < n and text[pos] == "]":
        return
    while True:
        line = text.count("\n", 0, pos) + 1
        try:
            value, pos = dec.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{label} line {exc.lineno}: not valid JSON ({exc.msg})") from None
        yield line, value
        pos = skip(pos)
        if pos < n and text[pos] == ",":
            pos = skip(pos + 1)
            continue
        if pos < n and text[pos] == "]":
            if skip(pos + 1) != n:
                line = text.count("\n", 0, pos + 1) + 1
                raise ValueError(f"{label} line {line}: text after the closing ']'")
            return
        line = text.count("\n", 0, pos) + 1
        raise ValueError(f"{label} line {line}: not valid JSON (expected ',' or ']')")


def read_input_rows(path: str | Path, endpoint_type: str = "chat") -> list[InputRow]:
    """Read an ``--input-file``: GenAI-Perf's JSONL rows or ShareGPT conversations (see above),
    one object a line or one JSON array of them. Blank lines are skipped.

    Raises:
        ValueError: naming the file and the line number of the first bad row.
    """
    p = Path(path)
    label = f"--input-file {p}"
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"{label}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ValueError(f"{label}: not UTF-8 text") from None
    entries: Iterator[tuple[int, Any]]
    if text.lstrip().startswith("["):
        entries = _json_entries(text, label)
    else:
        entries = _jsonl_entries(text, label)
    rows: list[InputRow] = []
    skipped = 0
    for lineno, obj in entries:
        where = f"{label} line {lineno}"
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        if "conversations" in obj:
            row = _sharegpt_row(obj, where)
            if row is None:
                skipped += 1
                continue
        else:
            row = _genai_perf_row(obj, where, endpoint_type)
        rows.append(row)
    if not rows:
        why = (
            f"none of its {skipped} conversations has a human turn" if skipped
            else "the file is empty"
        )
        raise ValueError(f"{label}: no prompts ({why})")
    return rows


def _jsonl_entries(text: str, label: str) -> Iterator[tuple[int, Any]]:
    for lineno, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            yield lineno, json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{label} line {lineno}: not valid JSON ({exc.msg})") from None


def read_input_file(path: str | Path, endpoint_type: str = "chat") -> list[tuple[Any, int | None]]:
    """``(prompt, output_tokens)`` of each row of an ``--input-file`` (:func:`read_input_rows`);
    the prompt is ``None`` for a Mooncake row that asks for a synthetic prompt.

    Raises:
        ValueError: naming the file and the line number of the first bad row.
    """
    return [(r.prompt, r.output_tokens) for r in read_input_rows(path, endpoint_type)]


def trace_schedule_ns(path: str | Path, endpoint_type: str = "chat") -> list[int]:
    """``--fixed-schedule``: when each row of the trace is sent, in ns after the first row
    (its ``timestamp`` in ms minus the first row's). Every row needs a ``timestamp``, in
    non-decreasing order.

    Raises:
        ValueError: naming the file and the line of the first row without a usable timestamp.
    """
    rows = read_input_rows(path, endpoint_type)
    offsets: list[int] = []
    first: float | None = None
    last = -math.inf
    for row in rows:
        ts = row.timestamp_ms
        if ts is None:
            raise ValueError(
                f"{row.where}: --fixed-schedule needs a 'timestamp' (ms) in every row"
            )
        if ts < last:
            raise ValueError(
                f"{row.where}: 'timestamp' {ts:g} is earlier than the row before ({last:g}); "
                "--fixed-schedule replays rows in file order, so sort the trace by timestamp"
            )
        last = ts
        first = ts if first is None else first
        offsets.append(int(round((ts - first) * 1e6)))
    return offsets
