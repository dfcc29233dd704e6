"""Workload: exact-count prompts, sampling, payload shapes, --extra-inputs, --input-file."""

from __future__ import annotations

import json
import statistics
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tokenizers
from hypothesis import given, settings
from hypothesis import strategies as st
from stubs import JSONHandler
from tokenizers import decoders, models, normalizers, pre_tokenizers, trainers

from llmbench.runner.workload.config import WorkloadConfig, parse_extra_inputs
from llmbench.runner.workload.datasets import read_input_file
from llmbench.runner.workload.prompts import PromptBuilder
from llmbench.runner.workload.requests import (
    PreparedRequest,
    RequestCycle,
    build_requests,
    inputs_json,
    write_inputs_json,
)
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


def cfg(**kw: Any) -> WorkloadConfig:
    kw.setdefault("model", "m")
    return WorkloadConfig(**kw)


def body(r: PreparedRequest) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(r.body)
    return out


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


# -- sampling and determinism ----------------------------------------------------------------


def test_seeded_determinism() -> None:
    tok = default_tokenizer()
    c = cfg(synthetic_input_tokens_mean=200, synthetic_input_tokens_stddev=30,
            output_tokens_mean=50, output_tokens_stddev=10, random_seed=7)
    a = build_requests(c, tok, 20)
    b = build_requests(c, tok, 20)
    assert [r.body for r in a] == [r.body for r in b]
    other = build_requests(cfg(**{**c.__dict__, "random_seed": 8}), tok, 20)
    assert [r.body for r in a] != [r.body for r in other]
    # Prompt i does not depend on how many prompts are built.
    assert [r.body for r in build_requests(c, tok, 5)] == [r.body for r in a[:5]]


def test_output_stddev_does_not_change_prompts() -> None:
    tok = default_tokenizer()
    a = build_requests(cfg(output_tokens_mean=50), tok, 10)
    b = build_requests(cfg(output_tokens_mean=50, output_tokens_stddev=20), tok, 10)
    assert [r.prompt for r in a] == [r.prompt for r in b]


def test_input_stddev_spreads_exactly() -> None:
    tok = default_tokenizer()
    reqs = build_requests(
        cfg(synthetic_input_tokens_mean=300, synthetic_input_tokens_stddev=40), tok, 300
    )
    counts = [r.input_tokens for r in reqs]
    assert tok.count_batch([str(r.prompt) for r in reqs]) == counts
    assert 280 < statistics.mean(counts) < 320
    assert 30 < statistics.stdev(counts) < 50


def test_lengths_clamped_to_one() -> None:
    reqs = build_requests(
        cfg(synthetic_input_tokens_mean=2, synthetic_input_tokens_stddev=20,
            output_tokens_mean=2, output_tokens_stddev=20),
        default_tokenizer(), 200,
    )
    assert min(r.input_tokens for r in reqs) == 1
    assert min(r.requested_output_tokens or 0 for r in reqs) == 1
    assert len({r.input_tokens for r in reqs}) > 10


def test_output_tokens() -> None:
    tok = default_tokenizer()
    fixed = build_requests(cfg(output_tokens_mean=128), tok, 10)
    assert {r.requested_output_tokens for r in fixed} == {128}
    assert all(body(r)["max_tokens"] == 128 and "min_tokens" not in body(r) for r in fixed)
    spread = build_requests(cfg(output_tokens_mean=128, output_tokens_stddev=16), tok, 200)
    outs = [r.requested_output_tokens or 0 for r in spread]
    assert 10 < statistics.stdev(outs) < 22
    assert [body(r)["max_tokens"] for r in spread] == outs
    det = build_requests(
        cfg(output_tokens_mean=64, output_tokens_mean_deterministic=True), tok, 3
    )
    assert all(body(r)["min_tokens"] == body(r)["max_tokens"] == 64 for r in det)
    free = build_requests(cfg(), tok, 3)
    assert all("max_tokens" not in body(r) and r.requested_output_tokens is None for r in free)


# -- payloads --------------------------------------------------------------------------------


def test_chat_streaming_payload() -> None:
    r = build_requests(
        cfg(synthetic_input_tokens_mean=10, output_tokens_mean=20, streaming=True,
            extra_inputs={"ignore_eos": True, "max_tokens": 99}),
        default_tokenizer(), 1,
    )[0]
    assert body(r) == {
        "model": "m",
        "messages": [{"role": "user", "content": r.prompt}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": 99,  # --extra-inputs wins
        "ignore_eos": True,
    }
    assert r.requested_output_tokens == 20
    assert b" " not in r.body.split(b'"content"')[0]  # compact separators


def test_completions_and_embeddings_payloads() -> None:
    tok = default_tokenizer()
    comp = build_requests(
        cfg(endpoint_type="completions", synthetic_input_tokens_mean=10, output_tokens_mean=5),
        tok, 1,
    )[0]
    assert body(comp) == {"model": "m", "prompt": comp.prompt, "stream": False, "max_tokens": 5}
    emb = build_requests(
        cfg(endpoint_type="embeddings", synthetic_input_tokens_mean=10, output_tokens_mean=5,
            streaming=True),
        tok, 1,
    )[0]
    assert body(emb) == {"model": "m", "input": emb.prompt}
    assert emb.requested_output_tokens is None


def test_unicode_body_is_utf8() -> None:
    r = build_requests(cfg(extra_inputs={"stop": ["é"]}), default_tokenizer(), 1)[0]
    assert "é".encode() in r.body


@pytest.mark.parametrize(
    ("kw", "flag"),
    [
        ({"endpoint_type": "rerank"}, "--endpoint-type"),
        ({"synthetic_input_tokens_mean": 0}, "--synthetic-input-tokens-mean"),
        ({"synthetic_input_tokens_stddev": -1.0}, "--synthetic-input-tokens-stddev"),
        ({"output_tokens_stddev": float("nan")}, "--output-tokens-stddev"),
        ({"output_tokens_mean_deterministic": True}, "--output-tokens-mean-deterministic"),
        ({"num_prompts": 0}, "--num-prompts"),
        ({"random_seed": -1}, "--random-seed"),
    ],
)
def test_config_errors_name_the_flag(kw: dict[str, Any], flag: str) -> None:
    with pytest.raises(ValueError, match=flag):
        build_requests(cfg(**kw), default_tokenizer(), 1)


def test_zero_count() -> None:
    assert build_requests(cfg(), default_tokenizer(), 0) == []


# -- --extra-inputs --------------------------------------------------------------------------


def test_parse_extra_inputs_types() -> None:
    got = parse_extra_inputs([
        "ignore_eos:true", "skip:False", "max_tokens:256", "temperature:0.7", "neg:-3",
        "exp:1e-3", 'stop:["\\n", "END"]', 'response_format:{"type": "json_object"}',
        "url:http://x:80/y", "name:llama", "nan:nan", "empty:", "override:1", "override:2",
    ])
    assert got == {
        "ignore_eos": True, "skip": False, "max_tokens": 256, "temperature": 0.7, "neg": -3,
        "exp": 0.001, "stop": ["\n", "END"], "response_format": {"type": "json_object"},
        "url": "http://x:80/y", "name": "llama", "nan": "nan", "empty": "", "override": 2,
    }
    assert isinstance(got["max_tokens"], int) and isinstance(got["ignore_eos"], bool)


@pytest.mark.parametrize("item", ["ignore_eos", ":true", "  :1", 'stop:["a"', "x:{bad}"])
def test_parse_extra_inputs_errors(item: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_extra_inputs(["ok:1", item])
    assert "--extra-inputs" in str(info.value)
    assert repr(item) in str(info.value)


# -- --input-file ----------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_input_file_chat(tmp_path: Path) -> None:
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    f = write_jsonl(tmp_path / "in.jsonl", [
        {"text": "Hello world"}, "", {"prompt": "Second prompt", "output_length": 7},
        {"messages": msgs, "max_tokens": 3},
    ])
    tok = default_tokenizer()
    reqs = build_requests(cfg(input_file=f, output_tokens_mean=50, streaming=True), tok, 100)
    assert len(reqs) == 3  # one per row; the load generator cycles them
    assert body(reqs[0])["messages"] == [{"role": "user", "content": "Hello world"}]
    assert reqs[0].input_tokens == tok.count("Hello world")
    assert [r.requested_output_tokens for r in reqs] == [50, 7, 3]
    assert body(reqs[2])["messages"] == msgs
    assert reqs[2].prompt == msgs
    assert reqs[2].input_tokens == tok.count("Be brief.\nHi there")
    assert len(build_requests(cfg(input_file=f), tok, 2)) == 2


def test_input_file_completions(tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "in.jsonl", [{"text_input": "abc"}])
    r = build_requests(cfg(input_file=str(f), endpoint_type="completions"), default_tokenizer(), 5)
    assert body(r[0]) == {"model": "m", "prompt": "abc", "stream": False}


@pytest.mark.parametrize(
    ("rows", "line", "why"),
    [
        ([{"text": "a"}, "", "{not json"], 3, "not valid JSON"),
        ([{"text": "a"}, ["x"]], 2, "expected a JSON object"),
        ([{"txt": "a"}], 1, "needs 'text'"),
        ([{"text": ""}], 1, "non-empty string"),
        ([{"text": 5}], 1, "non-empty string"),
        ([{"text": "a", "output_length": 0}], 1, "positive integer"),
        ([{"text": "a", "max_tokens": "5"}], 1, "positive integer"),
        ([{"text": "a", "max_tokens": True}], 1, "positive integer"),
        ([{"messages": []}], 1, "non-empty list"),
        ([{"messages": [{"content": "x"}]}], 1, "'role'"),
        ([{"messages": [{"role": "user"}]}], 1, "'content'"),
    ],
)
def test_input_file_errors_name_file_and_line(
    tmp_path: Path, rows: list[Any], line: int, why: str
) -> None:
    f = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(ValueError) as info:
        build_requests(cfg(input_file=f), default_tokenizer(), 10)
    msg = str(info.value)
    assert f"--input-file {f} line {line}:" in msg
    assert why in msg


def test_input_file_messages_need_chat(tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "m.jsonl", [{"messages": [{"role": "user", "content": "x"}]}])
    with pytest.raises(ValueError, match="line 1: 'messages' rows need --endpoint-type chat"):
        read_input_file(f, "completions")


def test_input_file_missing_or_empty(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--input-file .*nope.jsonl"):
        read_input_file(tmp_path / "nope.jsonl")
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(ValueError, match="no prompts"):
        read_input_file(tmp_path / "e.jsonl")
    (tmp_path / "b.jsonl").write_bytes(b"\xff\xfe\n")
    with pytest.raises(ValueError, match="not UTF-8"):
        read_input_file(tmp_path / "b.jsonl")


# -- inputs.json and cycling -----------------------------------------------------------------


def test_inputs_json(tmp_path: Path) -> None:
    c = cfg(synthetic_input_tokens_mean=5, streaming=True)
    reqs = build_requests(c, default_tokenizer(), 3)
    doc = inputs_json(reqs + reqs)  # repeats are written once
    assert doc == {"data": [{"payload": [json.loads(r.body)]} for r in reqs]}
    out = write_inputs_json(tmp_path, reqs)
    assert out == tmp_path / "inputs.json"
    assert json.loads(out.read_text()) == doc
    assert json.loads(write_inputs_json(tmp_path / "x" / "i.json", reqs).read_text()) == doc


def test_request_cycle() -> None:
    reqs = build_requests(cfg(synthetic_input_tokens_mean=3), default_tokenizer(), 3)
    cyc = RequestCycle(reqs)
    assert [next(cyc).index for _ in range(7)] == [0, 1, 2, 0, 1, 2, 0]
    assert cyc[5] is reqs[2]
    with pytest.raises(ValueError):
        RequestCycle([])


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
