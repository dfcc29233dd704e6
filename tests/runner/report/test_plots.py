"""Plots and the HTML report from a real (small) sweep against the simulator."""

from __future__ import annotations

import base64
import re
import struct
from pathlib import Path

import pytest

from llmbench.cli import main
from llmbench.runner.report.html import PLOTS_DIR, REPORT_HTML
from llmbench.sim import spawn_sim

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
EXPECTED = ("ott_vs_ttft_p99", "ott_vs_itl_p99", "ttft_vs_isl", "itl_by_position",
            "latency_distributions")


def assert_png(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC
    width, height = struct.unpack(">II", data[16:24])
    assert width > 300 and height > 200 and len(data) > 5000
    return width, height


@pytest.fixture(scope="module")
def sweep_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    url, proc = spawn_sim(["--ttft-ms", "10", "--itl-ms", "1", "--max-num-seqs", "2",
                           "--prefill-ms-per-token", "0.05"])
    out = tmp_path_factory.mktemp("plots") / "run"
    try:
        rc = main(["analyze", "-u", url, "--sweep-list", "1,2,4", "--request-count", "12",
                   "--synthetic-input-tokens-mean", "64", "--synthetic-input-tokens-stddev", "16",
                   "--output-tokens-mean", "12", "--extra-inputs", "ignore_eos:true",
                   "--slo", "ttft_p99:40", "--artifact-dir", str(out)])
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
    assert rc == 0
    return out


def test_analyze_writes_valid_pngs_and_report(sweep_dir: Path) -> None:
    for name in EXPECTED:
        assert_png((sweep_dir / PLOTS_DIR / f"{name}.png").read_bytes())
    html = (sweep_dir / REPORT_HTML).read_text()
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', html)
    # plus the profile's telemetry.png per point (the sim's own /metrics is scraped by default)
    # and its timeseries.png, one per point
    telemetry = list(sweep_dir.glob("*/telemetry.png"))
    series = list(sweep_dir.glob("*/timeseries.png"))
    assert len(series) == 3
    assert len(images) == len(EXPECTED) + len(telemetry) + len(series)
    for b64 in images:
        assert_png(base64.b64decode(b64))
    assert "analyze_export_genai_perf.csv" in html and "max OTT under SLO" in html
    assert "<table>" in html and "llmbench-sim-openai-chat-concurrency4" in html
    # no GPUs here: no GPU table, and its header is not taken for a row of the summary
    assert "GPU telemetry" not in html and "GPU Power Usage" not in html


def test_report_rebuilds_from_saved_artefacts(sweep_dir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    for png in (sweep_dir / PLOTS_DIR).glob("*.png"):
        png.unlink()
    out = tmp_path / "r.html"
    assert main(["report", str(sweep_dir), "--output-file", str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    telemetry = list(sweep_dir.glob("*/telemetry.png"))
    series = list(sweep_dir.glob("*/timeseries.png"))
    assert len(re.findall(r"data:image/png;base64,", out.read_text())) == len(EXPECTED) + len(
        telemetry
    ) + len(series)
    assert len(list((sweep_dir / PLOTS_DIR).glob("*.png"))) == len(EXPECTED)


def test_report_renders_and_never_rewrites_the_exports(sweep_dir: Path, tmp_path: Path) -> None:
    """`llmbench report DIR` reads the saved documents; the exports stay the run's own."""
    exports = [sweep_dir / "analyze_export_genai_perf.csv",
               sweep_dir / "analyze_export_genai_perf.json", sweep_dir / "checkpoint.json",
               *sweep_dir.glob("*/profile_export_genai_perf.*")]
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in exports}
    assert main(["report", str(sweep_dir), "--output-file", str(tmp_path / "again.html")]) == 0
    assert {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in exports} == before
    # the page shows the saved summary CSV's rows, the same text the run wrote
    page = (tmp_path / "again.html").read_text()
    rows = (sweep_dir / "analyze_export_genai_perf.csv").read_text().splitlines()
    for name in [r.split(",")[0] for r in rows[1:4]]:
        assert f"<td>{name}</td>" in page


def test_report_of_one_profile_folder(sweep_dir: Path) -> None:
    point = sweep_dir / "llmbench-sim-openai-chat-concurrency2"
    assert main(["report", str(point)]) == 0
    html = (point / REPORT_HTML).read_text()
    assert "Time To First Token (ms)" in html
    extra = 1 if (point / "telemetry.png").exists() else 0
    assert (point / "timeseries.png").exists()  # the point's time series, one more image
    assert len(re.findall(r"data:image/png;base64,", html)) == 3 + extra + 1


def test_report_of_a_non_result_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path)]) == 2
    assert "neither an analyze folder" in capsys.readouterr().err
