#!/usr/bin/env bash
# The project's test command (README: Development): lint, types, then the whole pytest
# suite, e2e included. Run from the repository root after `pip install -e '.[test]'`.
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONSAFEPATH=1  # the repo's operator/ must not shadow Python's `operator` module
PY=${PY:-.venv/bin/python}
echo "== ruff"
"$PY" -m ruff check .
echo "== mypy"
"$PY" -m mypy runner operator llmbench
echo "== pytest"
"$PY" -m pytest -q "$@"
