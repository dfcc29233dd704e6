#!/usr/bin/env bash
# Start the llmbench test cluster: hack/cluster/up.sh [--dir DIR] [--port N]
# (default dir: ${LLMBENCH_CLUSTER_DIR:-/tmp/llmbench-cluster}). Installs the nodes' packages
# and builds the binaries first if they are missing (hack/cluster/build.sh), and the images if
# the tree changed (hack/image/build.sh, from the launcher). Needs root. Prints the start time,
# total RSS and the KUBECONFIG to export.
set -euo pipefail
source "$(dirname "$0")/_py.sh"
bash "$root/hack/cluster/build.sh"
cluster_cli up "$@"
