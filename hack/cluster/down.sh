#!/usr/bin/env bash
# Stop the llmbench test cluster started by up.sh: hack/cluster/down.sh [--dir DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="${PYTHON:-$root/.venv/bin/python}"; [[ -x "$py" ]] || py=python3
cd "$root" && exec "$py" -m tests.cluster down "$@"
