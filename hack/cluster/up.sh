#!/usr/bin/env bash
# Start the llmbench test cluster: hack/cluster/up.sh [--dir DIR] [--port N]
# (default dir: ${LLMBENCH_CLUSTER_DIR:-/tmp/llmbench-cluster}). Builds the binaries first if
# they are not cached. Prints warm start time, total RSS and the KUBECONFIG to export.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
py="${PYTHON:-$root/.venv/bin/python}"; [[ -x "$py" ]] || py=python3
bash "$root/hack/cluster/build.sh"
cd "$root" && exec "$py" -m tests.cluster up "$@"
