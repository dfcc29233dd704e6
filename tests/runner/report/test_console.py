"""The console's validity lines: what profile prints after its table and analyze after each
point."""

from __future__ import annotations

from pathlib import Path

from llmbench.api.results import PointResult, ValiditySignal, read_result
from llmbench.runner.report.console import notes, validity_lines

DATA = Path(__file__).resolve().parents[1] / "point" / "data" / "telemetry_goodput.json"


def test_validity_signals_are_printed_by_severity_in_profile_and_analyze() -> None:
    summary = read_result(PointResult, DATA)
    assert summary.telemetry is not None
    summary.telemetry.validity = [
        ValiditySignal(signal="foreign_traffic", severity="error",
                       message="the server completed 140 requests, the client 100",
                       numbers={}),
        ValiditySignal(signal="server_queueing", severity="warning",
                       message="requests waited in the server's queue", numbers={}),
    ]
    lines = validity_lines(summary)
    assert lines == [
        "[red]validity: the server completed 140 requests, the client 100[/red]",
        "[yellow]validity: requests waited in the server's queue[/yellow]",
    ]
    assert all(line in notes(summary) for line in lines)
    summary.telemetry.validity = []
    assert validity_lines(summary) == []
