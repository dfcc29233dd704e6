"""Several models (GenAI-Perf's ``-m A B`` with ``--model-selection-strategy``): each
prepared request names one of them."""

from __future__ import annotations

import json
from collections import Counter

from llmbench.runner.workload.config import WorkloadConfig
from llmbench.runner.workload.requests import build_requests
from llmbench.tokenizer import default_tokenizer


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
