"""``llmbench results DIR --timeseries`` on folders that are not what it needs: one line naming
the folder or the file and the field, exit 3 (missing) or 2 (usage), never a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from llmbench.cli import main
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.point.timeseries import build_timeseries


def _saved(folder: Path, name: str = "profile_export_timeseries.jsonl") -> None:
    records = [RequestRecord(index=i, sent_ns=i * 10**8, first_token_ns=i * 10**8 + 10**7,
                             last_token_ns=i * 10**8 + 3 * 10**7,
                             chunk_ns=[i * 10**8 + 10**7, i * 10**8 + 3 * 10**7],
                             output_tokens=2) for i in range(30)]
    series = build_timeseries(records, None, interval_s=1.0)
    assert series is not None
    folder.mkdir(parents=True)
    (folder / name).write_text(series.to_json())


def test_missing_folder_and_folder_without_series(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["results", str(tmp_path / "nope"), "--timeseries"]) == 3
    assert "no such folder" in capsys.readouterr().err
    assert main(["results", str(tmp_path), "--timeseries"]) == 3
    assert "no *_timeseries.jsonl" in capsys.readouterr().err


def test_a_broken_file_names_itself_and_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    point = tmp_path / "p"
    point.mkdir()
    (point / "profile_export_timeseries.jsonl").write_text('{"interval_s": "soon"}')
    assert main(["results", str(point), "--timeseries"]) == 3
    err = capsys.readouterr().err
    assert "profile_export_timeseries.jsonl" in err and "interval_s" in err


def test_an_analyze_folder_prints_every_point_in_value_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for value in (16, 2):
        _saved(tmp_path / f"m-openai-chat-concurrency{value}")
    assert main(["results", str(tmp_path), "--timeseries", "-o", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("Point,Timeslice,Start (s)")
    points = [line.split(",")[0] for line in lines[1:]]
    assert points == ["m-openai-chat-concurrency2"] * 3 + ["m-openai-chat-concurrency16"] * 3
    assert main(["results", str(tmp_path), "--timeseries", "-o", "json"]) == 0
    assert '"m-openai-chat-concurrency16"' in capsys.readouterr().out


def test_timeseries_is_not_a_cluster_view(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["results", "dir", "--timeseries", "--run", "2"]) == 2
    assert "--timeseries reads a saved run's folder" in capsys.readouterr().err
