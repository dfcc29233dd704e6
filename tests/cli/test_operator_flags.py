"""``llmbench operator``'s runner pod defaults: refused before anything starts, naming the flag."""

from __future__ import annotations

import pytest

from llmbench.cli import main


def test_runner_pod_defaults_that_break_the_specs_rules_stop_the_operator(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["operator", "-A", "--runner-pod-defaults",
                 '{"podLabels": {"llmbench.io/run": "1"}}']) == 2
    err = capsys.readouterr().err
    assert "--runner-pod-defaults: runner.podLabels: " in err and "llmbench.io/" in err
    assert main(["operator", "-A", "--runner-pod-defaults", "{oops"]) == 2
    assert "--runner-pod-defaults: not a JSON object" in capsys.readouterr().err
