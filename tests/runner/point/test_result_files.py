"""``profile_export_genai_perf.json`` through its model: saved files read back and written
unchanged, and a malformed file named with the field at fault.

The fixtures in ``data/`` were written by the untyped writer, so a byte-identical dump proves
the model kept GenAI-Perf's keys, their order, the ``null``-versus-absent keys and the number
types.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from llmbench.api.results import PointResult, ResultFileError
from llmbench.runner.point.artifacts import GENAI_PERF_JSON, genai_perf_csv, load_summary

DATA = Path(__file__).parent / "data"
FILES = sorted(p.name for p in DATA.glob("*.json"))


@pytest.mark.parametrize("name", FILES)
def test_saved_point_results_round_trip_byte_identical(name: str, tmp_path: Path) -> None:
    shutil.copy(DATA / name, tmp_path / GENAI_PERF_JSON)
    result = load_summary(tmp_path)
    assert result.to_json(indent=2) == (DATA / name).read_text(encoding="utf-8")


def test_optional_keys_stay_absent_or_null_as_written() -> None:
    streamed = load_summary_file("telemetry_goodput.json")
    assert streamed.goodput is not None and streamed.telemetry is not None
    assert streamed.telemetry.efficiency is not None
    assert streamed.telemetry.gpu_rows()[0]["GPU"] == "llmbench-sim:gpu0"
    rate = load_summary_file("request_rate.json")
    assert rate.dispatch is not None and rate.telemetry is None
    plain = load_summary_file("no_streaming.json")
    assert plain.time_to_first_token is None and "time_to_first_token" in plain.to_dict()
    assert plain.inter_chunk_gap is None and "inter_chunk_gap" not in plain.to_dict()
    assert "goodput" not in plain.to_dict()


def test_csv_is_built_from_the_model() -> None:
    text = genai_perf_csv(load_summary_file("telemetry_goodput.json"))
    assert text.splitlines()[1].startswith("Time To First Token (ms),")
    assert "Request Goodput (per sec)," in text
    assert "\nGPU,UUID,p99 GPU Power Usage (W)," in text


def test_malformed_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    doc = json.loads((DATA / "request_rate.json").read_text(encoding="utf-8"))
    doc["window"]["completed_requests"] = "all of them"
    del doc["errors"]
    doc["surprise"] = 1
    (tmp_path / GENAI_PERF_JSON).write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(ResultFileError) as err:
        load_summary(tmp_path)
    message = str(err.value)
    assert message.startswith(f"{tmp_path / GENAI_PERF_JSON}: not a PointResult")
    assert "window.completed_requests" in message
    assert "errors: Field required" in message
    assert "surprise: Extra inputs are not permitted" in message
    (tmp_path / GENAI_PERF_JSON).write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_summary(tmp_path)


def load_summary_file(name: str) -> PointResult:
    return PointResult.model_validate_json((DATA / name).read_text(encoding="utf-8"))
