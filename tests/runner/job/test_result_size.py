"""The admission cap on points x repetitions holds: a maximal admitted sweep's results fit the
ConfigMap, as the runner's own serialiser writes them.

The point results are real: ``benchmarks/result_size.py`` runs the runner against
``llmbench sim`` with eight simulated GPUs of the target pod (telemetry, series, input config),
and its ``configmap_bytes`` hands a sweep of the asked size built from them to the runner's
``updates`` (per-point budget, series shedding, digest, CSV, checkpoint).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.result_size import configmap_bytes, measured_points, sweep_doc
from llmbench.api import Spec
from llmbench.api.results import PointResult
from llmbench.api.spec import MAX_STORED_POINTS, SpecError
from llmbench.runner.job.main import CONFIGMAP_LIMIT, point_text


@pytest.fixture(scope="module")
def eight_gpu_points(tmp_path_factory: pytest.TempPathFactory) -> list[PointResult]:
    return measured_points(tmp_path_factory.mktemp("measure"), gpus=8, requests=24)


@pytest.mark.parametrize(
    ("values", "repetitions"),
    [(MAX_STORED_POINTS, 1), (1, MAX_STORED_POINTS), (8, 5), (20, 2)],
)
def test_a_maximal_admitted_sweep_fits_the_configmap(
    eight_gpu_points: list[PointResult], tmp_path: Path, values: int, repetitions: int
) -> None:
    Spec.from_manifest(sweep_doc(values, repetitions))  # admitted
    sizes = configmap_bytes(eight_gpu_points, values, repetitions, tmp_path)
    assert sizes["total"] < CONFIGMAP_LIMIT, sizes
    with pytest.raises(SpecError, match=f"at most {MAX_STORED_POINTS}"):
        Spec.from_manifest(sweep_doc(values, repetitions + 1))  # one repetition more: refused


def test_the_stored_point_leaves_out_what_reading_it_back_rebuilds(
    eight_gpu_points: list[PointResult],
) -> None:
    point = eight_gpu_points[0]
    assert point.telemetry is not None and len(point.telemetry.gpus) == 8
    for budget in (10**9, 1):
        text = point_text(point, budget)
        assert "telemetry_stats" not in json.loads(text)
        back = PointResult.model_validate_json(text)
        assert back.to_dict()["telemetry_stats"].keys() == point.to_dict()["telemetry_stats"].keys()
        assert back.output_token_throughput == point.output_token_throughput
    assert PointResult.model_validate_json(point_text(point, 10**9)) == point  # lossless
    slim = PointResult.model_validate_json(point_text(point, 1))
    assert slim.telemetry is not None and point.telemetry is not None
    for key, gpu in slim.telemetry.gpus.items():
        full = point.telemetry.gpus[key]
        assert gpu.series.t_s == [] and gpu.power_w.p50 is None
        assert (gpu.power_w.avg, gpu.power_w.p99, gpu.energy_j) == (
            full.power_w.avg, full.power_w.p99, full.energy_j)
