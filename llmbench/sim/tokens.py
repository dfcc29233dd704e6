"""Token counting and the output vocabulary, so the sim's token counts match the client's.

Why a module of its own: prompt lengths (``usage.prompt_tokens``, ``/tokenize``, prefill
cost) and output text must agree exactly with what a client counts with the same tokenizer,
and that needs the project tokenizer (``llmbench.tokenizer``, shared with the runner and
imported lazily: it is heavy) plus a fast path for synthetic prompts. Everything here is
cached per ``--tokenizer`` spec and independent of the server.
"""

from __future__ import annotations

import functools
from typing import Protocol

__all__ = ["Tokens", "get_tokens", "output_words"]


class _Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def count(self, text: str) -> int: ...


class _WhitespaceTokenizer:
    """Fallback when the project tokenizer is unavailable: one token per whitespace word."""

    def encode(self, text: str) -> list[int]:
        return [hash(w) & 0x7FFF for w in text.split()]

    def count(self, text: str) -> int:
        return len(text.split())


# Common English words; the ones that are a single token of the active tokenizer (with a
# leading space, and still one token each when concatenated) become the output vocabulary.
_CANDIDATE_WORDS = (
    "the of and to in is that it for on with as was at by be this are from or an have not "
    "but they which one you were all we can her has there been if more when will would who "
    "so no model data time new first some other than its only into over also after people "
    "two year work most use may well way many these then them about out up just like what "
    "make can could see any good long day right small large value point system part place "
    "case week number group world area water state power light level order line test run "
    "open real high low fast slow token text word node pod cluster server client request"
).split()


def _load_tokenizer(spec: str) -> _Tokenizer:
    """The project's tokenizer (imported lazily: it is heavy) or the whitespace fallback.

    ``spec`` is anything ``llmbench profile --tokenizer`` accepts except ``server`` (a
    tokenizer.json, a directory, a cached hub id, ``default``), or ``whitespace``.
    """
    if spec == "whitespace":
        return _WhitespaceTokenizer()
    try:
        from llmbench.tokenizer import load_tokenizer
    except ImportError:  # a stripped-down install: keep serving, count words
        return _WhitespaceTokenizer()
    if spec == "server":
        raise ValueError("--tokenizer server makes no sense for the sim itself")
    return load_tokenizer(None if spec == "default" else spec)


class Tokens:
    """The sim's tokenizer view: exact prompt counts, cheap for synthetic prompts, and the
    output vocabulary.

    Encoding costs ~1 us per token, more than the sim spends per output token, so prompts
    made only of the tokenizer's single-token words (what ``llmbench profile`` generates)
    are counted by splitting on spaces when the tokenizer's counts provably add up
    (``words_add_up``); anything else is encoded. Counts are cached per text.
    """

    def __init__(self, spec: str) -> None:
        self.tok = _load_tokenizer(spec)
        single = getattr(self.tok, "single_token_words", None)
        vocab: list[str] = single() if single is not None else []
        if vocab:
            known = set(vocab)
            words = [" " + w for w in dict.fromkeys(_CANDIDATE_WORDS) if w in known]
            if len(words) < 16:
                words = [" " + w for w in vocab[:256]]
        else:  # whitespace fallback
            words = [" " + w for w in dict.fromkeys(_CANDIDATE_WORDS)]
        if len(words) < 8 or self.tok.count("".join(words)) != len(words):
            raise ValueError(f"--tokenizer {spec}: plain words are not one token each, so "
                             "output lengths could not be exact; use --tokenizer whitespace")
        self.words = tuple(words)
        self.word_set = frozenset(vocab)
        add_up = getattr(self.tok, "words_add_up", None)
        self.additive = bool(vocab) and add_up is not None and bool(add_up())
        self._cache: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text) if text else []

    def count(self, text: str) -> int:
        if not text:
            return 0
        cache = self._cache
        n = cache.get(text)
        if n is not None:
            return n
        n = -1
        if self.additive:
            parts = text.split(" ")
            if self.word_set.issuperset(parts[1:]):
                first = parts[0]
                head = cache.get(first)
                if head is None:
                    head = cache[first] = self.tok.count(first) if first else 0
                n = head + len(parts) - 1
        if n < 0:
            n = self.tok.count(text)
        if len(cache) >= 8192:
            cache.clear()
        cache[text] = n
        return n


@functools.cache
def get_tokens(spec: str = "default") -> Tokens:
    """The ``Tokens`` for a ``--tokenizer`` spec, built once per process and spec."""
    return Tokens(spec)


def output_words(tokenizer: str = "default") -> tuple[str, ...]:
    """The sim's output vocabulary: words that are exactly one token each, also concatenated.

    A response of ``n`` tokens is ``n`` of these words joined without separator, so the
    client's tokenizer-based OSL equals the sim's ``completion_tokens`` exactly.
    """
    return get_tokens(tokenizer).words
