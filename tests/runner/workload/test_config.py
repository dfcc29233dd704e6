"""Workload settings: each bad setting names its flag; --extra-inputs values are typed."""

from __future__ import annotations

from typing import Any

import pytest
from workload_factory import cfg

from llmbench.runner.workload.config import parse_extra_inputs
from llmbench.runner.workload.requests import build_requests
from llmbench.tokenizer import default_tokenizer


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
