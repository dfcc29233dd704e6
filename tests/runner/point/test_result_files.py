"""``profile_export_genai_perf.json`` through its model: saved files read back and written
unchanged, files of the earlier flat layout still read, and a malformed file named with the
field at fault (where the file keeps it).

``data/*.json`` are in GenAI-Perf's layout (GenAI-Perf's keys, ours under ``llmbench``);
``data/legacy/`` holds the same three points as the untyped writer wrote them, before the
layout changed: ``data/*.json`` are those, read through the model and written again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llmbench.api.results import GENAI_PERF_METRICS, OURS, PointResult, ResultFileError
from llmbench.runner.artifacts.genai_perf_csv import genai_perf_csv
from llmbench.runner.artifacts.layout import GENAI_PERF_JSON
from llmbench.runner.artifacts.read import load_summary

DATA = Path(__file__).parent / "data"
FILES = sorted(p.name for p in DATA.glob("*.json"))


@pytest.mark.parametrize("name", FILES)
def test_saved_point_results_round_trip_byte_identical(name: str, tmp_path: Path) -> None:
    shutil.copy(DATA / name, tmp_path / GENAI_PERF_JSON)
    result = load_summary(tmp_path)
    assert result.to_json(indent=2) == (DATA / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("name", FILES)
def test_legacy_flat_files_read_into_the_same_result(name: str) -> None:
    legacy = PointResult.model_validate_json((DATA / "legacy" / name).read_text())
    assert legacy == load_summary_file(name)


@pytest.mark.parametrize("name", FILES)
def test_top_level_is_genai_perf_keys_then_ours(name: str) -> None:
    """A loop over the metric dicts meets only ``{unit, avg, …}`` dicts: no ``null``, none of
    our keys; ``telemetry_stats`` and ``input_config`` are GenAI-Perf's, ``llmbench`` ours."""
    doc = json.loads((DATA / name).read_text())
    keys = list(doc)
    assert keys[-1] == OURS
    metrics = [k for k in keys if k not in ("telemetry_stats", "input_config", OURS)]
    assert metrics == [k for k in GENAI_PERF_METRICS if k in metrics]
    for key in metrics:
        assert isinstance(doc[key], dict) and {"unit", "avg"} <= set(doc[key]), key
    assert "errors" in doc[OURS] and "window" in doc[OURS] and "token_counts" in doc[OURS]


def test_optional_keys_stay_absent_or_null_as_written() -> None:
    streamed = load_summary_file("telemetry_goodput.json")
    assert streamed.goodput is not None and streamed.telemetry is not None
    assert streamed.goodput.slo and streamed.goodput.good_requests == 0
    assert streamed.telemetry.efficiency is not None
    assert streamed.telemetry.gpu_rows()[0]["GPU"] == "gpu0"
    doc = streamed.to_dict()
    assert doc["request_goodput"] == {"unit": "requests/sec", "avg": streamed.goodput.avg}
    assert "goodput" not in doc and set(doc[OURS]["goodput"]) == {"slo", "good_requests"}
    assert set(doc["telemetry_stats"]) == {
        "gpu_power_usage", "gpu_power_limit", "energy_consumption", "total_gpu_memory",
        "gpu_memory_used", "gpu_utilization",
    }
    rate = load_summary_file("request_rate.json")
    assert rate.dispatch is not None and rate.telemetry is None
    assert "telemetry_stats" not in rate.to_dict()
    plain = load_summary_file("no_streaming.json")
    assert plain.time_to_first_token is None and "time_to_first_token" not in plain.to_dict()
    assert plain.inter_chunk_gap is None and "inter_chunk_gap" not in plain.to_dict()[OURS]
    assert "request_goodput" not in plain.to_dict()


def test_csv_is_built_from_the_model() -> None:
    text = genai_perf_csv(load_summary_file("telemetry_goodput.json"))
    assert text.splitlines()[1].startswith("Time To First Token (ms),")
    assert "\r\nRequest Goodput (per sec),0.00\r\nRequest Count (count),40.00\r\n" in text
    assert "\r\nMetric,GPU,avg,min,max,p99," in text
    assert "\r\nMetric,GPU,Value\r\nGPU Power Limit (W),gpu0,700.00\r\n" in text
    assert text.endswith("\r\n") and "\r\nllmbench Metric,Value\r\n" in text


def test_malformed_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    doc = json.loads((DATA / "request_rate.json").read_text(encoding="utf-8"))
    doc[OURS]["window"]["completed_requests"] = "all of them"
    del doc[OURS]["errors"]
    doc[OURS]["surprise"] = 1
    doc["request_count"]["avg"] = "many"
    doc["stray"] = 2
    (tmp_path / GENAI_PERF_JSON).write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ResultFileError) as err:
        load_summary(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / GENAI_PERF_JSON}: not a PointResult")
    assert "llmbench.window.completed_requests" in message
    assert "llmbench.errors: Field required" in message
    assert "llmbench.surprise: Extra inputs are not permitted" in message
    assert "request_count.avg" in message
    assert "stray: Extra inputs are not permitted" in message
    assert "llmbench.stray" not in message
    (tmp_path / GENAI_PERF_JSON).write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_summary(tmp_path)


def load_summary_file(name: str) -> PointResult:
    return PointResult.model_validate_json((DATA / name).read_text(encoding="utf-8"))
