"""``llmbench results`` on a two-axis sweep: each row names its workload, so points at one
load value of different workloads read apart."""

from __future__ import annotations

import io

from rich.console import Console

from llmbench.api.status import PointStatus
from llmbench.cli.results import _print_run, _Run


def test_rows_and_warnings_name_the_workload() -> None:
    points = [
        PointStatus(name=f"m-concurrency4-{w}", value=4, state="Succeeded", workload=w,
                    ott=ott, warnings=["stale GPU samples"] if w == "isl16-osl6" else [])
        for w, ott in (("isl16-osl24", 150.0), ("isl16-osl6", 130.0))
    ]
    run = _Run(number=1, phase="Succeeded", progress="2/2", points=points, knee=None,
               best=None, summary_csv=None, source="status", raw={})
    out = io.StringIO()
    _print_run(Console(file=out, width=200), "ns", "b", run)
    text = out.getvalue()
    assert "4 isl16-osl24" in text and "4 isl16-osl6" in text
    assert "point 4 isl16-osl6: stale GPU samples" in text
