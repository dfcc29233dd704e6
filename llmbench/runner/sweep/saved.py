"""A saved sweep read back: the typed documents of a run folder (``llmbench report DIR``).

The run itself never reads these: it holds its results in memory and the folder is where they
end up; the one other reader is the resume (:func:`~llmbench.runner.sweep.run.run_sweep`, which
reads the checkpoint and the finished points).
"""

from __future__ import annotations

from pathlib import Path

from llmbench.api import Spec
from llmbench.api.results import ResultFileError, SweepAnalysis, read_result
from llmbench.runner.artifacts.layout import GENAI_PERF_JSON
from llmbench.runner.artifacts.read import load_summary
from llmbench.runner.sweep.analysis import ANALYZE_JSON, run_info
from llmbench.runner.sweep.run import (
    CHECKPOINT,
    DONE,
    CheckpointError,
    PointRun,
    SweepResult,
    read_checkpoint,
)

__all__ = ["load_analysis", "load_sweep"]


def load_analysis(run_dir: Path) -> SweepAnalysis:
    """``analyze_export_genai_perf.json`` of a run folder; ValueError naming the file (and the
    field, when the file is not the model)."""
    jpath = run_dir / ANALYZE_JSON
    if not jpath.is_file():
        raise ValueError(f"{jpath}: not found; is {run_dir} an `llmbench analyze` folder?")
    return read_result(SweepAnalysis, jpath)


def load_sweep(run_dir: Path) -> tuple[SweepResult, SweepAnalysis]:
    """A saved sweep: its result rebuilt from the folder (``analyze_export_genai_perf.json``'s
    spec, the checkpoint, each point's result) and its saved analysis.

    Runs of an analysis saved before the GPU table's rows were kept in it take theirs from
    their point results, so the summary table reads as it would have in the run.

    Raises ValueError naming the file that is missing or unreadable (and the field, when a file
    is not its model). A point whose own result file is unusable becomes a failed run.
    """
    data = load_analysis(run_dir)
    spec = Spec.from_manifest(data.spec)
    try:
        ckpt = read_checkpoint(run_dir / CHECKPOINT) or {"points": {}}
    except CheckpointError as exc:
        raise ValueError(str(exc)) from None
    result = SweepResult(spec, run_dir, data.model, data.sweep_type, list(data.values))
    result.interrupted = data.interrupted
    result.stopped_after_knee = data.stopped_after_knee
    result.stopped_on_failure = data.stopped_on_failure
    for name, info in ckpt["points"].items():
        summary = None
        status = info.get("status")
        reason = info.get("reason")
        if status == DONE:
            try:
                summary = load_summary(run_dir / name)
            except ResultFileError as exc:
                status, reason = "failed", f"{name}/{GENAI_PERF_JSON} unusable: {exc}"
        result.runs.append(
            PointRun(name, float(info["value"]), int(info.get("repetition", 1)), status, reason,
                     summary, workload=info.get("workload"))
        )
    order = {v: i for i, v in enumerate(result.values)}
    axis2 = {w: i for i, w in enumerate(result.workloads)}  # a two-axis grid: workload first
    result.runs.sort(
        key=lambda r: (axis2.get(r.workload, 1e9), order.get(r.value, 1e9), r.repetition)
    )
    return result, _with_gpu_rows(data, result)


def _with_gpu_rows(data: SweepAnalysis, result: SweepResult) -> SweepAnalysis:
    """``data`` with every run that lacks its GPU rows (``gpus`` absent: saved before they
    were kept) rebuilt from its point result."""
    by_name = {r.name: r for r in result.runs}
    points = []
    for p in data.points:
        runs = [
            run_info(by_name[r.name]) if r.gpus is None and r.name in by_name else r
            for r in p.runs
        ]
        points.append(p.model_copy(update={"runs": runs}))
    return data.model_copy(update={"points": points})
