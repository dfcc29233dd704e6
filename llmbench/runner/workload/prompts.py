"""Synthetic prompts of an exact token count under the chosen tokenizer.

Exact because ISL is the independent variable of every sweep and "about 1024" hides prefill
effects:

* with a tokenizer that can list its single-token words (the embedded default, and any local
  Hugging Face tokenizer whose vocabulary has " word" tokens), a prompt of N tokens is N such
  words -- exact by construction, and checked with one batched encode;
* otherwise (``--tokenizer server``, odd vocabularies), words are added and removed, and short
  fillers appended, until ``tokenizer.count(text) == N`` (a few ``count`` calls per prompt).

Counts exclude special tokens and chat templates (see ``tokenizer.py``). The workload's random
streams are numbered here, each seeded apart, so one setting never changes another's draws.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from llmbench.runner.workload.datasets import HASH_BLOCK_TOKENS, InputRow
from llmbench.tokenizer import Tokenizer, default_tokenizer

__all__ = [
    "STREAM_BLOCKS",
    "STREAM_INPUT_LEN",
    "STREAM_MODEL",
    "STREAM_OUTPUT_LEN",
    "STREAM_PREFIX_PICK",
    "STREAM_PREFIX_WORDS",
    "STREAM_TRACE",
    "STREAM_WORDS",
    "PromptBuilder",
    "count_many",
    "file_prompts",
    "stream_rng",
]

# Independent random streams, so that e.g. changing --output-tokens-stddev does not change
# the prompts, and prompt i is the same whatever --num-prompts is.
STREAM_INPUT_LEN = 1
STREAM_OUTPUT_LEN = 2
STREAM_WORDS = 3
STREAM_MODEL = 4
STREAM_PREFIX_WORDS = 5
STREAM_PREFIX_PICK = 6
STREAM_BLOCKS = 7
STREAM_TRACE = 8

# Appended one at a time to close a small token deficit; nearly every tokenizer has each as
# one token, and each candidate is checked, so a wrong guess only costs a call.
_FILLERS = (" a", " I", " the", " of", " to", " and", ".", ",", " is", " in", "s", "!", "?")


def stream_rng(seed: int, stream: int, *extra: int) -> np.random.Generator:
    """The generator of one random stream (``STREAM_*``) of a seed, optionally per item."""
    return np.random.default_rng([seed, stream, *extra])


def count_many(tokenizer: Tokenizer, texts: Sequence[str]) -> list[int]:
    """Token counts of ``texts``, in one batched encode where the tokenizer has one."""
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
        counts = count_many(self.tokenizer, cands)
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
        self, targets: Sequence[int], seed: int, stream: int = STREAM_WORDS
    ) -> list[str]:
        """One prompt per target count; prompt ``i`` depends only on ``(seed, i, targets[i])``
        (and ``stream``, so that e.g. prefix prompts are not the first synthetic prompts).

        Raises:
            ValueError: if the tokenizer cannot produce a text of some exact count.
        """
        if not self.exact:
            return [self.fit(t, stream_rng(seed, stream, i)) for i, t in enumerate(targets)]
        texts = [self._compose(t, stream_rng(seed, stream, i)) for i, t in enumerate(targets)]
        if not texts:
            return texts
        if not self.verify_all and self.tokenizer.count(texts[0]) != targets[0]:
            self.verify_all = True
        if not self.verify_all:
            return texts
        counts = count_many(self.tokenizer, texts)
        for i, (t, c) in enumerate(zip(targets, counts, strict=True)):
            if c != t:  # a word pair merged after all: search instead
                texts[i] = self.fit(t, stream_rng(seed, stream, i, 1))
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
            rng = stream_rng(seed, stream, i)
            if self.exact:
                out.append(head + self._compose(t, rng, continuation=True))
            else:
                out.append(head + " " + self.fit(t, rng))
        counts = count_many(self.tokenizer, out)
        for i, c in enumerate(counts):
            want = head_tokens[i] + targets[i]
            if c != want:
                out[i] = self._fit_after(heads[i], want, targets[i], stream_rng(seed, stream, i, 1))
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
            rng = stream_rng(0, 0)
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


def file_prompts(
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
                rng = stream_rng(seed, STREAM_BLOCKS, h)
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
        made = builder.build_many([n for _, n in plain], seed, STREAM_TRACE)
        for (i, _), text in zip(plain, made, strict=True):
            out[i] = text
    if synthetic:
        texts = [str(out[i]) for i, _ in synthetic]
        for (_i, row), c in zip(synthetic, count_many(tokenizer, texts), strict=True):
            if c != row.input_length:
                raise ValueError(
                    f"{row.where}: the synthetic prompt of its 'hash_ids' has {c} tokens, not "
                    f"'input_length' {row.input_length}, under tokenizer {tokenizer.name!r}"
                )
    return out
