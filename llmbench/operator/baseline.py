"""Which run a new run is judged against, and the ``Regressed`` condition that says how it went.

Why the work is split this way: the verdict itself is ``llmbench compare``'s (one
implementation, in the runner), so the operator only *chooses* the baseline and hands its
figures to the runner in ``context.json``; the runner reports the verdict in its digest, and
the operator turns it into a condition, naming what changed in the target's stack between the
two runs ("slower after the deploy of image X" then reads directly).

Choosing (``spec.baseline``):

* ``values``: fixed numbers, always there;
* ``run: N``: that run, if it finished valid and its results ConfigMap still exists;
* otherwise the latest earlier run in ``status.history`` that succeeded, was valid, did not
  regress and measured the same settings (same ``specHash``). A regressed run is skipped so a
  slowdown stays flagged on the following nights until it is fixed, or accepted by naming a
  run as the baseline.

``mode: history`` (:func:`choose_history`): the last ``history.runs`` entries of
``status.history`` that succeeded, were valid, did not regress, measured the same settings and
carry their judged figures; fewer than ``history.minRuns`` of them: no verdict
(``Regressed=Unknown``, ``InsufficientHistory``), so a young benchmark never flips. The runner
judges the run against their noise bands (:mod:`llmbench.runner.sweep.noise`). How many runs
the history can hold: ``spec.historyLimit`` (default 30, the default N is 10) and the status
bound (:data:`~llmbench.operator.status.MAX_STATUS_BYTES`, 64 KiB, whose oldest entries go
first): an entry with the default tolerances' figures of a 7-point sweep is about 0.7 KiB, so
some 60 such entries fit beside a run's own status.

An invalid measurement is never a baseline and never a regression (``Regressed=Unknown``).
Everything here is pure; the handlers do the reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from llmbench.api.job import DIGEST_KEY, STACK_KEY, BaselineContext, HistoryFigures
from llmbench.api.spec import Baseline, BaselineValues, HistoryBand
from llmbench.api.status import Condition, PointStatus, RunDigest, StackStatus

from .status import condition

__all__ = [
    "INSUFFICIENT_HISTORY",
    "VALUES_LABEL",
    "Choice",
    "choose",
    "choose_history",
    "from_configmap",
    "from_values",
    "regressed_condition",
    "stack_changes",
    "stack_of",
]

VALUES_LABEL = "spec.baseline.values"
#: The ``Regressed`` reason of a run judged by a history too short for a verdict.
INSUFFICIENT_HISTORY = "InsufficientHistory"


@dataclass(frozen=True)
class Choice:
    """A baseline run to read (``run``), figures already known (``context``), or why there
    is none (``reason``, and the ``Regressed`` condition's reason for it: ``code``)."""

    run: int | None = None
    context: BaselineContext | None = None
    reason: str | None = None
    code: str | None = None


def _comparable(entry: Mapping[str, Any], run: int, spec_hash: str | None) -> bool:
    """An earlier run that succeeded, was valid, did not regress and measured these settings."""
    return (
        entry.get("run", run) < run
        and entry.get("phase") == "Succeeded"
        and entry.get("valid") is True
        and entry.get("regressed") is not True
        and spec_hash is not None
        and entry.get("specHash") == spec_hash
    )


def choose_history(
    band: HistoryBand, history: Sequence[Mapping[str, Any]], spec_hash: str | None, run: int
) -> Choice:
    """``mode: history``: the last ``band.runs`` comparable runs with figures, or
    :data:`INSUFFICIENT_HISTORY` when fewer than ``band.minRuns`` are there. A regressed run
    stays out of the band, so a slowdown does not widen the band that flags it."""
    found = [
        HistoryFigures(run=int(h["run"]), figures=dict(h["figures"]))
        for h in history
        if _comparable(h, run, spec_hash) and h.get("figures")
    ][-band.runs:]
    if len(found) < band.min_runs:
        return Choice(
            reason=f"insufficient history: {len(found)} valid run(s) of these settings with "
            f"figures, {band.min_runs} needed (spec.baseline.history.minRuns) before a "
            "verdict",
            code=INSUFFICIENT_HISTORY,
        )
    return Choice(context=BaselineContext(
        label=f"history of {len(found)} runs", history=found, band_k=band.k,
    ))


def from_values(values: BaselineValues) -> BaselineContext:
    """Fixed numbers as the figures the runner compares with."""
    return BaselineContext(
        label=VALUES_LABEL,
        max_ott_under_slo=values.max_ott_under_slo,
        peak_ott=values.peak_ott,
        points=[
            PointStatus.of(p, name=f"{p.value:g}", state="Succeeded")
            for p in values.points or []
        ],
    )


def choose(
    baseline: Baseline, history: Sequence[Mapping[str, Any]], spec_hash: str | None, run: int
) -> Choice:
    """The baseline of run ``run`` from the spec and the history (oldest first)."""
    if baseline.mode == "history":
        return choose_history(baseline.history, history, spec_hash, run)
    if baseline.values is not None:
        return Choice(context=from_values(baseline.values))
    if baseline.run is not None:
        if baseline.run >= run:
            return Choice(reason=f"spec.baseline.run {baseline.run} is not an earlier run "
                                 f"(this is run {run})")
        entry = next((h for h in history if h.get("run") == baseline.run), None)
        if entry is None:
            return Choice(reason=f"spec.baseline.run {baseline.run} is not in status.history "
                                 "(pruned by historyLimit, or never finished)")
        if entry.get("phase") != "Succeeded" or entry.get("valid") is not True:
            return Choice(reason=f"spec.baseline.run {baseline.run} did not finish with a valid "
                                 "measurement; name a run that did")
        return Choice(run=baseline.run)
    for entry in reversed(history):
        if _comparable(entry, run, spec_hash):
            return Choice(run=int(entry["run"]))
    return Choice(reason="no earlier run succeeded with a valid measurement of these settings")


def stack_of(data: Mapping[str, str]) -> StackStatus | None:
    """The stack a run measured, from its results ConfigMap (None: not recorded, unreadable)."""
    if not data.get(STACK_KEY):
        return None
    try:
        return StackStatus.model_validate(json.loads(data[STACK_KEY]))
    except (ValidationError, ValueError):
        return None


def from_configmap(run: int, data: Mapping[str, str]) -> BaselineContext | str:
    """The figures of run ``run`` from its results ConfigMap, or why they cannot be used."""
    raw = data.get(DIGEST_KEY)
    if not raw:
        return f"run {run}'s results ConfigMap has no {DIGEST_KEY}"
    try:
        digest = RunDigest.model_validate_json(raw)
    except ValidationError:
        return f"run {run}'s {DIGEST_KEY} is unreadable"
    if digest.valid is not True:
        return f"run {run}'s measurement was not valid"
    stack = stack_of(data)
    best = digest.max_under_slo
    return BaselineContext(
        label=f"run {run}",
        run=run,
        max_ott_under_slo=best.ott if best is not None else None,
        points=digest.points,
        stack=stack,
    )


def _gpus(stack: StackStatus) -> str:
    return ", ".join(sorted({n.gpu_product for n in stack.nodes if n.gpu_product})) or "?"


def _image(stack: StackStatus) -> str:
    image = stack.target_image or "?"
    if stack.target_image_id and "@" in stack.target_image_id:
        return f"{image} ({stack.target_image_id.rsplit('@', 1)[1][:19]})"
    return image


def _flags(args: Sequence[str]) -> dict[str, str | None]:
    """``--flag value`` / ``--flag=value`` / ``--switch`` / positional, as flag -> value."""
    out: dict[str, str | None] = {}
    i = 0
    while i < len(args):
        a = args[i]
        if a.startswith("-") and "=" in a:
            key, _, value = a.partition("=")
            out[key] = value
        elif a.startswith("-") and i + 1 < len(args) and not args[i + 1].startswith("-"):
            out[a] = args[i + 1]
            i += 1
        else:
            out[a] = None
        i += 1
    return out


def _args_change(old: Sequence[str], new: Sequence[str]) -> str:
    """``--time-to-first-token 10ms -> 80ms; added --x 1; removed --y``."""
    a, b = _flags(old), _flags(new)
    parts = [
        f"{k} {a[k]} -> {b[k]}" for k in b if k in a and a[k] != b[k]
    ]
    parts += [f"added {k}" + (f" {b[k]}" if b[k] is not None else "") for k in b if k not in a]
    parts += [f"removed {k}" for k in a if k not in b]
    return "; ".join(parts) or "reordered"


def stack_changes(old: StackStatus | None, new: StackStatus | None) -> list[str]:
    """What changed in the target between the baseline and this run, in words."""
    if old is None or new is None:
        return []
    out = []
    if (old.target_image_id, old.target_image) != (new.target_image_id, new.target_image) and (
        old.target_image_id or old.target_image
    ):
        out.append(f"target image {_image(old)} -> {_image(new)}")
    if old.target_args != new.target_args:
        out.append(f"target args: {_args_change(old.target_args, new.target_args)}")
    if _gpus(old) != _gpus(new) and old.nodes and new.nodes:
        out.append(f"GPU {_gpus(old)} -> {_gpus(new)}")
    if len(old.target_pods) != len(new.target_pods) and old.target_pods:
        out.append(f"target pods {len(old.target_pods)} -> {len(new.target_pods)}")
    return out


def regressed_condition(
    *,
    run: int,
    failed: bool,
    valid: str | None,
    digest: RunDigest | None,
    baseline: BaselineContext | None,
    no_baseline: str | None,
    stack: StackStatus | None,
    generation: int | None,
    no_baseline_reason: str | None = None,
) -> Condition:
    """``Regressed`` for a finished run: True/False from the runner's verdict, Unknown (with
    the reason) when the run cannot be judged."""
    if failed:
        return condition("Regressed", None, "RunFailed", f"run {run} failed: not judged",
                         generation)
    if valid != "True":
        return condition(
            "Regressed", None, "InvalidMeasurement",
            f"run {run}'s measurement is not valid (MeasurementValid={valid or 'Unknown'}): "
            "not judged, and never used as a baseline", generation,
        )
    if baseline is None:
        return condition("Regressed", None, no_baseline_reason or "NoBaseline",
                         f"run {run}: {no_baseline or 'no baseline'}", generation)
    verdict = digest.regression if digest is not None else None
    if verdict is None:
        return condition(
            "Regressed", None, "NoVerdict",
            f"run {run}: the runner reported no verdict against {baseline.label} (a runner "
            "image older than the operator?)", generation,
        )
    if baseline.history and not verdict.compared:
        return condition("Regressed", None, INSUFFICIENT_HISTORY,
                         f"run {run}: {verdict.message}", generation)
    changes = stack_changes(baseline.stack, stack)
    since = f"; since {baseline.label}: {'; '.join(changes)}" if changes else ""
    if verdict.regressed:
        return condition("Regressed", True, "Regressed", f"run {run}: {verdict.message}{since}",
                         generation)
    return condition("Regressed", False, "WithinBand" if baseline.history else "WithinTolerance",
                     f"run {run}: {verdict.message}{since}", generation)
