"""``spec.sweep.workloads``: the second sweep axis, its rules, the stored-points cap and the
command line that maps to it."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from llmbench.api import Spec, SpecError
from llmbench.api.spec import MAX_STORED_POINTS, stored_points
from llmbench.api.sweep_values import parse_workloads
from llmbench.cli.analyze import add_arguments, spec_from_args

URL = {"url": "http://127.0.0.1:8000"}
TWO = [{"inputTokens": 128, "outputTokens": 512}, {"inputTokens": 1024, "outputTokens": 128}]


def spec(**sweep: Any) -> Spec:
    return Spec.from_manifest({"target": URL, "sweep": sweep})


def test_workloads_parse_with_labels_and_order() -> None:
    s = spec(values=[1, 4, 8], workloads=TWO)
    assert s.sweep is not None and s.sweep.workloads is not None
    assert [w.label for w in s.sweep.workloads] == ["isl128-osl512", "isl1024-osl128"]
    assert s.to_dict()["sweep"]["workloads"] == TWO


def test_stored_points_multiply_values_workloads_and_repetitions() -> None:
    assert stored_points(spec(values=[1, 4, 8], workloads=TWO)) == 6
    assert stored_points(spec(range="1:8", workloads=TWO)) == 8  # 1, 2, 4, 8 x 2
    s = Spec.from_manifest({"target": URL, "repetitions": 3,
                            "sweep": {"values": [1, 4, 8], "workloads": TWO}})
    assert stored_points(s) == 18


def test_a_grid_over_the_cap_names_the_fields_and_the_fix() -> None:
    # 7 values x 2 workloads x 3 repetitions = 42 > 40; each axis alone fits
    with pytest.raises(SpecError) as err:
        Spec.from_manifest({"target": URL, "repetitions": 3,
                            "sweep": {"values": [1, 2, 3, 4, 5, 6, 7], "workloads": TWO}})
    (issue,) = err.value.issues
    text = str(issue)
    assert 42 > MAX_STORED_POINTS
    assert text.startswith("spec.repetitions: sweep points x sweep.workloads x repetitions "
                           f"must be at most {MAX_STORED_POINTS}")
    assert "sweep.workloads a part each" in text


@pytest.mark.parametrize(("workload", "issue"), [
    ({"inputTokens": 0, "outputTokens": 8}, "spec.sweep.workloads[0].inputTokens: 0: must be "
                                            "at least 1"),
    ({"inputTokens": 8}, "spec.sweep.workloads[0].outputTokens: required"),
    ({"inputTokens": 8, "outputTokens": 8, "stddev": 1},
     "spec.sweep.workloads[0].stddev: unknown field"),
])
def test_bad_workloads_are_refused_at_their_path(workload: dict[str, Any], issue: str) -> None:
    with pytest.raises(SpecError) as err:
        spec(values=[1], workloads=[workload])
    assert [str(i) for i in err.value.issues] == [issue]


def test_embeddings_cannot_take_workloads() -> None:
    with pytest.raises(SpecError, match="sweep.workloads sets synthetic input and output"):
        Spec.from_manifest({"target": {**URL, "endpointType": "embeddings"},
                            "sweep": {"values": [1], "workloads": TWO}})


def test_parse_workloads() -> None:
    assert parse_workloads("128:512, 1024:128") == TWO
    for bad in ("128", "128:0", "a:b", "128:512,", "1.5:2"):
        with pytest.raises(ValueError, match=r"--sweep-workloads .*is not ISL:OSL; give whole "):
            parse_workloads(bad)


def analyze_args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(["-u", "http://127.0.0.1:8000", *argv])


def test_cli_flag_maps_to_the_same_spec() -> None:
    s = spec_from_args(analyze_args("--sweep-list", "1,4,8", "--sweep-workloads",
                                    "128:512,1024:128"))
    assert s.sweep is not None
    assert s.to_dict()["sweep"]["workloads"] == TWO
    assert stored_points(s) == 6


def test_cli_errors_name_the_flag() -> None:
    with pytest.raises(ValueError, match="--sweep-workloads"):
        spec_from_args(analyze_args("--sweep-list", "1,4", "--sweep-workloads", "8:8,8:8"))
    with pytest.raises(ValueError, match="--sweep-workloads '12x': '12x' is not ISL:OSL"):
        spec_from_args(analyze_args("--sweep-list", "1,4", "--sweep-workloads", "12x"))
