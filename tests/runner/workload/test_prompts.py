"""Synthetic prompts: exact token counts under every kind of tokenizer, local or remote."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st
from stubs import JSONHandler
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers
from workload_factory import body, cfg

from llmbench.runner.workload.prompts import PromptBuilder
from llmbench.runner.workload.requests import build_requests
from llmbench.tokenizer import HFTokenizer, ServerTokenizer, default_tokenizer

CORPUS = [
    "the quick brown fox jumps over the lazy dog while the cat sleeps in the sun",
    "a benchmark measures latency and throughput of an inference server under load",
    "tokens are counted by the tokenizer before the request is sent to the model",
    "Kubernetes schedules the runner next to the GPU pods; the operator writes status.",
] * 30


def wordpiece() -> HFTokenizer:
    """BERT-style: lower-casing normaliser, no leading-space tokens, ## continuations."""
    tok = tokenizers.Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.decoder = decoders.WordPiece()
    tok.train_from_iterator(
        CORPUS,
        trainers.WordPieceTrainer(vocab_size=300, special_tokens=["[UNK]"], show_progress=False),
    )
    return HFTokenizer(tok, "wordpiece")


def metaspace_bpe() -> HFTokenizer:
    """SentencePiece-style (Llama-2): Metaspace '▁' words, few whole-word tokens."""
    tok = tokenizers.Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
    tok.train_from_iterator(
        CORPUS,
        trainers.BpeTrainer(
            vocab_size=120, special_tokens=["<unk>"], show_progress=False,
            initial_alphabet=list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.,;!?'"),
        ),
    )
    return HFTokenizer(tok, "metaspace")


class Hidden:
    """A tokenizer that cannot list its vocabulary (like --tokenizer server), so prompts are
    built by search-and-fix with count calls only."""

    def __init__(self, inner: HFTokenizer) -> None:
        self.inner = inner
        self.name = "hidden-" + inner.name
        self.calls = 0

    def encode(self, text: str) -> list[int]:
        return self.inner.encode(text)

    def decode(self, ids: Sequence[int]) -> str:
        return self.inner.decode(ids)

    def count(self, text: str) -> int:
        self.calls += 1
        return self.inner.count(text)

    def single_token_words(self) -> list[str]:
        return []


def no_pretokenizer_bpe() -> HFTokenizer:
    """BPE without pre-tokeniser: merges span spaces, so words do not add up."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(vocab_size=400, show_progress=False))
    return HFTokenizer(tok, "no-pretokenizer")


class Liar(Hidden):
    """Claims single-token words that are not (multi-token junk among them): the builder
    must notice with its check and fall back to search."""

    def single_token_words(self) -> list[str]:
        return default_tokenizer().single_token_words()[:100] + ["zqxjkv"] * 100


WP = wordpiece()
MS = metaspace_bpe()
NP = no_pretokenizer_bpe()


# -- exact token counts ----------------------------------------------------------------------


@pytest.mark.parametrize("target", [1, 2, 3, 7, 64, 100, 550, 1024, 4096])
def test_default_exact_counts(target: int) -> None:
    tok = default_tokenizer()
    reqs = build_requests(cfg(synthetic_input_tokens_mean=target), tok, 5)
    assert len(reqs) == 5
    for r in reqs:
        assert isinstance(r.prompt, str)
        assert r.input_tokens == target
        assert tok.count(r.prompt) == target
        assert body(r)["messages"][0]["content"] == r.prompt
    # Prompts are distinct (no accidental prefix-cache hits between them).
    assert len({r.prompt for r in reqs}) == 5 or target == 1


@pytest.mark.parametrize(
    "tok",
    [WP, MS, NP, Hidden(default_tokenizer()), Hidden(WP), Hidden(MS), Liar(default_tokenizer())],
    ids=lambda t: t.name,
)
@pytest.mark.parametrize("target", [1, 2, 5, 33, 200, 1000])
def test_other_tokenizers_exact_counts(tok: Any, target: int) -> None:
    reqs = build_requests(cfg(synthetic_input_tokens_mean=target), tok, 3)
    for r in reqs:
        assert isinstance(r.prompt, str)
        assert tok.count(r.prompt) == target == r.input_tokens


def test_tokenizer_paths_are_what_we_think() -> None:
    assert PromptBuilder(default_tokenizer()).exact
    assert not PromptBuilder(default_tokenizer()).verify_all
    assert PromptBuilder(WP).exact  # BERT vocab has whole words
    assert not PromptBuilder(Hidden(WP)).exact
    assert not PromptBuilder(NP).exact
    liar = PromptBuilder(Liar(default_tokenizer()))
    assert liar.exact and liar.verify_all


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=1, max_size=5), st.integers(0, 2**32))
def test_property_default_exact(targets: list[int], seed: int) -> None:
    tok = default_tokenizer()
    texts = PromptBuilder(tok).build_many(targets, seed)
    assert tok.count_batch(texts) == targets


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 400), st.integers(0, 2**32), st.sampled_from(["wp", "ms", "np", "default"]))
def test_property_search_exact(target: int, seed: int, which: str) -> None:
    inner = {"wp": WP, "ms": MS, "np": NP, "default": default_tokenizer()}[which]
    tok = Hidden(inner)
    text = PromptBuilder(tok).fit(target, np.random.default_rng(seed))
    assert inner.count(text) == target
    # a search, not a token-by-token walk (up to 400 calls); hypothesis found a 31-call case
    assert tok.calls < 40


# -- --tokenizer server: prompts fitted through HTTP /tokenize ------------------------------


class _Tokenize(JSONHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        ids = WP.encode(self.read_json()["prompt"])  # the "server" tokenizes unlike ours
        self.reply_json({"count": len(ids), "tokens": ids})


@pytest.fixture
def server_url(serve_http: Callable[..., str]) -> Iterator[str]:
    yield serve_http(_Tokenize)


def test_server_tokenizer_prompts_exact(server_url: str) -> None:
    tok = ServerTokenizer(server_url, "m")
    try:
        reqs = build_requests(
            cfg(synthetic_input_tokens_mean=120, synthetic_input_tokens_stddev=30), tok, 6
        )
    finally:
        tok.close()
    for r in reqs:
        assert WP.count(str(r.prompt)) == r.input_tokens
