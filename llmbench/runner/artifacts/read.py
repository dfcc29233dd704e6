"""Reading a saved profile back: its result and its per-request records."""

from __future__ import annotations

import json
from pathlib import Path

from llmbench.api.results import PointResult, read_result
from llmbench.runner.artifacts.layout import GENAI_PERF_JSON, PROFILE_EXPORT, REQUESTS_JSONL
from llmbench.runner.client.records import RequestRecord

__all__ = ["load_records", "load_summary"]


def _find(directory: Path, name: str, pattern: str) -> Path:
    """``directory/name``, else the one file matching ``pattern`` (a custom export stem) in
    ``directory`` or, given the ``--artifact-dir`` of one profile, in its one point folder."""
    path = directory / name
    if path.is_file():
        return path
    for glob in (pattern, f"*/{pattern}"):
        found = sorted(directory.glob(glob))
        if len(found) == 1:
            return found[0]
    return path


def load_records(directory: Path) -> list[RequestRecord]:
    """Our per-request records of a saved profile (also from a folder written before they
    moved out of ``profile_export.json``)."""
    path = _find(directory, REQUESTS_JSONL, "*_llmbench_requests.jsonl")
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines()
        return [RequestRecord.from_json(json.loads(line)) for line in lines if line.strip()]
    data = json.loads((directory / PROFILE_EXPORT).read_text(encoding="utf-8"))
    if "experiments" in data:
        raise ValueError(f"{path}: not found (the per-request records of {directory})")
    return [RequestRecord.from_json(d) for d in data["requests"]]


def load_summary(directory: Path) -> PointResult:
    """The result of a saved profile; :class:`~llmbench.api.results.ResultFileError` (a
    ValueError) naming the file and the field when it is missing or malformed."""
    return read_result(PointResult, _find(directory, GENAI_PERF_JSON, "*_genai_perf.json"))
