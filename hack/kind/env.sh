# Sourced by hack/kind/{build,up,down}.sh: the versions, the cache layout and the private
# Docker daemon that the kind cluster lives in. Not a command.
#
# Why a private dockerd: kind needs Docker; Debian's docker.io is installed here, but the
# machine is shared (another container runtime and CNI bridges may run on it). So this one
# has its own socket, data root and exec root, creates no default bridge, and is started with
# --iptables=false --ip-forward=false --ip-masq=false: it never touches the host's iptables
# (a dockerd with --iptables sets the FORWARD policy to DROP, which breaks other bridges'
# traffic) nor ip_forward. kind's node containers talk over kind's own bridge network and the
# API server is published on 127.0.0.1 by docker-proxy, so nothing needs host NAT. Its
# default runtime is hack/kind/runc-caps (runc that grants only the capabilities this machine
# has; see that file).

KIND_HACK="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
K8S_VERSION="${LLMBENCH_K8S_VERSION:-v1.35.4}"
KIND_VERSION="${LLMBENCH_KIND_VERSION:-v0.33.0}"
CACHE="${LLMBENCH_CACHE:-$HOME/.cache/llmbench}"
KCACHE="$CACHE/kind"
KIND_BIN="$KCACHE/kind-$KIND_VERSION/bin/kind"
KIND_CLUSTER="${LLMBENCH_KIND_CLUSTER:-llmbench}"
KIND_KUBECONFIG="${LLMBENCH_KIND_KUBECONFIG:-$KCACHE/$KIND_CLUSTER.kubeconfig}"
# The node image that hack/kind/build.sh writes and hack/kind/up.sh uses.
NODE_IMAGE_FILE="$KCACHE/node-image"
DOCKER_ROOT="${LLMBENCH_KIND_DOCKER_ROOT:-$KCACHE/docker}"
DOCKER_RUN="${LLMBENCH_KIND_DOCKER_RUN:-/run/llmbench-kind}"
export DOCKER_HOST="unix://$DOCKER_RUN/docker.sock"
# kind calls `docker`; this machine also has a newer docker CLI in /usr/local/bin. Use the
# client of the daemon we start (Debian's), so client and daemon versions match.
DOCKER_CLI_DIR="$KCACHE/docker-cli"

die() { echo "hack/kind/$(basename "$0"): $*" >&2; exit 1; }
say() { echo "hack/kind/$(basename "$0"): $*"; }

# ensure_docker: start the private dockerd unless it already answers on $DOCKER_HOST.
ensure_docker() {
  command -v dockerd >/dev/null 2>&1 \
    || die "step docker: no dockerd — apt-get install docker.io (or run hack/kind/build.sh, which installs it)"
  mkdir -p "$DOCKER_CLI_DIR" "$DOCKER_RUN"
  ln -sf /usr/bin/docker "$DOCKER_CLI_DIR/docker"
  export PATH="$DOCKER_CLI_DIR:$PATH"
  if docker info >/dev/null 2>&1; then return 0; fi
  mkdir -p "$DOCKER_ROOT"
  say "starting dockerd (socket $DOCKER_HOST, data root $DOCKER_ROOT, log $DOCKER_RUN/dockerd.log)"
  # setsid: the daemon outlives this script (hack/kind/down.sh stops it by its pid file);
  # 9>&-: it must not inherit build.sh's lock.
  setsid dockerd --host "$DOCKER_HOST" --data-root "$DOCKER_ROOT" --exec-root "$DOCKER_RUN/exec" \
    --pidfile "$DOCKER_RUN/dockerd.pid" --iptables=false --ip-forward=false --ip-masq=false \
    --bridge=none --add-runtime "llmbench-runc=$KIND_HACK/runc-caps" --default-runtime llmbench-runc \
    >"$DOCKER_RUN/dockerd.log" 2>&1 </dev/null 9>&- &
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  die "step docker: dockerd did not answer on $DOCKER_HOST within 30 s (see $DOCKER_RUN/dockerd.log: $(tail -1 "$DOCKER_RUN/dockerd.log" 2>/dev/null))"
}

# stop_docker: stop the private dockerd if this project started it (pid file), wait for it.
stop_docker() {
  local pid
  pid="$(cat "$DOCKER_RUN/dockerd.pid" 2>/dev/null || true)"
  [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill "$pid"
  for _ in $(seq 1 60); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.5; done
  die "step docker: dockerd (pid $pid) did not stop within 30 s"
}
