"""Workload: the request bodies a load point sends, prepared before the first send.

Why prepared up front: the hot path must do no JSON or tokenizer work, so every distinct
request is serialised to ``bytes`` here, once; the load generator sends
``bodies[i % len(bodies)]`` (like GenAI-Perf's ``--num-dataset-entries``, default 100
distinct prompts cycled over the request count; :class:`RequestCycle` does the same for
callers that want an iterator).

Synthetic prompts have an *exact* token count under the chosen tokenizer, because ISL is the
independent variable of every sweep and "about 1024" hides prefill effects:

* with a tokenizer that can list its single-token words (the embedded default, and any local
  Hugging Face tokenizer whose vocabulary has " word" tokens), a prompt of N tokens is N such
  words -- exact by construction, and checked with one batched encode;
* otherwise (``--tokenizer server``, odd vocabularies), words are added and removed, and short
  fillers appended, until ``tokenizer.count(text) == N`` (a few ``count`` calls per prompt).

Counts exclude special tokens and chat templates (see ``tokenizer.py``).

Example::

    cfg = WorkloadConfig(synthetic_input_tokens_mean=1024, output_tokens_mean=256,
                         model="m", streaming=True, extra_inputs={"ignore_eos": True})
    reqs = build_requests(cfg, default_tokenizer(), 100)
    reqs[0].input_tokens   # -> 1024
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from llmbench.runner.workload.config import WorkloadConfig
from llmbench.runner.workload.datasets import HASH_BLOCK_TOKENS, InputRow, read_input_rows
from llmbench.tokenizer import Tokenizer, default_tokenizer

__all__ = [
    "PreparedRequest",
    "PromptBuilder",
    "RequestCycle",
    "build_requests",
    "build_session_turns",
    "conversation_tokens",
    "inputs_json",
    "write_inputs_json",
]


# Independent random streams, so that e.g. changing --output-tokens-stddev does not change
# the prompts, and prompt i is the same whatever --num-prompts is.
_STREAM_INPUT_LEN = 1
_STREAM_OUTPUT_LEN = 2
_STREAM_WORDS = 3
_STREAM_MODEL = 4
_STREAM_PREFIX_WORDS = 5
_STREAM_PREFIX_PICK = 6
_STREAM_BLOCKS = 7
_STREAM_TRACE = 8

# Appended one at a time to close a small token deficit; nearly every tokenizer has each as
# one token, and each candidate is checked, so a wrong guess only costs a call.
_FILLERS = (" a", " I", " the", " of", " to", " and", ".", ",", " is", " in", "s", "!", "?")


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


# -- synthetic prompts -----------------------------------------------------------------------


def _sample_lengths(rng: np.random.Generator, mean: int, stddev: float, n: int) -> list[int]:
    """``n`` lengths from N(mean, stddev), rounded and clamped to at least 1."""
    if n <= 0:
        return []
    if stddev <= 0:
        return [int(mean)] * n
    draws = np.rint(rng.normal(mean, stddev, size=n))
    return [int(x) for x in np.maximum(draws, 1)]


def _rng(seed: int, stream: int, *extra: int) -> np.random.Generator:
    return np.random.default_rng([seed, stream, *extra])


def _count_many(tokenizer: Tokenizer, texts: Sequence[str]) -> list[int]:
    batch = getattr(tokenizer, "count_batch", None)
    if batch is not None:
        return list(batch(texts))
    return [tokenizer.count(t) for t in texts]


class PromptBuilder:
    """Builds prompts of an exact token count for one tokenizer.

    Create once per tokenizer (it inspects the vocabulary), then call :meth:`build_many`.
    """

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        own = tokenizer.single_token_words()
        # "exact": the tokenizer itself guarantees one token per " word".
        self.exact = len(own) >= 32
        words = own if self.exact else default_tokenizer().single_token_words()
        self._words = words
        self._spaced = np.array([" " + w for w in words], dtype=object)
        self._start = self._start_words(words) if self.exact else []
        self._tokens_per_word: float | None = None
        # Re-encoding every prompt costs ~1 us per token; skip it where counts provably add
        # up (the structure of the pre-tokeniser), but still check one prompt as insurance.
        add_up = getattr(tokenizer, "words_add_up", None)
        self.verify_all = not (self.exact and add_up is not None and add_up())

    def _start_words(self, words: list[str]) -> list[str]:
        """Words that are one token also without the leading space (to begin a prompt)."""
        cands = [w.capitalize() for w in words[:2000]] + words[:2000]
        counts = _count_many(self.tokenizer, cands)
        return [w for w, c in zip(cands, counts, strict=True) if c == 1]

    # The fast path: exactly `target` single-token words.
    def _compose(self, target: int, rng: np.random.Generator, continuation: bool = False) -> str:
        picks = self._spaced[rng.integers(0, len(self._spaced), size=target)]
        if continuation:  # " w1 w2 ...": appended to a text, each word stays one token
            return "".join(picks)
        if self._start:
            first = self._start[int(rng.integers(0, len(self._start)))]
            return first + "".join(picks[1:])
        return "".join(picks)

    def build_many(
        self, targets: Sequence[int], seed: int, stream: int = _STREAM_WORDS
    ) -> list[str]:
        """One prompt per target count; prompt ``i`` depends only on ``(seed, i, targets[i])``
        (and ``stream``, so that e.g. prefix prompts are not the first synthetic prompts).

        Raises:
            ValueError: if the tokenizer cannot produce a text of some exact count.
        """
        if not self.exact:
            return [self.fit(t, _rng(seed, stream, i)) for i, t in enumerate(targets)]
        texts = [self._compose(t, _rng(seed, stream, i)) for i, t in enumerate(targets)]
        if not texts:
            return texts
        if not self.verify_all and self.tokenizer.count(texts[0]) != targets[0]:
            self.verify_all = True
        if not self.verify_all:
            return texts
        counts = _count_many(self.tokenizer, texts)
        for i, (t, c) in enumerate(zip(targets, counts, strict=True)):
            if c != t:  # a word pair merged after all: search instead
                texts[i] = self.fit(t, _rng(seed, stream, i, 1))
        return texts

    def extend_many(
        self, heads: Sequence[str], head_tokens: Sequence[int], targets: Sequence[int],
        seed: int, stream: int,
    ) -> list[str]:
        """``heads[i]`` followed by a text of ``targets[i]`` tokens, so that the whole has
        exactly ``head_tokens[i] + targets[i]`` tokens and starts with ``heads[i]`` verbatim
        (a shared prefix stays byte-identical, as prefix caching needs).

        Raises:
            ValueError: if no continuation of the exact count is found for some head.
        """
        out: list[str] = []
        for i, (head, t) in enumerate(zip(heads, targets, strict=True)):
            rng = _rng(seed, stream, i)
            if self.exact:
                out.append(head + self._compose(t, rng, continuation=True))
            else:
                out.append(head + " " + self.fit(t, rng))
        counts = _count_many(self.tokenizer, out)
        for i, c in enumerate(counts):
            want = head_tokens[i] + targets[i]
            if c != want:
                out[i] = self._fit_after(heads[i], want, targets[i], _rng(seed, stream, i, 1))
        return out

    def _fit_after(self, head: str, want: int, target: int, rng: np.random.Generator) -> str:
        """A continuation of ``head`` found by search when the words merged at the seam."""
        for delta in (0, -1, 1, -2, 2):
            if target + delta < 1:
                continue
            text = head + " " + self.fit(target + delta, rng)
            if self.tokenizer.count(text) == want:
                return text
        raise ValueError(
            f"could not extend a prefix to exactly {want} tokens with tokenizer "
            f"{self.tokenizer.name!r}; try another --tokenizer"
        )

    def build(self, target: int, seed: int = 0) -> str:
        """One prompt of exactly ``target`` tokens."""
        return self.build_many([target], seed)[0]

    def _ratio(self) -> float:
        """Tokens per space-joined word under this tokenizer (measured once)."""
        if self._tokens_per_word is None:
            rng = _rng(0, 0)
            sample = "".join(self._spaced[rng.integers(0, len(self._spaced), size=400)])
            self._tokens_per_word = max(self.tokenizer.count(sample) / 400, 0.05)
        return self._tokens_per_word

    def fit(self, target: int, rng: np.random.Generator) -> str:
        """Search for a text of exactly ``target`` tokens using only ``count`` calls.

        Takes the longest prefix of a random word sequence with at most ``target`` tokens
        (interpolation search: counts grow almost linearly with words), then appends short
        fillers one by one, dropping words when a filler overshoots. Works for any
        tokenizer, local or remote.
        """
        if target < 1:
            raise ValueError(f"cannot build a prompt of {target} tokens")
        count = self.tokenizer.count
        ratio = self._ratio()
        words: list[str] = []

        def ensure(k: int) -> None:
            while len(words) < k:
                more = max(k - len(words), 64)
                idx = rng.integers(0, len(self._spaced), size=more)
                words.extend(str(self._spaced[j]) for j in idx)

        def text(k: int) -> str:
            ensure(k)
            return "".join(words[:k]).lstrip(" ")

        lo, c_lo = 0, 0  # count(text(lo)) == c_lo <= target
        hi: int | None = None
        c_hi = 0
        k = max(1, int(target / ratio))
        for _ in range(64):
            c = count(text(k))
            if c <= target:
                lo, c_lo = k, c
            else:
                hi, c_hi = k, c
            if c == target or (hi is not None and hi - lo <= 1):
                break
            if hi is None:
                if lo > 0:  # what this text actually gives beats the global estimate
                    ratio = max(c_lo / lo, 0.05)
                k = lo + max(1, math.ceil((target - c_lo) / ratio))
            else:
                guess = lo + (target - c_lo) * (hi - lo) / max(c_hi - c_lo, 1)
                k = min(max(int(round(guess)), lo + 1), hi - 1)
        base = text(lo)
        for _ in range(8):  # drop a word at a time if fillers cannot close the gap
            result = self._fill(base, c_lo, target)
            if result is not None:
                return result
            if lo == 0:
                break
            lo -= 1
            base = text(lo)
            c_lo = count(base)
        raise ValueError(
            f"could not build a prompt of exactly {target} tokens with tokenizer "
            f"{self.tokenizer.name!r}; try another --tokenizer"
        )

    def _fill(self, text: str, current: int, target: int) -> str | None:
        count = self.tokenizer.count
        for _ in range(4 * (target - current) + 8):
            if current == target:
                return text
            for filler in _FILLERS:
                piece = filler if text else filler.lstrip(" ")
                c = count(text + piece)
                if current < c <= target:
                    text, current = text + piece, c
                    break
            else:
                return None
        return text if current == target else None


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
        prompts = _file_prompts(rows, tokenizer, cfg.random_seed)
        file_outputs = [r.output_tokens for r in rows]
        input_counts = _count_many(
            tokenizer, [p if isinstance(p, str) else _message_text(p) for p in prompts]
        )
        replies = [(i, r.reply) for i, r in enumerate(rows) if r.reply]
        reply_outputs = [None] * len(rows)
        for (i, _), c in zip(
            replies, _count_many(tokenizer, [t for _, t in replies]), strict=True
        ):
            reply_outputs[i] = max(c, 1)
    else:
        lengths = _sample_lengths(
            _rng(cfg.random_seed, _STREAM_INPUT_LEN),
            cfg.synthetic_input_tokens_mean,
            cfg.synthetic_input_tokens_stddev,
            count,
        )
        builder = PromptBuilder(tokenizer)
        if cfg.num_prefix_prompts:
            plen = cfg.prefix_prompt_length
            pool = builder.build_many(
                [plen] * cfg.num_prefix_prompts, cfg.random_seed, _STREAM_PREFIX_WORDS
            )
            picks = _rng(cfg.random_seed, _STREAM_PREFIX_PICK).integers(
                0, len(pool), size=count
            )
            prompts = list(
                builder.extend_many(
                    [pool[int(k)] for k in picks], [plen] * count, lengths, cfg.random_seed,
                    _STREAM_WORDS,
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
                _rng(cfg.random_seed, _STREAM_OUTPUT_LEN), out_mean, cfg.output_tokens_stddev, n
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
    for i, n in zip(owners, _count_many(tokenizer, texts), strict=True):
        out[i] += n
    return out


def _file_prompts(
    rows: Sequence[InputRow], tokenizer: Tokenizer, seed: int
) -> list[str | list[dict[str, Any]]]:
    """The prompt of each row; Mooncake rows without text get a synthetic prompt of their
    ``input_length``, built from their ``hash_ids`` blocks so that rows naming the same block
    share its text (block ``h`` is the same words wherever it appears, cut short as the last
    block of a row)."""
    out: list[str | list[dict[str, Any]]] = []
    builder: PromptBuilder | None = None
    blocks: dict[int, np.ndarray[Any, Any]] = {}
    synthetic: list[tuple[int, InputRow]] = []
    plain: list[tuple[int, int]] = []  # (position, input_length) of rows without hash_ids
    for i, row in enumerate(rows):
        if row.prompt is not None:
            out.append(row.prompt)
            continue
        builder = builder or PromptBuilder(tokenizer)
        assert row.input_length is not None
        if row.hash_ids is None:
            out.append("")
            plain.append((i, row.input_length))
            continue
        if not builder.exact:
            raise ValueError(
                f"{row.where}: 'hash_ids' need a tokenizer whose vocabulary lists its "
                f"single-token words (e.g. --tokenizer default); {tokenizer.name!r} does not"
            )
        parts = []
        for k, h in enumerate(row.hash_ids):
            if h not in blocks:
                rng = _rng(seed, _STREAM_BLOCKS, h)
                words = builder._spaced
                blocks[h] = words[rng.integers(0, len(words), size=HASH_BLOCK_TOKENS)]
            size = (
                row.input_length - k * HASH_BLOCK_TOKENS
                if k == len(row.hash_ids) - 1 else HASH_BLOCK_TOKENS
            )
            parts.append("".join(blocks[h][:size]))
        out.append("".join(parts))
        synthetic.append((i, row))
    if plain and builder is not None:
        made = builder.build_many([n for _, n in plain], seed, _STREAM_TRACE)
        for (i, _), text in zip(plain, made, strict=True):
            out[i] = text
    if synthetic:
        texts = [str(out[i]) for i, _ in synthetic]
        for (_i, row), c in zip(synthetic, _count_many(tokenizer, texts), strict=True):
            if c != row.input_length:
                raise ValueError(
                    f"{row.where}: the synthetic prompt of its 'hash_ids' has {c} tokens, not "
                    f"'input_length' {row.input_length}, under tokenizer {tokenizer.name!r}"
                )
    return out


def _assign_models(cfg: WorkloadConfig, n: int) -> list[str | None]:
    """The model of each of ``n`` prompts (``None``: ``cfg.model``), as GenAI-Perf assigns them."""
    if not cfg.models:
        return [None] * n
    if cfg.model_selection_strategy == "random":
        picks = _rng(cfg.random_seed, _STREAM_MODEL).integers(0, len(cfg.models), size=n)
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
