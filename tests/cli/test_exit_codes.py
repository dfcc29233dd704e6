"""The command line's exit codes and help: ``-o`` and the exit codes under ``--help``, ``job``
hidden, and a plain ``pip install llmbench`` (no ``[operator]`` extra) ending ``results`` and
``operator`` with one line naming the extra. The missing extra is real: a subprocess whose
import system cannot find ``kubernetes`` or ``kopf`` (a meta-path finder that refuses them, as
an environment without them would), not a mock."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from llmbench.cli import SUBCOMMANDS, main
from llmbench.cli.output import EXIT_CODES_HELP, NO_CLUSTER

#: Runs llmbench's main with kubernetes and kopf not importable; argv from the command line.
WITHOUT_EXTRA = textwrap.dedent("""
    import sys

    class NotInstalled:
        def find_spec(self, name, path=None, target=None):
            if name.split(".")[0] in ("kubernetes", "kopf"):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NotInstalled())
    from llmbench.cli import main
    sys.exit(main(sys.argv[1:]))
""")


def _without_extra(*words: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", WITHOUT_EXTRA, *words], capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("words", [
    ["results", "nightly", "-n", "team-a"],
    ["results", "nightly", "-o", "yaml", "--history"],
])
def test_without_the_operator_extra_results_says_so_in_one_line(words: list[str]) -> None:
    r = _without_extra(*words)
    assert r.returncode == NO_CLUSTER, r.stderr
    assert r.stdout == ""
    assert "Traceback" not in r.stderr
    (line,) = r.stderr.splitlines()
    assert line == ("llmbench results: needs kubernetes, which is not installed: "
                    "pip install 'llmbench[operator]'")


def test_without_the_extra_the_rest_of_the_command_line_works() -> None:
    r = _without_extra("--version")
    assert r.returncode == 0 and r.stdout.startswith("llmbench "), r.stderr
    r = _without_extra("results", "--help")  # the flags need no client
    assert r.returncode == 0 and "-o FORMAT, --output FORMAT" in r.stdout, r.stderr
    r = _without_extra("crd")
    assert r.returncode == 0 and "CustomResourceDefinition" in r.stdout, r.stderr


def test_the_import_hook_really_hides_the_client() -> None:
    """The hook is what makes the tests above meaningful: with it, the import fails."""
    code = WITHOUT_EXTRA.replace("from llmbench.cli import main\nsys.exit(main(sys.argv[1:]))",
                                 "import kubernetes")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and "ModuleNotFoundError: No module named 'kubernetes'" in r.stderr


def test_job_is_hidden_from_help_but_runs(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    commands = out.split("positional arguments:")[1].split("options:")[0]
    listed = {line.split()[0] for line in commands.splitlines() if line.startswith("    ")}
    assert listed == set(SUBCOMMANDS) - {"job"}
    assert EXIT_CODES_HELP in out
    with pytest.raises(SystemExit) as exc:
        main(["job", "--help"])
    assert exc.value.code == 0
    assert "--configmap" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["results", "compare"])
def test_help_names_the_output_formats_and_the_exit_codes(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    out = capsys.readouterr().out
    flat = " ".join(out.split())  # argparse wraps the help text to the terminal
    assert "-o FORMAT, --output FORMAT" in out and "(table, json, yaml or csv;" in flat
    assert EXIT_CODES_HELP in out
    for old in ("--json", "--csv", "--format"):  # deprecated aliases: accepted, not advertised
        assert old not in out
    for code in range(5):
        assert f"\n  {code}  " in out


def test_a_bad_output_format_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["results", "x", "-o", "xml"])
    assert exc.value.code == 2
    assert "argument -o/--output: invalid choice: 'xml'" in capsys.readouterr().err
