"""``profile``'s and ``analyze``'s flags are generated from the spec: every ``CliFlag`` marker is
a flag of one command, named as declared, with its field's default and a parser that checks its
field's bounds (or, where the marker says so, leaves them to the model)."""

from __future__ import annotations

import argparse

import pytest

from llmbench.api import Load, Target, TokenDistribution
from llmbench.api.spec import CliFlag, spec_flags
from llmbench.cli import build_parser, main
from llmbench.cli.genai_perf import GENAI_PERF_SPELLINGS
from llmbench.cli.profile import spec_from_flags
from llmbench.cli.spec_flags import ANALYZE_FLAGS, SPEC_FLAGS


def subparser(command: str) -> argparse.ArgumentParser:
    parser = build_parser([command])
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    chosen: argparse.ArgumentParser = sub.choices[command]
    return chosen


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    return capsys.readouterr().err


def test_every_marker_is_a_flag_of_profile_or_analyze_with_its_names() -> None:
    profile = subparser("profile")._option_string_actions
    analyze = subparser("analyze")._option_string_actions
    flags = spec_flags()
    assert len(flags) > 40
    for path, _field, flag in flags:
        action = analyze[flag.name]
        assert action.dest == flag.destination, path
        assert all(analyze[n] is action for n in flag.names), path
        in_profile = flag.destination in SPEC_FLAGS
        assert in_profile == (flag.name in profile), path
        assert in_profile != (flag.destination in ANALYZE_FLAGS), path
        table = SPEC_FLAGS if in_profile else ANALYZE_FLAGS
        assert table[flag.destination] == (path.removeprefix("spec."), flag.shown)
    # -m fills target.model as well as workload.models; nothing else is in the tables
    assert SPEC_FLAGS["model"] == ("target.model", "-m/--model")
    declared = {f.destination for _, _, f in flags}
    assert set(SPEC_FLAGS) | set(ANALYZE_FLAGS) == declared | {"model"}


def test_a_flag_takes_its_default_from_its_field_unless_it_must_tell_unset() -> None:
    ns = subparser("profile").parse_args([])
    assert ns.request_timeout == Target.model_fields["request_timeout_seconds"].default == 600.0
    assert ns.synthetic_input_tokens_mean == TokenDistribution.model_fields["mean"].default
    assert ns.request_rate_mode == Load.model_fields["request_rate_mode"].default
    assert ns.streaming is True and ns.workers == 1 and ns.output_tokens_mean_deterministic is False
    # "given or not" matters to these: the field's default would hide it
    assert ns.concurrency is None and Load.model_fields["concurrency"].default == 1
    assert ns.fixed_schedule is None and ns.session_concurrency is None
    assert ns.url == "http://127.0.0.1:8000" and ns.goodput == [] and ns.extra_inputs == []
    again = subparser("profile").parse_args([])
    assert again.extra_inputs is not ns.extra_inputs  # a fresh list per parser (argparse appends)
    sweep = subparser("analyze").parse_args([])
    assert (sweep.sweep_type, sweep.repetitions, sweep.currency) == ("concurrency", 1, "EUR")


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--request-count", "0"], "--request-count must be at least 1, got 0"),  # PositiveInt
        (["--num-prefix-prompts", "-1"], "--num-prefix-prompts must be 0 or more, got -1"),
        (["--request-rate", "0"], "--request-rate must be greater than 0, got 0"),  # gt=0
        (["--session-turn-delay-mean", "-1"], "--session-turn-delay-mean must be 0 or more"),
        (["--num-prompts", "x"], "--num-dataset-entries expects an integer, got 'x'"),
        (["--request-rate-mode", "burst"], "invalid choice: 'burst'"),  # the Literal's values
        (["--fixed-schedule", "maybe"], "--fixed-schedule expects true or false, got 'maybe'"),
    ],
)
def test_the_field_type_and_bounds_give_the_parser(
    flags: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert message in usage_error(["profile", *flags], capsys)


def test_reads_number_leaves_the_bound_to_the_model_whose_error_names_the_flag() -> None:
    """``--synthetic-input-tokens-stddev`` converts only: the field's ``ge=0`` is the model's."""
    ns = subparser("profile").parse_args(["--synthetic-input-tokens-stddev", "-1"])
    assert ns.synthetic_input_tokens_stddev == -1.0
    with pytest.raises(ValueError) as err:
        spec_from_flags(ns)
    assert str(err.value) == "--synthetic-input-tokens-stddev: -1.0: must be at least 0"


def test_help_is_the_markers_text_with_a_plain_percent_sign(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["analyze", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "max/min - 1 in % (default 999)" in out
    assert "runs per point; mean and spread reported, spread > 10% flagged" in out
    assert "-u URL, --url URL" in out and "--goodput KEY:VALUE [KEY:VALUE ...], -g KEY:VALUE" in out


@pytest.mark.parametrize("name", sorted(GENAI_PERF_SPELLINGS))
def test_genai_perf_spellings_are_aliases_of_the_declared_flag(name: str) -> None:
    flag = next(f for _, _, f in spec_flags() if f.name == name)
    actions = subparser("profile")._option_string_actions
    spelled = GENAI_PERF_SPELLINGS[name]
    assert [n for n in spelled if n in flag.names] == list(flag.names)
    assert len(spelled) > len(flag.names)
    assert {id(actions[n]) for n in spelled} == {id(actions[name])}


def test_a_marker_names_a_long_flag() -> None:
    with pytest.raises(ValueError, match="starting with '-'"):
        CliFlag("request-count")
    with pytest.raises(ValueError, match="long name"):
        CliFlag("-p")
    assert CliFlag("--measurement-interval", "-p").shown == "--measurement-interval/-p"
