"""GenAI-Perf's workload flags: shared-prefix prompts, stable measurement windows, trace
replay and multi-turn sessions reach the point's settings; their bad combinations are usage
errors naming the flags."""

from __future__ import annotations

import argparse

import pytest

from llmbench.cli import build_parser, main
from llmbench.cli.genai_perf import UNSUPPORTED_FLAGS
from llmbench.cli.profile import spec_from_flags
from llmbench.runner.load.sessions import session_plan
from llmbench.runner.point.config import point_config
from llmbench.runner.point.stability import StabilityConfig

TRACE = "examples/datasets/mooncake-trace.jsonl"

URL = ("--url", "http://127.0.0.1:9")


def args(*flags: str) -> argparse.Namespace:
    return build_parser(["profile"]).parse_args(["profile", *URL, *flags])


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    assert code == 2, err
    return err


def test_implemented_flags_left_the_unsupported_table() -> None:
    names = {n for group in UNSUPPORTED_FLAGS for n in group}
    for flag in ("--num-prefix-prompts", "--prefix-prompt-length", "--measurement-interval",
                 "-p", "--stability-percentage", "-s", "--fixed-schedule", "--num-sessions",
                 "--session-concurrency", "--session-turns-mean", "--session-turns-stddev",
                 "--session-turn-delay-mean", "--session-turn-delay-stddev"):
        assert flag not in names
    # GenAI-Perf scales a payload file's session delays with it; llmbench's are synthetic.
    assert ("--session-delay-ratio",) in UNSUPPORTED_FLAGS


def test_prefix_flags_reach_the_workload() -> None:
    spec = spec_from_flags(args("--num-prefix-prompts", "4", "--prefix-prompt-length", "32"))
    assert (spec.workload.num_prefix_prompts, spec.workload.prefix_prompt_length) == (4, 32)
    wl = point_config(spec).workload
    assert (wl.num_prefix_prompts, wl.prefix_prompt_length) == (4, 32)
    default = point_config(spec_from_flags(args())).workload
    assert (default.num_prefix_prompts, default.prefix_prompt_length) == (0, 100)


@pytest.mark.parametrize(
    ("flags", "stability"),
    [
        (("-p", "5000"), StabilityConfig(interval_ms=5000.0, percentage=999.0)),
        (("--measurement-interval", "250", "-s", "10"), StabilityConfig(250.0, 10.0)),
        (("--measurement-interval", "250", "--stability-percentage", "2.5"),
         StabilityConfig(250.0, 2.5)),
    ],
)
def test_measurement_interval_replaces_the_request_budget(
    flags: tuple[str, ...], stability: StabilityConfig
) -> None:
    cfg = point_config(spec_from_flags(args("--concurrency", "4", *flags)))
    assert cfg.stability == stability
    assert cfg.load.request_count is None and cfg.load.measurement_duration_s is None
    assert cfg.public_dict()["measurement_interval_ms"] == stability.interval_ms


def test_default_is_request_count_mode() -> None:
    cfg = point_config(spec_from_flags(args("--concurrency", "4")))
    assert cfg.stability is None and cfg.load.request_count == 100


@pytest.mark.parametrize(
    ("flags", "named", "why"),
    [
        (["-s", "10"], "--stability-percentage", "needs load.measurementIntervalMs"),
        (["-p", "100", "--request-count", "5"], "--measurement-interval", "remove"),
        (["-p", "100", "--measurement-duration", "5"], "--measurement-interval", "remove"),
        (["-p", "100", "--workers", "2"], "--measurement-interval", "workers 1"),
        (["-p", "0"], "--measurement-interval", "greater than 0"),
        (["-p", "100", "-s", "-1"], "--stability-percentage", "greater than 0"),
        (["--num-prefix-prompts", "2", "--input-file", "x.jsonl"], "--num-prefix-prompts",
         "synthetic prompts"),
        (["--num-prefix-prompts", "-1"], "--num-prefix-prompts", "0 or more"),
        (["--prefix-prompt-length", "0"], "--prefix-prompt-length", "at least 1"),
        (["--fixed-schedule"], "--fixed-schedule", "set workload.inputFile"),
        (["--fixed-schedule", "maybe"], "--fixed-schedule", "true or false"),
        (["--fixed-schedule", "--input-file", TRACE, "--request-count", "3"],
         "--fixed-schedule", "remove load.requestRate, load.requestCount"),
        (["--fixed-schedule", "--input-file", TRACE, "--warmup-request-count", "1"],
         "--fixed-schedule", "load.warmupRequestCount"),
        (["--input-file", f"payload:{TRACE}", "--concurrency", "4"], "--fixed-schedule",
         "drop --concurrency"),
        (["--fixed-schedule", "--input-file", TRACE, "--request-rate", "2"], "--fixed-schedule",
         "drop --concurrency and --request-rate"),
        (["--session-concurrency", "2"], "--session-concurrency", "needs --num-sessions"),
        (["--session-turn-delay-mean", "10"], "--session-turn-delay-mean",
         "needs --num-sessions"),
        (["--num-sessions", "2", "--endpoint-type", "completions"], "--num-sessions",
         "--endpoint-type chat"),
        (["--num-sessions", "2", "--concurrency", "4"], "--concurrency",
         "the sessions are the load"),
        (["--num-sessions", "2", "--request-count", "4"], "--request-count", "remove"),
        (["--num-sessions", "2", "--warmup-request-count", "1"], "--warmup-request-count",
         "remove"),
        (["--num-sessions", "2", "-p", "100"], "--measurement-interval", "remove"),
        (["--num-sessions", "2", "--input-file", "x.jsonl"], "--input-file", "remove"),
        (["--num-sessions", "2", "--workers", "2"], "--workers", "remove"),
        (["--num-sessions", "2", "--session-concurrency", "3"], "--session-concurrency",
         "more than --num-sessions"),
        (["--num-sessions", "0"], "--num-sessions", "at least 1"),
        (["--num-sessions", "2", "--session-turn-delay-mean", "-5"],
         "--session-turn-delay-mean", "0 or more"),
    ],
)
def test_bad_combinations_are_usage_errors(
    flags: list[str], named: str, why: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = usage_error(["profile", *URL, *flags], capsys)
    assert named in err and why in err
    assert "not supported" not in err


@pytest.mark.parametrize(
    "flags",
    [
        ["--fixed-schedule", "--input-file", TRACE],
        ["--fixed-schedule", "true", "--input-file", TRACE],  # GenAI-Perf's type=bool form
        ["--input-file", f"payload:{TRACE}"],  # GenAI-Perf's README form
    ],
)
def test_fixed_schedule_forms(flags: list[str]) -> None:
    spec = spec_from_flags(args(*flags))
    assert spec.load.fixed_schedule and spec.workload.input_file == TRACE
    cfg = point_config(spec)
    assert cfg.load.mode == "fixed_schedule" and cfg.load.request_count is None
    assert cfg.resolved_artifact_dir().name == "model-openai-chat-fixed_schedule"


def test_fixed_schedule_false_is_the_default() -> None:
    spec = spec_from_flags(args("--fixed-schedule", "false", "--input-file", TRACE))
    assert not spec.load.fixed_schedule
    assert point_config(spec).load.mode == "concurrency"


def test_session_flags_reach_the_load() -> None:
    spec = spec_from_flags(args(
        "--num-sessions", "6", "--session-concurrency", "3", "--session-turns-mean", "4",
        "--session-turns-stddev", "1", "--session-turn-delay-mean", "250",
        "--session-turn-delay-stddev", "50",
    ))
    ss = spec.load.sessions
    assert ss is not None
    assert (ss.count, ss.concurrency, ss.turns_mean, ss.turns_stddev) == (6, 3, 4, 1.0)
    assert (ss.turn_delay_mean_ms, ss.turn_delay_stddev_ms) == (250.0, 50.0)
    cfg = point_config(spec)
    load = cfg.load
    assert (load.mode, load.concurrency, load.num_sessions) == ("session_concurrency", 3, 6)
    assert (load.session_turns_mean, load.session_turn_delay_mean_ms) == (4, 250.0)
    assert load.request_count == session_plan(load).total  # the budget: sessions x turns
    assert cfg.resolved_artifact_dir().name == "model-openai-chat-session_concurrency3"
    assert cfg.public_dict()["num_sessions"] == 6
    # Without sessions, the session knobs stay out of the run's settings.
    assert "num_sessions" not in point_config(spec_from_flags(args())).public_dict()


def test_one_session_in_flight_by_default() -> None:
    cfg = point_config(spec_from_flags(args("--num-sessions", "3")))
    assert (cfg.load.mode, cfg.load.concurrency, cfg.load.request_count) == (
        "session_concurrency", 1, 3
    )
