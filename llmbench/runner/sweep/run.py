"""A sweep: many load points run strictly one after another, resumable, with repetitions.

Why one process and one point at a time: two points at once would share the server and
measure each other; a pod per point would pay its start-up for every point. Each finished
point is written (GenAI-Perf's per-point folder) and recorded in ``checkpoint.json`` before the
next one starts, so running the same command again after an interruption repeats nothing that
finished, and says what it resumed.

Sweep values (``--sweep-range start:end[:step]`` or ``--sweep-list a,b,c``):

* ``concurrency`` without a step: ``start``, the powers of two between, and ``end``
  (GenAI-Perf's default: ``1:256`` -> 1, 2, 4, ..., 256; ``3:20`` -> 3, 4, 8, 16, 20);
* other types without a step: 8 evenly spaced values from ``start`` to ``end`` (rounded to
  whole tokens for ``input_sequence_length``/``output_sequence_length``, duplicates dropped);
* with a step: ``start, start + step, ...`` up to ``end`` (inclusive when it lands on it).

Concurrency and sequence lengths are whole numbers >= 1; request rates are > 0.

With ``sweep.search`` the range bounds an adaptive search instead (:mod:`.search`): each
probe is chosen from the verdicts of those before it, so ``values`` grows, in load order, as
the probes are chosen, and a resumed search re-derives the same probes from the checkpoint.

Point folders, GenAI-Perf's: ``<model>-openai-<endpoint-type>-concurrency<N>``
(``request_rate<R>`` for rate sweeps);
length sweeps append ``-isl<N>``/``-osl<N>`` to the load's own name; with repetitions,
``-rep<k>``.

Two axes (``sweep.workloads``, ISL/OSL pairs): the grid runs workload by workload, every load
value of the first workload, then of the next; each point is its workload's spec (the pair's
lengths as ``workload.inputTokens.mean``/``outputTokens.mean``) at its load value, and its
folder ends in the workload's label (``...-concurrency8-isl128-osl512``).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Awaitable, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from llmbench.api import Spec
from llmbench.api.figures import FIGURE_NAMES
from llmbench.api.results import PointResult, ResultFileError, Spread
from llmbench.api.results.sweep import REASONING_FIGURES, SCHEDULE_FIGURES
from llmbench.api.spec import SweepWorkload
from llmbench.runner.artifacts.layout import default_artifact_dir
from llmbench.runner.artifacts.read import load_summary
from llmbench.runner.artifacts.write import write_atomic
from llmbench.runner.client.transport import ConnectError
from llmbench.runner.point.config import point_config
from llmbench.runner.point.preflight import ProfileError
from llmbench.runner.point.profile import run_profile
from llmbench.runner.sweep.knee import PointMetrics, evaluate_slo, find_knee
from llmbench.runner.sweep.search import SearchPlan, next_probe, search_plan

__all__ = [
    "CHECKPOINT",
    "PointRun",
    "Spread",
    "CheckpointError",
    "SweepResult",
    "checkpoint_text",
    "run_sweep",
]

CHECKPOINT = "checkpoint.json"
CHECKPOINT_VERSION = 1
#: A repeated point whose (max - min) / mean exceeds this is flagged unstable.
SPREAD_LIMIT = 0.10


class CheckpointError(Exception):
    """A sweep cannot resume: its checkpoint is corrupt or belongs to another sweep."""


# ----------------------------------------------------------------------------------------------
# results
# ----------------------------------------------------------------------------------------------

DONE = "done"
FAILED = "failed"


@dataclass
class PointRun:
    """One run of one point (one repetition): where it is, whether it finished, its numbers."""

    name: str
    value: float
    repetition: int
    status: str
    reason: str | None = None
    summary: PointResult | None = None
    resumed: bool = False
    #: the point's workload label (``isl128-osl512``) in a two-axis sweep, else None
    workload: str | None = None

    def metrics(self) -> PointMetrics:
        """The knee/SLO figures of this run (a failed run carries its reason)."""
        if self.status != DONE or self.summary is None:
            return PointMetrics(value=self.value, failed=self.reason or "failed")
        return PointMetrics.from_summary(self.value, self.summary)


#: PointMetrics attributes whose spread across repetitions is reported (labels: the
#: attribute's metric in :data:`llmbench.runner.labels.METRIC_LABELS`).
SPREAD_METRICS = ("ttft_p99_ms", "itl_p99_ms", "e2e_p99_ms", "ott", "rps")


def spread(values: Sequence[float]) -> Spread:
    """Mean, std, min, max of one metric over a point's repetitions; unstable above 10 %."""
    arr = np.asarray(values, dtype=np.float64)
    mean = float(arr.mean())
    relative = (float(arr.max()) - float(arr.min())) / mean if mean else 0.0
    return Spread(
        mean=mean,
        std=float(arr.std()),
        min=float(arr.min()),
        max=float(arr.max()),
        n=len(values),
        spread_pct=relative * 100,
        unstable=relative > SPREAD_LIMIT,
    )


def aggregate(runs: Sequence[PointRun]) -> tuple[PointMetrics, dict[str, Spread]]:
    """Mean figures of a point's repetitions and each metric's spread.

    Failed repetitions are left out of the means; if every repetition failed the point failed.
    """
    value = runs[0].value
    ok = [r.metrics() for r in runs if r.status == DONE and r.summary is not None]
    if not ok:
        reason = next((r.reason for r in runs if r.reason), "failed")
        return PointMetrics(value=value, failed=reason), {}
    measured = {
        attr: [getattr(m, attr) for m in ok if getattr(m, attr) is not None]
        for attr in (*FIGURE_NAMES, *SCHEDULE_FIGURES, *REASONING_FIGURES)
    }
    means = {
        attr: float(np.mean(np.asarray(vals, dtype=np.float64))) if vals else None
        for attr, vals in measured.items()
    }
    spreads = {attr: spread(measured[attr]) for attr in SPREAD_METRICS if measured[attr]}
    good = [m.good_requests for m in ok if m.good_requests is not None]
    mean_point = PointMetrics.model_validate({
        "value": value,
        **means,
        "completed": sum(m.completed for m in ok),
        "good_requests": sum(good) if len(good) == len(ok) else None,
    })
    return mean_point, spreads


@dataclass
class SweepResult:
    """Everything a finished (or interrupted) sweep knows, in run order."""

    spec: Spec
    run_dir: Path
    model: str
    sweep_type: str
    values: list[float]
    runs: list[PointRun] = field(default_factory=list)
    interrupted: bool = False
    stopped_after_knee: bool = False
    stopped_on_failure: bool = False
    resumed: list[str] = field(default_factory=list)

    @property
    def workloads(self) -> list[str | None]:
        """The second axis' labels in run order; ``[None]`` for a one-axis sweep."""
        return workload_labels(self.spec)

    def by_value(self) -> list[list[PointRun]]:
        """Runs grouped per swept value (per workload and value on two axes), in sweep order
        (values not reached are left out)."""
        groups: dict[tuple[str | None, float], list[PointRun]] = {}
        for r in self.runs:
            groups.setdefault((r.workload, r.value), []).append(r)
        return [groups[(w, v)] for w in self.workloads for v in self.values if (w, v) in groups]

    def points(self) -> list[tuple[PointMetrics, dict[str, Spread]]]:
        """Aggregated figures and spreads per value reached."""
        return [aggregate(g) for g in self.by_value()]

    def metrics(self) -> list[PointMetrics]:
        """Aggregated figures per value reached, for the knee and SLO rules."""
        return [p for p, _ in self.points()]

    @property
    def failed_runs(self) -> list[PointRun]:
        """Runs that produced no result."""
        return [r for r in self.runs if r.status == FAILED]


# ----------------------------------------------------------------------------------------------
# checkpoint
# ----------------------------------------------------------------------------------------------


def fingerprint(spec: Spec, model: str) -> str:
    """What must match for a resume: the measured settings, not how the sweep ends."""
    d = spec.to_dict()
    d.pop("cost", None)
    d.pop("schedule", None)
    d.pop("runner", None)  # where and how the runner pod runs, not what it measures
    sw = d.get("sweep")
    if isinstance(sw, dict):
        sw.pop("stopAfterKnee", None)
        sw.pop("onPointFailure", None)
    d["_model"] = model
    return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]


def read_checkpoint(path: Path) -> dict[str, Any] | None:
    """The checkpoint, None when there is none; :class:`CheckpointError` when it is unreadable."""
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(
            f"{path} is corrupt ({exc}); delete it or pass --restart to start the sweep over"
        ) from None
    if (
        not isinstance(data, dict)
        or data.get("version") != CHECKPOINT_VERSION
        or not isinstance(data.get("points"), dict)
    ):
        raise CheckpointError(
            f"{path} is not a version-{CHECKPOINT_VERSION} llmbench checkpoint; delete it or "
            "pass --restart to start the sweep over"
        )
    return data


def checkpoint_text(result: SweepResult) -> str:
    """``checkpoint.json`` of the sweep so far: every finished or failed run.

    Pure, so the runner pod hands the store the very text the folder holds without reading
    the file back.
    """
    data = {
        "version": CHECKPOINT_VERSION,
        "fingerprint": fingerprint(result.spec, result.model),
        "model": result.model,
        "sweep_type": result.sweep_type,
        "values": result.values,
        "repetitions": result.spec.repetitions,
        "points": {
            r.name: {
                "value": r.value,
                "repetition": r.repetition,
                "status": r.status,
                "reason": r.reason,
                **({"workload": r.workload} if r.workload is not None else {}),
            }
            for r in result.runs
        },
        "stopped_after_knee": result.stopped_after_knee,
        "complete": not result.interrupted and len(result.runs) > 0,
    }
    return json.dumps(data, indent=1)


def write_checkpoint(result: SweepResult) -> None:
    """Writes :func:`checkpoint_text` after each point, atomically."""
    write_atomic(result.run_dir / CHECKPOINT, checkpoint_text(result))


# ----------------------------------------------------------------------------------------------
# running
# ----------------------------------------------------------------------------------------------


def workload_labels(spec: Spec) -> list[str | None]:
    """The labels of ``sweep.workloads`` in run order, ``[None]`` without a second axis."""
    if spec.sweep is None or spec.sweep.workloads is None:
        return [None]
    return [w.label for w in spec.sweep.workloads]


def workload_spec(spec: Spec, workload: SweepWorkload) -> Spec:
    """The spec of one workload's points: the pair's lengths as the synthetic means (the
    stddevs and everything else kept), so :func:`point_config` builds them unchanged."""
    out = spec.model_copy(deep=True)
    out.workload.input_tokens.mean = workload.input_tokens
    out.workload.output_tokens.mean = workload.output_tokens
    return out


def point_name(
    spec: Spec,
    model: str,
    sweep_type: str,
    value: float,
    repetition: int,
    workload: str | None = None,
) -> str:
    """The per-point folder name, GenAI-Perf style (see the module docstring)."""
    et = spec.target.endpoint_type
    if sweep_type in ("concurrency", "request_rate"):
        name = default_artifact_dir(model, et, sweep_type, value).name
    else:
        load = spec.load
        mode_value: float = (
            load.request_rate or 1.0 if load.mode == "request_rate" else load.concurrency
        )
        name = default_artifact_dir(model, et, load.mode, mode_value).name
        name += f"-{'isl' if sweep_type == 'input_sequence_length' else 'osl'}{int(value)}"
    if workload is not None:
        name += f"-{workload}"
    if spec.repetitions > 1:
        name += f"-rep{repetition}"
    return name


PointRunner = Callable[[Any, asyncio.Event], Awaitable[Any]]
Notify = Callable[[str], None]


async def _default_runner(cfg: Any, stop: asyncio.Event) -> Any:
    return await run_profile(cfg, stop=stop)


async def run_sweep(
    spec: Spec,
    run_dir: Path,
    *,
    model: str,
    run_point: PointRunner | None = None,
    stop: asyncio.Event | None = None,
    notify: Notify | None = None,
    restart: bool = False,
    api_key: str | None = None,
    headers: dict[str, str] | None = None,
    on_point: Callable[[SweepResult], None] | None = None,
    preflight: bool = True,
    point_options: dict[str, Any] | None = None,
) -> SweepResult:
    """Runs (or resumes) every point of ``spec`` into ``run_dir``.

    ``run_point(cfg, stop)`` measures one point (default: :func:`run_profile`); tests pass
    their own. ``preflight`` checks the target before each point, so a server that went
    down fails that point with the reason instead of a timeout. ``on_point`` sees the result
    after every point (e.g. to rewrite the CSV). ``point_options`` are set on every point's
    ProfileConfig (e.g. ``{"telemetry": collector}``): runtime objects the spec cannot hold.
    Raises :class:`CheckpointError` for a corrupt or foreign checkpoint.
    """
    say = notify or (lambda _msg: None)
    runner = run_point or _default_runner
    stop = stop or asyncio.Event()
    sweep_type = spec.sweep.type if spec.sweep is not None else spec.load.mode
    raw_values = spec.points()
    load_value = (
        float(spec.load.request_rate or 0.0)
        if spec.load.mode == "request_rate"
        else float(spec.load.concurrency)
    )
    values = [v if v is not None else load_value for v in raw_values]
    run_dir.mkdir(parents=True, exist_ok=True)
    fp = fingerprint(spec, model)
    ckpt_path = run_dir / CHECKPOINT
    ckpt = None if restart else read_checkpoint(ckpt_path)
    if ckpt is not None and ckpt.get("fingerprint") != fp:
        raise CheckpointError(
            f"{ckpt_path} belongs to a different sweep (other settings or model); use another "
            "--artifact-dir, or pass --restart to start this one over"
        )
    done: dict[str, dict[str, Any]] = (
        {k: v for k, v in ckpt["points"].items() if v.get("status") == DONE} if ckpt else {}
    )
    plan = search_plan(spec)
    result = SweepResult(spec, run_dir, model, sweep_type, [] if plan is not None else values)
    on_failure = spec.sweep.on_point_failure if spec.sweep is not None else "continue"
    stop_after_knee = spec.sweep is not None and spec.sweep.stop_after_knee
    workloads: list[SweepWorkload | None] = (
        list(spec.sweep.workloads)
        if spec.sweep is not None and spec.sweep.workloads is not None
        else [None]
    )
    total = len(values) * len(workloads) * spec.repetitions if plan is None else None
    n = 0
    grid = list(zip(values, raw_values, strict=True))
    # a search chooses its probes as it goes (one axis only); a grid is known up front
    cells: Iterable[tuple[SweepWorkload | None, int, float, float | None]] = (
        [(wl, vi, value, raw) for wl in workloads for vi, (value, raw) in enumerate(grid)]
        if plan is None
        else ((None, vi, v, raw) for vi, (v, raw) in enumerate(_sequence(result, plan, grid)))
    )
    for wl, vi, value, raw in cells:
        label = wl.label if wl is not None else None
        point_spec = workload_spec(spec, wl) if wl is not None else spec
        for rep in range(1, spec.repetitions + 1):
            n += 1
            name = point_name(spec, model, sweep_type, value, rep, label)
            point_dir = run_dir / name
            if name in done:
                try:
                    summary = load_summary(point_dir)
                except ResultFileError as exc:
                    say(f"{name}: checkpoint says done but its results are unusable ({exc}); "
                        "re-running")
                else:
                    result.runs.append(
                        PointRun(name, value, rep, DONE, None, summary, True, label)
                    )
                    result.resumed.append(name)
                    continue
            if stop.is_set():
                result.interrupted = True
                break
            if n == len(result.resumed) + 1 and result.resumed:
                of = f" of {total}" if total is not None else ""
                say(
                    f"resuming from {ckpt_path}: {len(result.resumed)}{of} points already "
                    f"done ({', '.join(result.resumed)}); continuing with {name}"
                )
            cfg = point_config(point_spec, raw, api_key=api_key, headers=headers,
                               preflight=preflight)
            cfg.model = model
            cfg.artifact_dir = point_dir
            for key, option in (point_options or {}).items():
                setattr(cfg, key, option)
            say(f"[{n}/{total}] {name}" if total is not None else f"[search {n}] {name}")
            try:
                pr = await runner(cfg, stop)
            except (ProfileError, ConnectError, OSError, TimeoutError) as exc:
                run = PointRun(name, value, rep, FAILED, f"{type(exc).__name__}: {exc}",
                               workload=label)
            else:
                summary = pr.summary
                if summary.interrupted:
                    result.interrupted = True
                    say(f"{name}: interrupted; it will run again when the sweep resumes")
                    break
                reason = summary.failure_reason()
                run = PointRun(name, value, rep, FAILED if reason else DONE, reason, summary,
                               workload=label)
            result.runs.append(run)
            write_checkpoint(result)
            if on_point is not None:
                on_point(result)
            if run.status == FAILED:
                say(f"{name}: FAILED: {run.reason}")
                if on_failure == "stop":
                    result.stopped_on_failure = True
                    break
        if result.interrupted or result.stopped_on_failure:
            break
        if stop_after_knee and sweep_type in ("concurrency", "request_rate"):
            knee = find_knee(result.metrics(), sweep_type=sweep_type)
            # An OTT plateau shows only at the point after the knee (k puts it at k-1), and no
            # later point can move it earlier: once the point past the knee ran, stop.
            if knee is not None and vi >= _index_of(result, knee.value) + 1:
                result.stopped_after_knee = vi < len(values) - 1
                break
    if result.resumed and len(result.resumed) == len(result.runs):
        say(f"{ckpt_path}: all {len(result.resumed)} points were already done; nothing re-run")
    write_checkpoint(result)
    return result


def probe_verdicts(result: SweepResult) -> list[tuple[float, bool]]:
    """Each value measured so far, in the order first measured, and whether it met every SLO
    (its repetitions' mean figures, as the analysis judges it)."""
    limits = result.spec.slo.limits()
    groups = {g[0].value: g for g in result.by_value()}
    order = dict.fromkeys(r.value for r in result.runs)
    return [(v, not evaluate_slo(aggregate(groups[v])[0], limits)) for v in order]


def _sequence(
    result: SweepResult, plan: SearchPlan | None, grid: list[tuple[float, float | None]]
) -> Iterator[tuple[float, float | None]]:
    """The values to run: the grid's, or a search's next probe after each measured one (its
    value is added to ``result.values`` in load order as it is chosen)."""
    if plan is None:
        yield from grid
        return
    while (value := next_probe(plan, probe_verdicts(result))) is not None:
        if value in result.values:  # a probe is never repeated; stop rather than loop
            return
        result.values = sorted([*result.values, value])
        yield value, value


def _index_of(result: SweepResult, value: float) -> int:
    return [g[0].value for g in result.by_value()].index(value)
