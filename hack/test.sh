#!/usr/bin/env bash
# The project's test command (README: Development): lint, types, then the whole pytest
# suite, e2e included. Run from the repository root after `pip install -e '.[test]'`.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
echo "== ruff"
"$PY" -m ruff check .
echo "== import contracts"
"$(dirname "$PY")/lint-imports" --no-cache
echo "== mypy"
"$PY" -m mypy llmbench
echo "== pytest"
"$PY" -m pytest -q "$@"
