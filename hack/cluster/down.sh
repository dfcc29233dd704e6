#!/usr/bin/env bash
# Stop the llmbench test cluster started by up.sh: hack/cluster/down.sh [--dir DIR]
set -euo pipefail
source "$(dirname "$0")/_py.sh"
cluster_cli down "$@"
