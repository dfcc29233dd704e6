#!/usr/bin/env bash
# Delete the llmbench kind cluster and stop the private dockerd of hack/kind/env.sh (unless
# --keep-docker) with kind's docker network. The images and the build cache stay, so the next
# hack/kind/up.sh is warm.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
keep=0
[[ "${1:-}" == --keep-docker ]] && keep=1
if docker info >/dev/null 2>&1 && [[ -x "$KIND_BIN" ]]; then
  export PATH="$DOCKER_CLI_DIR:$PATH"
  if "$KIND_BIN" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
    "$KIND_BIN" delete cluster --name "$KIND_CLUSTER" --kubeconfig "$KIND_KUBECONFIG"
  fi
fi
if (( ! keep )); then
  # kind's docker network is a bridge device that outlives dockerd; remove it with the daemon.
  docker network rm kind >/dev/null 2>&1 || true
  stop_docker
fi
say "cluster $KIND_CLUSTER deleted$( (( keep )) || echo ", dockerd stopped")"
