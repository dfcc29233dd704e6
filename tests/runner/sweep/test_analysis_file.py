"""``analyze_export_genai_perf.json`` through its model: saved files read back and written
unchanged (the fixtures in ``data/`` came from the untyped writer), and a malformed file named
with the field at fault."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llmbench.api.results import SweepAnalysis
from llmbench.runner.sweep.analysis import ANALYZE_JSON
from llmbench.runner.sweep.saved import load_analysis

DATA = Path(__file__).parent / "data"
FILES = sorted(p.name for p in DATA.glob("*.json"))


@pytest.mark.parametrize("name", FILES)
def test_saved_analyses_round_trip_byte_identical(name: str, tmp_path: Path) -> None:
    shutil.copy(DATA / name, tmp_path / ANALYZE_JSON)
    data = load_analysis(tmp_path)
    assert data.to_json(indent=1) == (DATA / name).read_text(encoding="utf-8")


def test_analysis_attributes() -> None:
    costed = load_analysis_file("slo_cost.json")
    assert costed.slo is not None and costed.slo.best == costed.points[-1].name
    assert costed.cost.price_per_hour == 3.0
    assert all(p.meets_slo is not None for p in costed.points)
    reps = load_analysis_file("rate_repetitions.json")
    assert reps.slo is None and all(p.meets_slo is None for p in reps.points)
    assert "meets_slo" not in reps.to_dict()["points"][0]
    assert reps.points[0].spreads["ott"].n == 2
    assert reps.points[0].metrics.goodput_ratio is None


def test_malformed_analysis_names_the_file_and_the_field(tmp_path: Path) -> None:
    doc = json.loads((DATA / "slo_cost.json").read_text(encoding="utf-8"))
    doc["points"][1]["metrics"]["ott"] = "fast"
    (tmp_path / ANALYZE_JSON).write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ValueError) as err:
        load_analysis(tmp_path)
    assert str(tmp_path / ANALYZE_JSON) in str(err.value)
    assert "points.1.metrics.ott" in str(err.value)
    with pytest.raises(ValueError, match="not found"):
        load_analysis(tmp_path / "nowhere")


def load_analysis_file(name: str) -> SweepAnalysis:
    return SweepAnalysis.model_validate_json((DATA / name).read_text(encoding="utf-8"))


def test_findings_say_knee_slo_cost_and_failures_once() -> None:
    """The console and the HTML report both print these lines; they come from one place."""
    from llmbench.runner.sweep.analysis import findings

    costed = load_analysis_file("slo_cost.json")
    lines = findings(costed)
    assert lines[0] == ("info", costed.knee_message)
    assert costed.slo is not None
    assert [text for _, text in lines[1 : 1 + len(costed.slo.messages)]] == costed.slo.messages
    assert any(s == "info" and t.startswith("cost at max load under SLO: ") for s, t in lines)
    broken = costed.model_copy(update={"failed_points": ["p1"], "interrupted": True})
    assert ("error", "failed points: p1") in findings(broken)
    assert any(s == "warn" and "interrupted" in t for s, t in findings(broken))
