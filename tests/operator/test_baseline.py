"""Choosing the baseline of a run and the ``Regressed`` condition (pure functions)."""

from __future__ import annotations

import json
from typing import Any

from llmbench.api.job import DIGEST_KEY, STACK_KEY, BaselineContext, HistoryFigures
from llmbench.api.spec import Baseline
from llmbench.api.status import (
    MaxUnderSloStatus,
    NodeInfo,
    PointStatus,
    RegressionVerdict,
    RunDigest,
    StackStatus,
    VerdictRow,
    dump,
)
from llmbench.operator.baseline import (
    INSUFFICIENT_HISTORY,
    VALUES_LABEL,
    choose,
    from_configmap,
    regressed_condition,
    stack_changes,
)


def entry(run: int, phase: str = "Succeeded", valid: bool | None = True,
          regressed: bool | None = False, spec_hash: str | None = "h1") -> dict[str, Any]:
    out: dict[str, Any] = {"run": run, "phase": phase}
    if valid is not None:
        out["valid"] = valid
    if regressed is not None:
        out["regressed"] = regressed
    if spec_hash is not None:
        out["specHash"] = spec_hash
    return out


def test_the_default_is_the_latest_good_run_of_the_same_settings() -> None:
    history = [
        entry(1),
        entry(2, regressed=True),          # a regression is not a baseline: it stays flagged
        entry(3, valid=False, regressed=None),  # invalid: never a baseline
        entry(4, phase="Failed", valid=None, regressed=None),
        entry(5, spec_hash="h0"),          # other settings measured
    ]
    assert choose(Baseline(), history, "h1", 6).run == 1
    assert choose(Baseline(), history + [entry(6)], "h1", 7).run == 6
    none = choose(Baseline(), history, "h9", 6)
    assert none.run is None and none.context is None
    assert none.reason == "no earlier run succeeded with a valid measurement of these settings"
    assert choose(Baseline(), [], "h1", 1).reason is not None


def test_a_named_run_must_be_earlier_kept_and_valid() -> None:
    history = [entry(1), entry(2, valid=False, regressed=None), entry(3, regressed=True)]
    assert choose(Baseline(run=3), history, "other", 4).run == 3  # named: settings may differ
    assert "not an earlier run" in str(choose(Baseline(run=4), history, "h1", 4).reason)
    assert "not in status.history" in str(choose(Baseline(run=9), [], "h1", 10).reason)
    assert "valid measurement" in str(choose(Baseline(run=2), history, "h1", 4).reason)


def test_fixed_values_are_the_figures_the_runner_gets() -> None:
    b = Baseline.model_validate({"values": {"maxOttUnderSlo": 900, "peakOtt": 1000, "points": [
        {"value": 8, "ttftP99Ms": 120, "joulesPerOutputToken": 0.5},
    ]}})
    ctx = choose(b, [entry(1)], "h1", 2).context
    assert ctx is not None and ctx.label == VALUES_LABEL and ctx.run is None
    assert (ctx.max_ott_under_slo, ctx.peak_ott) == (900, 1000)
    (p,) = ctx.points
    assert (p.value, p.ttft_p99_ms, p.joules_per_output_token, p.ott) == (8, 120, 0.5, None)


def digest_text(valid: bool | None) -> str:
    d = RunDigest(run=2, points=[PointStatus(name="c8", value=8, state="Succeeded", ott=800)],
                  valid=valid)
    d.max_under_slo = MaxUnderSloStatus(value=8, ott=800, ttft_p99_ms=90)
    return json.dumps(dump(d))


def test_a_baseline_run_is_read_from_its_configmap_and_must_be_valid() -> None:
    stack = StackStatus(target_image="sim:1")
    ctx = from_configmap(2, {DIGEST_KEY: digest_text(True), STACK_KEY: json.dumps(dump(stack))})
    assert isinstance(ctx, BaselineContext)
    assert (ctx.label, ctx.run, ctx.max_ott_under_slo) == ("run 2", 2, 800)
    assert ctx.points[0].ott == 800 and ctx.stack == stack
    assert from_configmap(2, {DIGEST_KEY: digest_text(False)}) == (
        "run 2's measurement was not valid")
    assert from_configmap(2, {}) == "run 2's results ConfigMap has no digest.json"
    assert from_configmap(2, {DIGEST_KEY: "{"}) == "run 2's digest.json is unreadable"


def test_stack_changes_name_the_image_args_and_gpus() -> None:
    old = StackStatus(
        target_pods=["a"], target_image="vllm:0.9",
        target_image_id="docker.io/vllm@sha256:1111111111111111111111",
        target_args=["--model", "m", "--max-num-seqs", "256", "--enforce-eager"],
        nodes=[NodeInfo(name="n", gpu_product="NVIDIA-H100")],
    )
    new = StackStatus(
        target_pods=["a", "b"], target_image="vllm:0.10",
        target_image_id="docker.io/vllm@sha256:2222222222222222222222",
        target_args=["--model", "m", "--max-num-seqs", "128", "--kv-cache-dtype=fp8"],
        nodes=[NodeInfo(name="n", gpu_product="NVIDIA-H200")],
    )
    assert stack_changes(old, new) == [
        "target image vllm:0.9 (sha256:111111111111) -> vllm:0.10 (sha256:222222222222)",
        "target args: --max-num-seqs 256 -> 128; added --kv-cache-dtype fp8; removed "
        "--enforce-eager",
        "GPU NVIDIA-H100 -> NVIDIA-H200",
        "target pods 1 -> 2",
    ]
    assert stack_changes(old, old) == []
    assert stack_changes(None, new) == []


BASE = BaselineContext(label="run 2", run=2, stack=StackStatus(target_args=["--ttft", "10ms"]))


def regressed(**kw: Any) -> tuple[str, str, str]:
    args: dict[str, Any] = dict(run=3, failed=False, valid="True", digest=None, baseline=BASE,
                                no_baseline=None, stack=StackStatus(target_args=["--ttft", "80ms"]),
                                generation=1)
    c = regressed_condition(**(args | kw))
    return c.status, c.reason, c.message


def verdict(bad: bool) -> RunDigest:
    rows = [VerdictRow(scope="concurrency 8", metric="ttft_p99", baseline=12.0, value=85.0,
                       change_pct=608.3, tolerance_pct=10, verdict="regression")] if bad else []
    msg = "1 figure(s) regressed against run 2; first: ..." if bad else "4 figure(s) within"
    return RunDigest(run=3, regression=RegressionVerdict(
        baseline="run 2", baseline_run=2, regressed=bad, compared=4, rows=rows, message=msg))


def test_the_condition_from_the_verdict_names_what_changed() -> None:
    status, reason, message = regressed(digest=verdict(True))
    assert (status, reason) == ("True", "Regressed")
    assert message == ("run 3: 1 figure(s) regressed against run 2; first: ...; since run 2: "
                       "target args: --ttft 10ms -> 80ms")
    assert regressed(digest=verdict(False))[:2] == ("False", "WithinTolerance")


def test_runs_that_cannot_be_judged_are_unknown_with_the_reason() -> None:
    assert regressed(failed=True, digest=verdict(True))[:2] == ("Unknown", "RunFailed")
    status, reason, message = regressed(valid="False", digest=verdict(True))
    assert (status, reason) == ("Unknown", "InvalidMeasurement")
    assert "never used as a baseline" in message
    assert regressed(valid=None)[1] == "InvalidMeasurement"
    assert regressed(baseline=None, no_baseline="no earlier run")[1:] == (
        "NoBaseline", "run 3: no earlier run")
    assert regressed(digest=RunDigest(run=3))[1] == "NoVerdict"


# -- spec.baseline.mode: history ----------------------------------------------------------

HISTORY = Baseline.model_validate({"mode": "history", "history": {"runs": 3}})


def figured(run: int, **kw: Any) -> dict[str, Any]:
    return entry(run, **kw) | {"figures": {"sweep/peak_ott": 100.0 + run}}


def test_history_mode_takes_the_last_n_good_runs_with_figures() -> None:
    history = [figured(1), figured(2, regressed=True), figured(3, valid=False),
               figured(4, spec_hash="h2"), entry(5), figured(6), figured(7), figured(8),
               figured(9)]
    choice = choose(HISTORY, history, "h1", 10)
    assert choice.context is not None and choice.reason is None
    assert [h.run for h in choice.context.history] == [7, 8, 9]  # the last 3 that count
    assert choice.context.history[0].figures == {"sweep/peak_ott": 107.0}
    assert choice.context.band_k == 3.0


def test_history_mode_gives_no_verdict_before_min_runs() -> None:
    choice = choose(HISTORY, [figured(1), figured(2), entry(3)], "h1", 4)
    assert choice.context is None and choice.code == INSUFFICIENT_HISTORY
    assert choice.reason == ("insufficient history: 2 valid run(s) of these settings with "
                             "figures, 3 needed (spec.baseline.history.minRuns) before a verdict")
    status, reason, message = regressed(baseline=None, no_baseline=choice.reason,
                                        no_baseline_reason=choice.code)
    assert (status, reason) == ("Unknown", INSUFFICIENT_HISTORY)
    assert message == f"run 3: {choice.reason}"


def test_a_history_verdict_is_within_band_or_regressed_naming_the_stack_change() -> None:
    base = BaselineContext(label="history of 3 runs", stack=BASE.stack,
                           history=[HistoryFigures(run=r, figures={}) for r in (1, 2, 3)])
    band = "1 figure(s) within the noise band of runs 1-3 (...); nearest its bad bound: ..."
    digest = RunDigest(run=4, regression=RegressionVerdict(
        baseline="history of runs 1-3", compared=1, message=band, history_runs=[1, 2, 3]))
    status, reason, message = regressed(baseline=base, digest=digest)
    assert (status, reason) == ("False", "WithinBand")
    assert message == (f"run 3: {band}; since history of 3 runs: target args: --ttft 10ms -> "
                       "80ms")
    nothing = RunDigest(run=4, regression=RegressionVerdict(
        baseline="history", compared=0, message="insufficient history: ..."))
    assert regressed(baseline=base, digest=nothing)[:2] == ("Unknown", INSUFFICIENT_HISTORY)
