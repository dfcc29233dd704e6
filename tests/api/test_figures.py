"""One declaration of a point's figures: the status, the baseline, the analysis and compare
read the same fields, under the CRD's names."""

from __future__ import annotations

import pytest

from llmbench.api.figures import FIGURE_NAMES, PointFigures
from llmbench.api.results import PointMetrics
from llmbench.api.spec import BaselinePoint
from llmbench.api.status import PointStatus, dump
from llmbench.runner.sweep.compare import POINT_METRICS, point_metrics


@pytest.mark.parametrize("model", [PointStatus, BaselinePoint, PointMetrics])
def test_every_figures_model_is_a_point_figures(model: type[PointFigures]) -> None:
    assert issubclass(model, PointFigures)
    assert set(FIGURE_NAMES) | {"value"} <= set(model.model_fields)


def test_the_api_keeps_its_camel_case_names() -> None:
    point = BaselinePoint.model_validate(
        {"value": 8, "ttftP99Ms": 120, "e2eP99Ms": 900, "joulesPerOutputToken": 0.5}
    )
    status = PointStatus.of(point, name="8", state="Succeeded")
    assert dump(status) == {
        "value": 8.0, "ttftP99Ms": 120.0, "e2eP99Ms": 900.0, "joulesPerOutputToken": 0.5,
        "name": "8", "state": "Succeeded", "warnings": [], "shardLoad": [],
    }


def test_of_copies_every_figure_and_refuses_unknown_fields() -> None:
    figures = {name: float(i + 1) for i, name in enumerate(FIGURE_NAMES)}
    metrics = PointMetrics(value=4, completed=10, **figures)
    status = PointStatus.of(metrics, name="c4", state="Succeeded")
    assert status.figures() == metrics.figures() == {"value": 4.0, **figures}
    with pytest.raises(TypeError, match="slo_mte"):
        PointStatus.of(metrics, name="c4", state="Succeeded", slo_mte=True)


def test_compare_reads_every_figure_under_its_tolerance_name() -> None:
    assert sorted(POINT_METRICS.values()) == sorted(FIGURE_NAMES)
    figures = PointFigures(value=1, ttft_p99_ms=45.0, joules_per_output_token=0.2)
    got = point_metrics(figures)
    assert got["ttft_p99"] == 45.0 and got["j_per_token"] == 0.2 and got["ott"] is None


def test_a_negative_baseline_figure_is_refused_naming_the_field() -> None:
    with pytest.raises(ValueError, match="ttftP99Ms"):
        BaselinePoint.model_validate({"value": 8, "ttftP99Ms": -1})
