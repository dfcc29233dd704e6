"""``llmbench compare``: verdicts against tolerances, exit codes and output formats."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml
from results_factory import flat, point_result, sweep_analysis

from llmbench.api.results import Errors
from llmbench.cli import main
from llmbench.runner.artifacts.layout import GENAI_PERF_JSON
from llmbench.runner.sweep.analysis import ANALYZE_JSON
from llmbench.runner.sweep.compare import compare, parse_tolerances


def profile(d: Path, ott: float, ttft_p99: float, itl_p99: float = 5.0, errors: int = 0) -> Path:
    d.mkdir(parents=True)
    result = point_result(
        ott=ott,
        rps=ott / 100,
        ttft=flat("ms", ttft_p99 / 2, p99=ttft_p99),
        itl=flat("ms", itl_p99),
        e2e=flat("ms", 500.0, p99=900.0),
        completed=100 - errors,
        measured=100,
        errors=Errors(total=errors, by_type={}),
    )
    (d / GENAI_PERF_JSON).write_text(result.to_json())
    return d


def sweep(d: Path, points: list[tuple[float, float, float]], max_ott: float | None) -> Path:
    d.mkdir(parents=True)
    (d / ANALYZE_JSON).write_text(sweep_analysis(points, max_ott).to_json())
    return d


def test_malformed_export_names_the_file_and_the_field(tmp_path: Path) -> None:
    a = profile(tmp_path / "a", ott=1000, ttft_p99=100)
    bad = tmp_path / "bad"
    bad.mkdir()
    doc = json.loads((a / GENAI_PERF_JSON).read_text())
    doc["llmbench"]["window"]["completed_requests"] = "many"  # ours, under "llmbench"
    (bad / GENAI_PERF_JSON).write_text(json.dumps(doc))
    with pytest.raises(ValueError) as err:
        compare(a, bad, {})
    assert str(bad / GENAI_PERF_JSON) in str(err.value)
    assert "llmbench.window.completed_requests" in str(err.value)


def test_tolerance_parsing() -> None:
    assert parse_tolerances(["ott:-5%", "ttft_p99:+10%", "itl_p99:7"]) == {
        "ott": 5.0, "ttft_p99": 10.0, "itl_p99": 7.0}
    with pytest.raises(ValueError, match="ott regresses when it drops; write ott:-5%"):
        parse_tolerances(["ott:+5%"])
    with pytest.raises(ValueError, match="ttft_p99 regresses when it rises; write ttft_p99:\\+3%"):
        parse_tolerances(["ttft_p99:-3%"])
    with pytest.raises(ValueError, match="--tolerance 'speed:5%': expected METRIC"):
        parse_tolerances(["speed:5%"])
    with pytest.raises(ValueError, match="'x%' is not a percentage"):
        parse_tolerances(["ott:x%"])


def test_profile_verdicts(tmp_path: Path) -> None:
    a = profile(tmp_path / "a", ott=1000, ttft_p99=100)
    b = profile(tmp_path / "b", ott=940, ttft_p99=108)  # OTT -6 %, TTFT +8 %
    rows = {r.metric: r for r in compare(a, b, {"ott": 5, "ttft_p99": 10, "itl_p99": 10})}
    assert rows["ott"].verdict == "regression" and rows["ott"].change_pct == pytest.approx(-6)
    assert rows["ttft_p99"].verdict == "ok"
    assert rows["itl_p99"].verdict == "ok"
    assert rows["rps"].verdict == ""  # no tolerance: information only
    c = profile(tmp_path / "c", ott=1100, ttft_p99=80)
    rows = {r.metric: r for r in compare(a, c, {"ott": 5, "ttft_p99": 10})}
    assert rows["ott"].verdict == "improved" and rows["ttft_p99"].verdict == "improved"


def test_exit_codes_and_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = profile(tmp_path / "a", ott=1000, ttft_p99=100)
    same = profile(tmp_path / "same", ott=990, ttft_p99=101)
    worse = profile(tmp_path / "worse", ott=1000, ttft_p99=130)
    assert main(["compare", str(a), str(same)]) == 0
    capsys.readouterr()
    assert main(["compare", str(a), str(worse), "-o", "json"]) == 1
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    assert data["regression"] is True
    ttft = next(r for r in data["rows"] if r["metric"] == "ttft_p99")
    assert ttft["verdict"] == "regression" and ttft["change_pct"] == pytest.approx(30)
    assert "regression: profile ttft_p99" in captured.err
    # a looser tolerance lets it pass
    assert main(["compare", str(a), str(worse), "--tolerance", "ttft_p99:+50%"]) == 0
    capsys.readouterr()
    assert main(["compare", str(a) + "/" + GENAI_PERF_JSON, str(worse), "-o", "csv"]) == 1
    rows = list(csv.reader(io.StringIO(capsys.readouterr().out)))
    assert rows[0] == ["Scope", "Metric", "A", "B", "Change (%)", "Tolerance (%)", "Verdict"]
    assert ["profile", "ttft_p99", "100.00", "130.00", "30.00", "10", "regression"] in rows
    assert main(["compare", str(a), str(worse), "-o", "yaml"]) == 1
    assert yaml.safe_load(capsys.readouterr().out) == data


def test_the_old_format_flag_still_works_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = profile(tmp_path / "a", ott=1000, ttft_p99=100)
    assert main(["compare", str(a), str(a), "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["regression"] is False
    assert err == "llmbench compare: note: --format json is deprecated; use -o json\n"
    assert main(["compare", str(a), str(a), "--format", "csv", "-o", "json"]) == 2
    assert "ask for two formats" in capsys.readouterr().err


def test_a_missing_input_is_not_found(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = profile(tmp_path / "a", ott=1, ttft_p99=1)
    assert main(["compare", str(a), str(tmp_path / "nowhere")]) == 3
    assert capsys.readouterr().err == (
        f"llmbench compare: {tmp_path / 'nowhere'}: no such file or folder\n")


def test_sweeps_match_points_by_value(tmp_path: Path) -> None:
    a = sweep(tmp_path / "a", [(1, 100, 10), (2, 200, 11), (4, 400, 12)], max_ott=400)
    b = sweep(tmp_path / "b", [(1, 100, 10), (2, 170, 11), (8, 500, 40)], max_ott=170)
    rows = compare(a, b, {"ott": 5, "max_ott_under_slo": 5})
    by = {(r.scope, r.metric): r for r in rows}
    assert by[("sweep", "max_ott_under_slo")].verdict == "regression"
    assert by[("concurrency 2", "ott")].verdict == "regression"
    assert by[("concurrency 1", "ott")].verdict == "ok"
    assert by[("concurrency 4", "point")].verdict == "only in A"
    assert by[("concurrency 8", "point")].verdict == "only in B"


def test_incomparable_inputs_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = profile(tmp_path / "a", ott=1, ttft_p99=1)
    s = sweep(tmp_path / "s", [(1, 1, 1)], None)
    assert main(["compare", str(a), str(s)]) == 2
    assert "compare like with like" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main(["compare", str(a), str(tmp_path / "empty")]) == 2
    assert "is it an llmbench result folder" in capsys.readouterr().err
    assert main(["compare", str(a), str(a), "--tolerance", "ott:+1%"]) == 2




def test_the_specs_tolerances_are_compares_metrics_with_the_same_direction() -> None:
    """``spec.baseline.tolerances`` takes exactly ``--tolerance``'s keys, and its sign rule
    (throughput may drop by -N%, the rest rise by +N%) is compare's notion of better."""
    from llmbench.api.spec import SpecError, Tolerances
    from llmbench.runner.sweep.compare import METRICS

    assert set(Tolerances.model_fields) == set(METRICS)
    for name, info in Tolerances.model_fields.items():
        higher_better = METRICS[name][0]
        good, bad = ("-5%", "+5%") if higher_better else ("+5%", "-5%")
        assert Tolerances.model_validate({info.alias: good}).percentages() == {name: 5.0}
        with pytest.raises((SpecError, ValueError)):
            Tolerances.model_validate({info.alias: bad})
        assert parse_tolerances([f"{name}:{good}"]) == {name: 5.0}


def test_a_grid_keeps_its_workloads_apart() -> None:
    """Two-axis sweeps: points at one load value but of different workloads are compared
    each with its own, and a regression is named with its workload."""
    from llmbench.api.status import PointStatus
    from llmbench.runner.sweep.compare import compare_sweeps, figures_from_points

    def grid(short_ott: float) -> list[PointStatus]:
        return [
            PointStatus(name=f"c{c}-{w}", value=c, state="Succeeded", workload=w,
                        ott=ott, ttft_p99_ms=50.0)
            for w, ott in (("isl128-osl512", 1000.0), ("isl1024-osl128", short_ott))
            for c in (1.0, 4.0)
        ]

    a = figures_from_points(grid(400.0), None, "concurrency")
    b = figures_from_points(grid(300.0), None, "concurrency")  # only the short one dropped
    assert len(a.points) == 4
    rows = compare_sweeps(a, b, {"ott": 5.0})
    bad = sorted({r.scope for r in rows if r.verdict == "regression"})
    assert bad == ["concurrency 1 isl1024-osl128", "concurrency 4 isl1024-osl128"]
    assert not any(r.verdict == "regression" and "isl128-osl512" in r.scope for r in rows)
