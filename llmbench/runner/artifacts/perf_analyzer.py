"""``profile_export.json`` in perf_analyzer's format: the measured requests, epoch ns.

One experiment ``{mode, value}``, every measured request that completed with its send time,
payload, response times and responses, the window boundaries, ``version``, ``service_kind`` and
``endpoint``; epoch nanoseconds (our ``perf_counter_ns`` stamps plus one offset taken when the
point started), so GenAI-Perf's profile-data parser and ``process-export-files`` read it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Sequence
from json.encoder import encode_basestring, encode_basestring_ascii
from pathlib import Path
from typing import Any

from llmbench import __version__
from llmbench.api.results import PointResult
from llmbench.runner.artifacts.genai_perf_csv import streamed
from llmbench.runner.client.records import SOURCE_SERVER, RequestRecord

__all__ = ["perf_analyzer_export", "write_perf_analyzer_export"]

def _split(text: str, n: int) -> list[str]:
    """``text`` cut into ``n`` consecutive pieces of near-equal length."""
    if n <= 1:
        return [text]
    size = len(text)
    return [text[i * size // n:(i + 1) * size // n] for i in range(n)]


def _usage(rec: RequestRecord) -> dict[str, int] | None:
    if rec.output_tokens_source != SOURCE_SERVER or rec.output_tokens is None:
        return None
    prompt = rec.input_tokens if rec.input_tokens_source == SOURCE_SERVER else None
    usage = {"completion_tokens": rec.output_tokens}
    if prompt is not None:
        usage = {"prompt_tokens": prompt, **usage, "total_tokens": prompt + rec.output_tokens}
    return usage


def _responses(rec: RequestRecord, n: int, endpoint_type: str, streaming: bool,
               model: str) -> list[str]:
    """The response bodies of one request in OpenAI's shapes, one per response timestamp.

    The client keeps the arrival time of every chunk that carried content and the whole
    text, not each chunk's text: the text is cut into as many pieces as chunks arrived, so
    every response holds content (GenAI-Perf drops empty ones with their timestamps) and the
    pieces join to the exact output text. Token counts per chunk are approximate for that
    reason; TTFT, request latency, ITL, OSL, ISL and throughput read from the file are exact.
    """
    ident = f"llmbench-{rec.index}"
    text = rec.output_text or ""
    usage = _usage(rec)
    if endpoint_type == "embeddings":
        doc: dict[str, Any] = {"object": "list", "model": model,
                               "data": [{"object": "embedding", "index": 0, "embedding": []}]}
        return [json.dumps(doc)]
    chat = endpoint_type == "chat"
    if not streaming:
        choice: dict[str, Any] = (
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": None}
            if chat
            else {"index": 0, "text": text, "finish_reason": None}
        )
        doc = {"id": ident, "object": "chat.completion" if chat else "text_completion",
               "model": model, "choices": [choice]}
        if usage is not None:
            doc["usage"] = usage
        return [json.dumps(doc)]
    # One SSE event per chunk; only the content differs, so the JSON around it is built once.
    head = json.dumps({"id": ident, "object": "chat.completion.chunk" if chat else
                       "text_completion", "model": model})[:-1]
    before = head + (', "choices": [{"index": 0, "delta": {"content": ' if chat
                     else ', "choices": [{"index": 0, "text": ')
    after = "}}]}\n\n" if chat else "}]}\n\n"
    pieces = _split(text, n)
    # json.dumps(piece) to the byte, without its per-call encoder: a tenth of the time, and
    # this runs once per chunk of every request (half a million at the c256 ceiling)
    quote = encode_basestring_ascii
    out = [f"data: {before}{quote(piece)}{after}" for piece in pieces]
    if usage is not None:
        last = after.rstrip("\n").removesuffix("}")
        out[-1] = (f"data: {before}{quote(pieces[-1])}{last}, "
                   f'"usage": {json.dumps(usage)}}}\n\n')
    return out


def _export_parts(
    records: Sequence[RequestRecord],
    summary: PointResult,
    bodies: Sequence[bytes | str],
    epoch_offset_ns: int,
) -> tuple[dict[str, Any], Iterator[dict[str, Any]], list[int], dict[str, Any]]:
    """The experiment, its requests (lazily, one at a time), its window boundaries and the
    document's top-level keys of :func:`perf_analyzer_export`."""
    s = summary.input_config or {}
    mode = s.get("mode")
    if mode == "request_rate":
        experiment: dict[str, Any] = {
            "mode": "request_rate", "value": float(s.get("request_rate") or 0.0)
        }
    elif mode in ("fixed_schedule", "session_concurrency"):
        # perf_analyzer's id of these experiments: neither a concurrency nor a rate
        # ({0, 0.0}), which its exporter writes as request_rate 0.0.
        experiment = {"mode": "request_rate", "value": 0.0}
    else:
        experiment = {"mode": "concurrency", "value": int(s.get("concurrency") or 1)}
    endpoint_type = str(s.get("endpoint_type", "chat"))
    streaming = streamed(summary)
    model = str(s.get("model") or "")
    off = epoch_offset_ns
    payloads = [b.decode("utf-8", "replace") if isinstance(b, bytes) else b for b in bodies]

    def requests() -> Iterator[dict[str, Any]]:
        measured = sorted((r for r in records if not r.warmup and r.ok), key=lambda r: r.sent_ns)
        for rec in measured:
            stamps = list(rec.chunk_ns) or [rec.last_token_ns or rec.sent_ns]
            inputs: dict[str, Any] = {
                "payload": payloads[rec.index % len(payloads)] if payloads else "{}"
            }
            if rec.session_id is not None:  # as perf_analyzer records a session's turns
                inputs["session_id"] = str(rec.session_id)
                if rec.turn_delay_ms is not None:
                    inputs["delay"] = int(rec.turn_delay_ms)
            yield {
                "timestamp": rec.sent_ns + off,
                "request_inputs": inputs,
                "response_timestamps": [t + off for t in stamps],
                "response_outputs": [
                    {"response": r}
                    for r in _responses(rec, len(stamps), endpoint_type, streaming, model)
                ],
            }

    win = summary.window
    bounds = [] if win.start_ns is None or win.end_ns is None else [win.start_ns + off,
                                                                     win.end_ns + off]
    top = {
        "version": f"llmbench {__version__}",
        "service_kind": "openai",
        "endpoint": str(s.get("endpoint") or "").lstrip("/"),
    }
    return experiment, requests(), bounds, top


def perf_analyzer_export(
    records: Sequence[RequestRecord],
    summary: PointResult,
    bodies: Sequence[bytes | str],
    epoch_offset_ns: int,
) -> dict[str, Any]:
    """``profile_export.json`` as perf_analyzer writes it (see the module docstring).

    Every measured request that completed is one entry of ``requests`` in send order (warm-up
    requests and failures are counted in ``profile_export_genai_perf.json`` and kept in our
    records file); ``payload`` is the exact body sent, as a JSON string (perf_analyzer's
    ``request_inputs``); timestamps are epoch ns: ``perf_counter_ns + epoch_offset_ns``.
    ``window_boundaries`` is the measurement window ``[T_x, T_y]``.
    """
    experiment, requests, bounds, top = _export_parts(records, summary, bodies, epoch_offset_ns)
    entry = {"experiment": experiment, "requests": list(requests), "window_boundaries": bounds}
    return {"experiments": [entry], **top}


def write_perf_analyzer_export(
    path: Path,
    records: Sequence[RequestRecord],
    summary: PointResult,
    bodies: Sequence[bytes | str],
    epoch_offset_ns: int,
) -> None:
    """:func:`perf_analyzer_export` written one request at a time (compact, UTF-8, as
    perf_analyzer's rapidjson writer), so a long run's export never sits whole in memory."""
    experiment, requests, bounds, top = _export_parts(records, summary, bodies, epoch_offset_ns)

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    quote = encode_basestring  # json.dumps(text, ensure_ascii=False), without its encoder

    def dump_request(request: dict[str, Any]) -> str:
        # what dump(request) writes, byte for byte; the responses (the last key, one string
        # per chunk, most of the file) are written by hand: the generic encoder's walk over
        # their dicts cost more than the escaping itself
        outputs = request.pop("response_outputs")
        return (dump(request)[:-1] + ',"response_outputs":['
                + ",".join(['{"response":' + quote(o["response"]) + "}" for o in outputs])
                + "]}")

    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        f.write('{"experiments":[{"experiment":' + dump(experiment) + ',"requests":[')
        for i, request in enumerate(requests):
            f.write(("," if i else "") + dump_request(request))
        f.write('],"window_boundaries":' + dump(bounds) + "}]," + dump(top)[1:])
    os.replace(tmp, path)
