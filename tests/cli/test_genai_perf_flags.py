"""GenAI-Perf's flags as ``llmbench profile``/``analyze`` parse them: aliases, the three
``--extra-inputs`` forms typed as GenAI-Perf types them, endpoint forms, goodput names, and a
usage error that says so for every GenAI-Perf flag llmbench does not implement."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import pytest

from llmbench.cli import build_parser, main
from llmbench.cli.flags import normalize_endpoint, normalize_url, parse_extra_inputs, parse_slo
from llmbench.cli.genai_perf import UNSUPPORTED_FLAGS
from llmbench.cli.profile import export_stem, spec_from_flags
from llmbench.runner.point.config import point_config
from llmbench.runner.point.metrics import PerRequest, meets_slo


def profile_args(*flags: str) -> argparse.Namespace:
    return build_parser(["profile"]).parse_args(["profile", *flags])


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    """Runs ``argv`` expecting exit code 2; returns stderr."""
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse's own usage errors
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2, err
    return err


# -- --extra-inputs ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("items", "expected"),
    [
        (["ignore_eos:true"], {"ignore_eos": True}),
        (["ignore_eos:FALSE"], {"ignore_eos": False}),
        (["max_tokens:256"], {"max_tokens": 256}),
        (["temperature:0.7"], {"temperature": 0.7}),
        (["temperature:.5"], {"temperature": 0.5}),
        # GenAI-Perf types only digits and one-dot decimals: the rest stays a string.
        (["seed:-1"], {"seed": "-1"}),
        (["top_p:1e-3"], {"top_p": "1e-3"}),
        (["stop:[1]"], {"stop": "[1]"}),
        (["user:alice"], {"user": "alice"}),
        (['{"ignore_eos": true, "temperature": 0}'], {"ignore_eos": True, "temperature": 0}),
        (['{"stop": ["a:b"], "seed": -1}'], {"stop": ["a:b"], "seed": -1}),
        (["echo"], {"echo": None}),
        (['{"a": 1}', '{"a": 2}'], {"a": 2}),
        (["a:1", '{"a": 2}'], {"a": 2}),
        (["ignore_eos:true", '{"temperature": 0}', "skip_special_tokens"],
         {"ignore_eos": True, "temperature": 0, "skip_special_tokens": None}),
    ],
)
def test_extra_inputs_forms_typed_as_genai_perf(items: list[str], expected: dict[str, Any]) -> None:
    got = parse_extra_inputs(items)
    assert got == expected
    assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]


@pytest.mark.parametrize(
    ("items", "message"),
    [
        (["a:b:c"], "one ':'"),
        (["url:http://x"], "one ':'"),
        ([":1"], "empty"),
        (["a:"], "empty"),
        (["{not json}"], "not valid JSON"),
        (["a:1", "a:2"], "already given"),
        (['{"a": 1}', "a:2"], "already given"),
        ([""], "expected NAME"),
    ],
)
def test_extra_inputs_errors_name_the_flag(items: list[str], message: str) -> None:
    with pytest.raises(ValueError) as err:
        parse_extra_inputs(items)
    assert "--extra-inputs" in str(err.value) and message in str(err.value)


def test_json_extra_inputs_reach_the_request_body() -> None:
    spec = spec_from_flags(profile_args(
        "--extra-inputs", '{"ignore_eos": true, "temperature": 0}', "--extra-inputs", "echo",
    ))
    assert point_config(spec).workload.extra_inputs == {
        "ignore_eos": True, "temperature": 0, "echo": None
    }


def test_bad_extra_inputs_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(["profile", "--url", "http://127.0.0.1:9", "--extra-inputs", "a:b:c"], capsys)
    assert "--extra-inputs" in err


# -- endpoint and URL forms ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "path"),
    [("v1/chat/completions", "/v1/chat/completions"), ("/v1/completions", "/v1/completions"),
     ("//v1/x", "/v1/x"), (None, None)],
)
def test_endpoint_forms(given: str | None, path: str | None) -> None:
    assert normalize_endpoint(given) == path


def test_endpoint_that_is_a_url_is_refused() -> None:
    with pytest.raises(ValueError, match="--endpoint"):
        normalize_endpoint("http://h:8000/v1/chat/completions")


def test_url_without_scheme_is_http() -> None:
    assert normalize_url("localhost:8000") == "http://localhost:8000"
    assert normalize_url("https://h") == "https://h"
    spec = spec_from_flags(profile_args("-u", "localhost:8001", "--endpoint", "v1/completions"))
    cfg = point_config(spec)
    assert (cfg.url, cfg.path()) == ("http://localhost:8001", "/v1/completions")


# -- aliases -------------------------------------------------------------------------------


def test_genai_perf_aliases_build_the_same_spec_as_our_names() -> None:
    ours = spec_from_flags(profile_args(
        "--synthetic-input-tokens-mean", "64", "--output-tokens-mean", "8",
        "--request-count", "9", "--warmup-request-count", "2", "--num-prompts", "5",
        "--goodput", "ttft:100", "itl:5", "e2e:900", "ttst:20", "otpu:50",
        "--server-metrics-url", "http://a:1/metrics", "--server-metrics-url", "http://b:2/metrics",
    ))
    theirs = spec_from_flags(profile_args(
        "--isl", "64", "--osl", "8", "--num-requests", "9", "--num-warmup-requests", "2",
        "--num-dataset-entries", "5",
        "-g", "time_to_first_token:100", "inter_token_latency:5", "request_latency:900",
        "time_to_second_token:20", "output_token_throughput_per_user:50",
        "--server-metrics-urls", "http://a:1/metrics", "http://b:2/metrics",
    ))
    assert ours.to_dict() == theirs.to_dict()
    cfg = point_config(theirs)
    assert cfg.goodput == {"ttft": 100, "itl": 5, "e2e": 900, "ttst": 20, "otpu": 50}
    assert cfg.workload.num_prompts == 5 and cfg.load.warmup_request_count == 2
    args = profile_args("--server-metrics-urls", "http://a:1/m", "http://b:2/m",
                        "--server-metrics-url", "http://c:3/m")
    assert args.server_metrics_url == ["http://a:1/m", "http://b:2/m", "http://c:3/m"]


def test_goodput_name_given_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="repeats"):
        parse_slo(["ttft:1", "time_to_first_token:2"])


def test_throughput_per_user_is_a_floor_and_ttst_a_ceiling() -> None:
    fast = PerRequest(ttft_ms=10, e2e_ms=100, itl_ms=5.0, ttst_ms=4.0, osl=19, isl=1)
    assert meets_slo(fast, {"otpu": 150})  # 1000 / 5 ms = 200 tokens/s per user
    assert not meets_slo(fast, {"otpu": 250})
    assert meets_slo(fast, {"ttst": 4.0}) and not meets_slo(fast, {"ttst": 3.9})
    one_token = PerRequest(ttft_ms=10, e2e_ms=10, itl_ms=None, ttst_ms=None, osl=1, isl=1)
    assert meets_slo(one_token, {"otpu": 1e9, "ttst": 0.001})  # undefined cannot fail


def test_several_models_round_robin_and_random() -> None:
    args = profile_args("-m", "a", "b", "-m", "c", "--model-selection-strategy", "random")
    cfg = point_config(spec_from_flags(args))
    assert cfg.model == "a" and cfg.models() == ["a", "b", "c"]
    assert cfg.workload.model_selection_strategy == "random"
    single = point_config(spec_from_flags(profile_args("-m", "only")))
    assert single.models() == ["only"] and single.workload.models == []


def test_model_selection_strategy_needs_several_models() -> None:
    with pytest.raises(ValueError, match="--model-selection-strategy"):
        spec_from_flags(profile_args("-m", "a", "--model-selection-strategy", "round_robin"))


def test_accepted_without_effect_flags_parse(capsys: pytest.CaptureFixture[str]) -> None:
    args = profile_args(
        "--service-kind", "openai", "--backend", "tensorrtllm", "--generate-plots",
        "--tokenizer-revision", "main", "--tokenizer-trust-remote-code", "--random-seed", "7",
        "--profile-export-file", "run1.json", "--enable-checkpointing",
    )
    spec = spec_from_flags(args)
    assert spec.workload.seed == 7 and spec.workload.tokenizer_revision == "main"
    assert export_stem(args.profile_export_file) == "run1"


def test_profile_export_file_is_a_name_not_a_path() -> None:
    with pytest.raises(ValueError, match="--artifact-dir"):
        export_stem(Path("d/x.json"))


# -- what llmbench does not do: a usage error that says so ---------------------------------


@pytest.mark.parametrize("names", list(UNSUPPORTED_FLAGS))
def test_unsupported_genai_perf_flags_say_so(
    names: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    err = usage_error(["profile", "--url", "http://127.0.0.1:9", names[0], "1"], capsys)
    assert names[0] in err and "not supported" in err
    assert "unrecognized arguments" not in err


@pytest.mark.parametrize(
    "flags",
    [["--endpoint-type", "kserve"], ["--endpoint-type", "rankings"],
     ["--endpoint-type", "multimodal"], ["--service-kind", "triton"],
     ["--input-file", "synthetic:queries,passages"]],
)
def test_triton_native_and_other_inputs_say_so(
    flags: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    err = usage_error(["profile", "--url", "http://127.0.0.1:9", *flags], capsys)
    assert "not supported" in err and flags[0] in err


def test_passthrough_after_double_dash_names_perf_analyzer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for sub in ("profile", "analyze"):
        err = usage_error(
            [sub, "--url", "http://127.0.0.1:9", "--", "--max-threads", "4"], capsys
        )
        assert "perf_analyzer" in err and "--max-threads 4" in err


def test_analyze_has_the_same_flags(capsys: pytest.CaptureFixture[str]) -> None:
    args = build_parser(["analyze"]).parse_args(
        ["analyze", "--isl", "32", "-g", "request_latency:5", "--num-requests", "3",
         "--server-metrics-urls", "http://a:1/m", "http://b:1/m"]
    )
    assert (args.synthetic_input_tokens_mean, args.request_count) == (32, 3)
    err = usage_error(["analyze", "--url", "http://127.0.0.1:9", "--image-format", "png"], capsys)
    assert "--image-format" in err and "not supported" in err
    err = usage_error(
        ["analyze", "--url", "http://127.0.0.1:9", "--profile-export-file", "x.json"], capsys
    )
    assert "--profile-export-file" in err
    err = usage_error(["analyze", "--url", "http://127.0.0.1:9", "--sweep-type", "batch_size"],
                      capsys)
    assert "--sweep-type batch_size" in err and "not supported" in err
