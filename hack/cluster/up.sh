#!/usr/bin/env bash
# Start the llmbench test cluster: hack/cluster/up.sh [--dir DIR] [--port N]
# (default dir: ${LLMBENCH_CLUSTER_DIR:-/tmp/llmbench-cluster}). Builds the binaries first if
# they are not cached. Prints warm start time, total RSS and the KUBECONFIG to export.
set -euo pipefail
source "$(dirname "$0")/_py.sh"
bash "$root/hack/cluster/build.sh"
cluster_cli up "$@"
