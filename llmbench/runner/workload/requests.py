"""Request bodies: what a load point sends, serialised before the first send.

Why prepared up front: the hot path must do no JSON or tokenizer work, so every distinct
request is serialised to ``bytes`` here, once; the load generator sends
``bodies[i % len(bodies)]`` (like GenAI-Perf's ``--num-dataset-entries``, default 100
distinct prompts cycled over the request count; :class:`RequestCycle` does the same for
callers that want an iterator).

Prompts come from :mod:`~llmbench.runner.workload.prompts` (synthetic, of an exact token
count) or :mod:`~llmbench.runner.workload.datasets` (``--input-file`` rows).

Example::

    cfg = WorkloadConfig(synthetic_input_tokens_mean=1024, output_tokens_mean=256,
                         model="m", streaming=True, extra_inputs={"ignore_eos": True})
    reqs = build_requests(cfg, default_tokenizer(), 100)
    reqs[0].input_tokens   # -> 1024
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from llmbench.runner.workload.config import WorkloadConfig
from llmbench.runner.workload.datasets import read_input_rows
from llmbench.runner.workload.prompts import (
    STREAM_INPUT_LEN,
    STREAM_MODEL,
    STREAM_OUTPUT_LEN,
    STREAM_PREFIX_PICK,
    STREAM_PREFIX_WORDS,
    STREAM_WORDS,
    PromptBuilder,
    count_many,
    file_prompts,
    stream_rng,
)
from llmbench.tokenizer import Tokenizer

__all__ = [
    "PreparedRequest",
    "RequestCycle",
    "build_requests",
    "build_session_turns",
    "conversation_tokens",
    "inputs_json",
    "write_inputs_json",
]


@dataclass(frozen=True, slots=True)
class PreparedRequest:
    """One distinct request, ready to send.

    Attributes:
        body: the JSON body, serialised once so the hot path does no JSON work.
        input_tokens: the prompt's client-side token count (content only, no template).
        requested_output_tokens: ``max_tokens`` sent, or ``None`` when the server decides.
        prompt: the text, or the chat messages of an ``--input-file`` row (for inputs.json).
        index: position among the distinct requests.
    """

    body: bytes
    input_tokens: int
    requested_output_tokens: int | None
    prompt: str | list[dict[str, Any]]
    index: int = 0


class RequestCycle:
    """An endless, O(1)-per-item iterator over the distinct requests (duration-bound runs)."""

    def __init__(self, requests: Sequence[PreparedRequest]) -> None:
        if not requests:
            raise ValueError("RequestCycle needs at least one request")
        self._items = tuple(requests)
        self._n = len(self._items)
        self._i = 0

    def __iter__(self) -> Iterator[PreparedRequest]:
        return self

    def __next__(self) -> PreparedRequest:
        item = self._items[self._i]
        self._i = (self._i + 1) % self._n
        return item

    def __getitem__(self, i: int) -> PreparedRequest:
        """The request sent as number ``i`` (``i mod distinct``)."""
        return self._items[i % self._n]


def _sample_lengths(rng: np.random.Generator, mean: int, stddev: float, n: int) -> list[int]:
    """``n`` lengths from N(mean, stddev), rounded and clamped to at least 1."""
    if n <= 0:
        return []
    if stddev <= 0:
        return [int(mean)] * n
    draws = np.rint(rng.normal(mean, stddev, size=n))
    return [int(x) for x in np.maximum(draws, 1)]


def _message_text(messages: list[dict[str, Any]]) -> str:
    parts: list[str] = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(
                str(c.get("text", "")) for c in content if isinstance(c, dict)
            )
    return "\n".join(parts)


# -- bodies ----------------------------------------------------------------------------------


def _body(
    cfg: WorkloadConfig,
    prompt: str | list[dict[str, Any]],
    max_tokens: int | None,
    model: str | None = None,
) -> bytes:
    obj: dict[str, Any] = {"model": model or cfg.model}
    if cfg.endpoint_type == "embeddings":
        obj["input"] = prompt
    else:
        if cfg.endpoint_type == "chat":
            obj["messages"] = (
                prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]
            )
        else:
            obj["prompt"] = prompt
        obj["stream"] = bool(cfg.streaming)
        if cfg.streaming:
            obj["stream_options"] = {"include_usage": True}
        if max_tokens is not None:
            obj["max_tokens"] = max_tokens
            if cfg.output_tokens_mean_deterministic:
                obj["min_tokens"] = max_tokens
    obj.update(cfg.extra_inputs)
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def build_requests(
    cfg: WorkloadConfig, tokenizer: Tokenizer, count: int
) -> list[PreparedRequest]:
    """Prepare ``count`` distinct requests (synthetic, or the first rows of ``--input-file``).

    The load generator cycles them (request ``i`` sends ``result[i % len(result)]``), so
    ``count`` is normally ``min(request total, num_prompts)``. An input file with fewer rows
    than ``count`` yields one request per row.

    Deterministic: the same config, seed and tokenizer give byte-identical bodies.

    Raises:
        ValueError: bad config, bad input file, or a tokenizer that cannot produce a count.
    """
    cfg.validate()
    if count <= 0:
        return []
    out_mean = cfg.output_mean() if cfg.endpoint_type != "embeddings" else None
    prompts: list[str | list[dict[str, Any]]]
    file_outputs: list[int | None]
    reply_outputs: list[int | None]
    if cfg.input_file is not None:
        rows = read_input_rows(cfg.input_file, cfg.endpoint_type)[:count]
        prompts = file_prompts(rows, tokenizer, cfg.random_seed)
        file_outputs = [r.output_tokens for r in rows]
        input_counts = count_many(
            tokenizer, [p if isinstance(p, str) else _message_text(p) for p in prompts]
        )
        replies = [(i, r.reply) for i, r in enumerate(rows) if r.reply]
        reply_outputs = [None] * len(rows)
        for (i, _), c in zip(
            replies, count_many(tokenizer, [t for _, t in replies]), strict=True
        ):
            reply_outputs[i] = max(c, 1)
    else:
        lengths = _sample_lengths(
            stream_rng(cfg.random_seed, STREAM_INPUT_LEN),
            cfg.synthetic_input_tokens_mean,
            cfg.synthetic_input_tokens_stddev,
            count,
        )
        builder = PromptBuilder(tokenizer)
        if cfg.num_prefix_prompts:
            plen = cfg.prefix_prompt_length
            pool = builder.build_many(
                [plen] * cfg.num_prefix_prompts, cfg.random_seed, STREAM_PREFIX_WORDS
            )
            picks = stream_rng(cfg.random_seed, STREAM_PREFIX_PICK).integers(
                0, len(pool), size=count
            )
            prompts = list(
                builder.extend_many(
                    [pool[int(k)] for k in picks], [plen] * count, lengths, cfg.random_seed,
                    STREAM_WORDS,
                )
            )
            input_counts = [plen + t for t in lengths]
        else:
            prompts = list(builder.build_many(lengths, cfg.random_seed))
            input_counts = lengths
        file_outputs = [None] * count
        reply_outputs = [None] * count
    n = len(prompts)
    sampled: list[int | None] = [None] * n
    if out_mean is not None:
        sampled = list(
            _sample_lengths(
                stream_rng(cfg.random_seed, STREAM_OUTPUT_LEN), out_mean,
                cfg.output_tokens_stddev, n,
            )
        )
    models = _assign_models(cfg, n)
    result = []
    for i, prompt in enumerate(prompts):
        max_tokens = next(
            (v for v in (file_outputs[i], sampled[i], reply_outputs[i]) if v is not None), None
        )
        if cfg.endpoint_type == "embeddings":
            max_tokens = None
        result.append(
            PreparedRequest(
                body=_body(cfg, prompt, max_tokens, models[i]),
                input_tokens=input_counts[i],
                requested_output_tokens=max_tokens,
                prompt=prompt,
                index=i,
            )
        )
    return result


#: Seed offset of the later turns' prompts, so they are not the next sessions' first turns.
_LATER_TURNS_SEED = 7919


def build_session_turns(
    cfg: WorkloadConfig, tokenizer: Tokenizer, turns: Sequence[int]
) -> list[PreparedRequest]:
    """The new user message of every turn of every session, as GenAI-Perf makes them: turn
    ``t`` of session ``s`` is item ``sum(turns[:s]) + t``, its body holding that message
    alone (the load generator puts the history before it). A session's first turn gets the
    shared prefix of ``--num-prefix-prompts`` (GenAI-Perf's rule: later turns extend a
    conversation that already starts with it) and its model; every prompt is distinct.
    """
    if cfg.endpoint_type != "chat":
        raise ValueError("multi-turn sessions (--num-sessions) need --endpoint-type chat")
    if cfg.input_file is not None:
        raise ValueError("multi-turn sessions (--num-sessions) send synthetic turns; remove "
                         "--input-file")
    sessions = len(turns)
    later = sum(turns) - sessions
    firsts = build_requests(cfg, tokenizer, sessions)
    rest = build_requests(
        replace(cfg, num_prefix_prompts=0, random_seed=cfg.random_seed + _LATER_TURNS_SEED),
        tokenizer,
        later,
    )
    out: list[PreparedRequest] = []
    j = 0
    for s, n in enumerate(turns):
        for t in range(n):
            item = firsts[s] if t == 0 else rest[j]
            j += t > 0
            out.append(replace(item, index=len(out)))
    return out


def conversation_tokens(tokenizer: Tokenizer, bodies: Sequence[bytes]) -> list[int]:
    """Client-side input tokens of chat bodies: the sum over their messages (the whole history
    of a session turn) of each one's content tokens, as prompts are counted (no template)."""
    texts: list[str] = []
    owners: list[int] = []
    for i, body in enumerate(bodies):
        messages = json.loads(body).get("messages")
        for m in messages if isinstance(messages, list) else ():
            if isinstance(m, dict):
                texts.append(_message_text([m]))
                owners.append(i)
    out = [0] * len(bodies)
    for i, n in zip(owners, count_many(tokenizer, texts), strict=True):
        out[i] += n
    return out


def _assign_models(cfg: WorkloadConfig, n: int) -> list[str | None]:
    """The model of each of ``n`` prompts (``None``: ``cfg.model``), as GenAI-Perf assigns them."""
    if not cfg.models:
        return [None] * n
    if cfg.model_selection_strategy == "random":
        picks = stream_rng(cfg.random_seed, STREAM_MODEL).integers(0, len(cfg.models), size=n)
        return [cfg.models[int(k)] for k in picks]
    return [cfg.models[i % len(cfg.models)] for i in range(n)]


# -- inputs.json -----------------------------------------------------------------------------


def inputs_json(requests: Sequence[PreparedRequest]) -> dict[str, Any]:
    """GenAI-Perf's ``inputs.json`` document: ``{"data": [{"payload": [body]}, ...]}``.

    One entry per distinct request, holding the exact body that was sent.
    """
    seen: set[int] = set()
    data = []
    for r in requests:
        if r.index in seen:
            continue
        seen.add(r.index)
        data.append({"payload": [json.loads(r.body)]})
    return {"data": data}


def write_inputs_json(path: str | Path, requests: Sequence[PreparedRequest]) -> Path:
    """Write :func:`inputs_json` to ``path`` (a file, or a directory to put ``inputs.json`` in)."""
    p = Path(path)
    if p.is_dir():
        p = p / "inputs.json"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(inputs_json(requests), indent=2, ensure_ascii=False) + "\n",
                 encoding="utf-8")
    return p
