"""Request bodies: seeded sampling, payload shapes per endpoint, inputs.json, cycling, models."""

from __future__ import annotations

import json
import statistics
from collections import Counter
from pathlib import Path

import pytest
from workload_factory import body, cfg

from llmbench.runner.workload.config import WorkloadConfig
from llmbench.runner.workload.requests import (
    RequestCycle,
    build_requests,
    inputs_json,
    write_inputs_json,
)
from llmbench.tokenizer import default_tokenizer

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


def test_zero_count() -> None:
    assert build_requests(cfg(), default_tokenizer(), 0) == []


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


# -- several models (GenAI-Perf's -m A B with --model-selection-strategy) --------------------


def models_sent(cfg: WorkloadConfig, n: int) -> list[str]:
    return [json.loads(r.body)["model"] for r in build_requests(cfg, default_tokenizer(), n)]


def test_round_robin_assigns_prompt_i_to_model_i_mod_n() -> None:
    cfg = WorkloadConfig(synthetic_input_tokens_mean=8, model="a", models=["a", "b", "c"])
    assert models_sent(cfg, 7) == ["a", "b", "c", "a", "b", "c", "a"]


def test_random_is_seeded_and_uses_every_model() -> None:
    cfg = WorkloadConfig(synthetic_input_tokens_mean=8, model="a", models=["a", "b"],
                         model_selection_strategy="random", random_seed=3)
    first = models_sent(cfg, 60)
    assert first == models_sent(cfg, 60)
    assert set(Counter(first)) == {"a", "b"}
    assert first != ["a", "b"] * 30


def test_one_model_is_the_default() -> None:
    cfg = WorkloadConfig(synthetic_input_tokens_mean=8, model="only")
    assert set(models_sent(cfg, 3)) == {"only"}
