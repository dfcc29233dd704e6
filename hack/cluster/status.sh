#!/usr/bin/env bash
# Show what runs of the cluster started by up.sh, and its RSS: hack/cluster/status.sh [--dir DIR]
set -euo pipefail
source "$(dirname "$0")/_py.sh"
cluster_cli status "$@"
