#!/usr/bin/env bash
# Build (or reuse) the binaries of the llmbench test cluster, and install the Debian packages
# its real nodes need:
#   kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy
#   (k8s.io/kubernetes vX.Y.Z),
#   etcd (go.etcd.io/etcd/server/v3 etcdmain, the version k8s pins),
#   llm-d-inference-sim (the third-party vLLM simulator used as the "GPU inference pod"),
#   helm (helm.sh/helm/v3, for the chart in charts/llmbench-operator and its tests),
#   coredns (github.com/coredns/coredns, the cluster DNS: bind, errors, log, kubernetes).
#
# Usage: hack/cluster/build.sh [k8s-version]      (default v1.35.4)
# Cache: ${LLMBENCH_CACHE:-$HOME/.cache/llmbench}/k8s-<version>/bin/
#        ${LLMBENCH_CACHE:-$HOME/.cache/llmbench}/llm-d-inference-sim-<version>/bin/
#        ${LLMBENCH_CACHE:-$HOME/.cache/llmbench}/helm-<version>/bin/helm
#        ${LLMBENCH_CACHE:-$HOME/.cache/llmbench}/coredns-<version>/bin/coredns
# A warm run (all binaries present) exits in about a second.
#
# Packages (once per machine, before the binaries): containerd, runc, the CNI plugins,
# iptables, conntrack, iproute2 (the nodes' runtime and network), buildah and debootstrap
# (hack/image/build.sh builds the images with them; no container daemon is needed), prometheus
# (the real Prometheus and promtool the alert-rule, ServiceMonitor and dashboard tests start
# themselves; its system service is never started). Missing
# ones are installed with apt-get (root; it waits up to 10 min for another apt run's lock);
# LLMBENCH_NO_APT=1 only checks and names what is missing.
#
# Concurrency: a build holds an flock on $CACHE/.build.lock (a second run says whom it waits
# for, then re-checks and usually finds the binaries built), works in a private
# $CACHE/.tmp-XXXXXX directory and renames each finished bin/ into place, so concurrent runs
# (two CI jobs, a test and a person) never delete each other's sources or see half-written
# binaries. Logs of the last build stay next to bin/ (tidy.log, build.log).
#
# Recipe: `go install k8s.io/kubernetes/...@v` is impossible because k8s' go.mod replaces its
# staging modules with ./staging paths. A throwaway wrapper module requires k8s.io/kubernetes
# vX.Y.Z and replaces every k8s.io/* module that go.mod requires at v0.0.0 with v0.Y.Z.
set -euo pipefail

K8S_VERSION="${1:-${LLMBENCH_K8S_VERSION:-v1.35.4}}"
SIM_VERSION="${LLMBENCH_SIM_VERSION:-v0.10.2}"
CACHE="${LLMBENCH_CACHE:-$HOME/.cache/llmbench}"
K8S_DIR="$CACHE/k8s-$K8S_VERSION"
BIN="$K8S_DIR/bin"
SIM_DIR="$CACHE/llm-d-inference-sim-$SIM_VERSION"
SIM_BIN="$SIM_DIR/bin"
HELM_VERSION="${LLMBENCH_HELM_VERSION:-v3.22.0}"
HELM_DIR="$CACHE/helm-$HELM_VERSION"
HELM_BIN="$HELM_DIR/bin"
COREDNS_VERSION="${LLMBENCH_COREDNS_VERSION:-v1.13.1}"
COREDNS_DIR="$CACHE/coredns-$COREDNS_VERSION"
COREDNS_BIN="$COREDNS_DIR/bin"
LOCK="$CACHE/.build.lock"
JOBS="${LLMBENCH_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

die() { echo "hack/cluster/build.sh: $*" >&2; exit 1; }

[[ "$K8S_VERSION" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] \
  || die "step args: '$K8S_VERSION' is not a Kubernetes release like v1.35.4 — pass one, e.g. hack/cluster/build.sh v1.35.4"
MINOR="${BASH_REMATCH[1]}"
STAGING_VERSION="v0.${MINOR}.${BASH_REMATCH[2]}"

# ---- Debian packages of the real nodes (once per machine) -----------------------------------
# package:command-it-provides (the command proves the package works, not only that dpkg has it)
NODE_PKGS=(containerd:containerd runc:runc containernetworking-plugins:/usr/lib/cni/bridge
  iptables:iptables conntrack:conntrack iproute2:ip buildah:buildah debootstrap:debootstrap
  util-linux:nsenter prometheus:promtool)
missing_pkgs() {
  local entry pkg cmd
  for entry in "${NODE_PKGS[@]}"; do
    pkg="${entry%%:*}" cmd="${entry#*:}"
    if [[ "$cmd" == /* ]]; then [[ -x "$cmd" ]] || echo "$pkg"
    else PATH="$PATH:/usr/sbin:/sbin" command -v "$cmd" >/dev/null 2>&1 || echo "$pkg"
    fi
  done
}
ensure_packages() {
  local missing
  missing="$(missing_pkgs | tr '\n' ' ')"; missing="${missing% }"
  [[ -z "$missing" ]] && return 0
  local fix="apt-get install -y --no-install-recommends $missing"
  [[ "${LLMBENCH_NO_APT:-0}" == 1 ]] \
    && die "step packages: missing Debian package(s): $missing — install them as root: $fix"
  [[ "$(id -u)" == 0 ]] \
    || die "step packages: missing Debian package(s): $missing — run as root: $fix (or sudo)"
  command -v apt-get >/dev/null 2>&1 \
    || die "step packages: missing $missing and no apt-get here — install them with your distribution's package manager"
  mkdir -p "$CACHE"
  local log="$CACHE/apt.log" apt=(apt-get -o DPkg::Lock::Timeout=600 -q)
  echo "step packages: installing $missing (apt-get; log $log)"
  export DEBIAN_FRONTEND=noninteractive
  if ! "${apt[@]}" install -y --no-install-recommends $missing >"$log" 2>&1; then
    echo "step packages: first try failed ($(tail -1 "$log")); apt-get update and retry"
    "${apt[@]}" update >>"$log" 2>&1 || true
    "${apt[@]}" install -y --no-install-recommends $missing >>"$log" 2>&1 || true
  fi
  missing="$(missing_pkgs | tr '\n' ' ')"; missing="${missing% }"
  [[ -z "$missing" ]] \
    || die "step packages: still missing $missing after apt-get ($(grep -E '^E:' "$log" | tail -1 || tail -1 "$log")) — fix apt (sources, network), then: $fix"
  echo "step packages: installed ($(containerd --version | awk '{print $1, $3}'), $(runc --version | head -1))"
}
ensure_packages

K8S_CMDS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy)
check_cached() {
  need_k8s=0
  missing_cmds=()
  for c in "${K8S_CMDS[@]}"; do [[ -x "$BIN/$c" ]] || missing_cmds+=("$c"); done
  if [[ ${#missing_cmds[@]} -gt 0 || ! -x "$BIN/etcd" ]]; then need_k8s=1; fi
  need_sim=0
  [[ -x "$SIM_BIN/llm-d-inference-sim" ]] || need_sim=1
  need_helm=0
  [[ -x "$HELM_BIN/helm" ]] || need_helm=1
  need_dns=0
  [[ -x "$COREDNS_BIN/coredns" ]] || need_dns=1
  if [[ $need_k8s == 0 && $need_sim == 0 && $need_helm == 0 && $need_dns == 0 ]]; then
    echo "cluster binaries: cached in $BIN, $SIM_BIN, $HELM_BIN and $COREDNS_BIN (warm, nothing to build)"
    exit 0
  fi
}
check_cached

# ---- lock: one build per cache at a time ----------------------------------------------------
command -v flock >/dev/null 2>&1 \
  || die "step lock: no 'flock' found — install util-linux (it provides flock)"
{ mkdir -p "$CACHE" && exec 9>>"$LOCK"; } 2>/dev/null \
  || die "step lock: cannot create $LOCK — make $CACHE writable or set LLMBENCH_CACHE to a writable directory"
if ! flock -n 9; then
  holder="$(head -c 32 "$LOCK" 2>/dev/null | tr -dc '0-9' || true)"
  echo "cluster binaries: waiting for another build (pid ${holder:-unknown}) to finish — lock $LOCK"
  flock 9
fi
echo "$$" >"$LOCK"
# Another run may have built everything while we waited.
check_cached

# ---- Go toolchain -------------------------------------------------------------------------
GO="${GO:-}"
if [[ -z "$GO" ]]; then
  if command -v go >/dev/null 2>&1; then GO="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else die "step go-toolchain: no 'go' found — install Go >= 1.25 (e.g. /usr/local/go/bin) or set GO=/path/to/go"
  fi
fi
gov="$("$GO" env GOVERSION 2>/dev/null || true)"
[[ "$gov" =~ ^go1\.([0-9]+) ]] || die "step go-toolchain: '$GO' does not run — install Go >= 1.25 or set GO=/path/to/go"
GO_MINOR="${BASH_REMATCH[1]}"
(( GO_MINOR >= 25 )) || die "step go-toolchain: $gov is too old — Kubernetes $K8S_VERSION needs Go >= 1.25; install a newer Go or set GO="
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"

# ---- private work directory ---------------------------------------------------------------
# We hold the lock, so any other .tmp-* is left over from a killed run: remove it.
rm -rf "$CACHE"/.tmp-*
TMP="$(mktemp -d "$CACHE/.tmp-XXXXXX")" \
  || die "step workdir: cannot create a temporary directory in $CACHE — check free space and permissions"
cleanup() { rm -rf "$TMP"; }
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# install_bin NEW DEST: put the complete directory NEW at DEST (rename on the same filesystem;
# an incomplete DEST from an older run is moved aside into $TMP first).
install_bin() {
  if [[ -e "$2" ]]; then
    mv -T "$2" "$(mktemp -d "$TMP/old-XXXXXX")/bin" || die "step install: cannot move the incomplete $2 aside"
  fi
  mv -T "$1" "$2" || die "step install: cannot rename $1 to $2"
}

start=$(date +%s)

# ---- Kubernetes + etcd --------------------------------------------------------------------
if [[ $need_k8s == 1 ]]; then
  SRC="$TMP/k8s-src"
  OUT="$TMP/k8s-bin"
  mkdir -p "$SRC/etcd" "$OUT" "$K8S_DIR"
  echo "step download: fetching k8s.io/kubernetes@$K8S_VERSION go.mod"
  gomod="$(cd "$SRC" && "$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" 2>&1 | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')" || true
  [[ -n "$gomod" && -f "$gomod" ]] \
    || die "step download: cannot fetch k8s.io/kubernetes@$K8S_VERSION from the Go module proxy — check network/GOPROXY ($("$GO" env GOPROXY)) and that the version exists"
  staging=$(awk '/^require/,/^\)/ { if ($1 ~ /^k8s\.io\// && $2 == "v0.0.0") print $1 }' "$gomod" | sort -u)
  [[ -n "$staging" ]] || die "step wrapper-module: found no k8s.io/* v0.0.0 requirements in $gomod — the recipe does not fit $K8S_VERSION"
  etcd_ver=$(awk '$1 == "go.etcd.io/etcd/server/v3" { print $2 }' "$gomod")
  [[ -n "$etcd_ver" ]] || etcd_ver=v3.6.5
  go_line=$(awk '$1 == "go" { print $2; exit }' "$gomod")
  godebug_line=$(grep -E '^godebug ' "$gomod" || true)
  {
    echo "module llmbench.local/k8sbuild"
    echo
    echo "go ${go_line:-1.25.0}"
    [[ -n "$godebug_line" ]] && echo "$godebug_line"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes $K8S_VERSION"
    echo "	go.etcd.io/etcd/server/v3 $etcd_ver"
    echo ")"
    echo
    echo "replace ("
    for m in $staging; do echo "	$m => $m $STAGING_VERSION"; done
    echo ")"
  } >"$SRC/go.mod"
  cat >"$SRC/tools.go" <<EOF
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
)
EOF
  cat >"$SRC/etcd/main.go" <<'EOF'
// etcd server: the same entry point as the upstream etcd binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
  echo "step download: resolving modules (k8s $K8S_VERSION, staging $STAGING_VERSION, etcd $etcd_ver)"
  (cd "$SRC" && "$GO" mod tidy >"$K8S_DIR/tidy.log" 2>&1) \
    || die "step download: 'go mod tidy' failed (see $K8S_DIR/tidy.log: $(tail -1 "$K8S_DIR/tidy.log")) — check network/GOPROXY"
  ver_pkg=k8s.io/component-base/version
  ldflags="-s -w -X $ver_pkg.gitVersion=$K8S_VERSION -X $ver_pkg.gitMajor=1 -X $ver_pkg.gitMinor=$MINOR"
  ldflags+=" -X $ver_pkg.gitTreeState=clean -X $ver_pkg.buildDate=1970-01-01T00:00:00Z"
  # Only what is missing is compiled (a cache from an older build.sh has the control plane
  # but not kubelet/kube-proxy); the binaries already there are copied into the new bin/.
  pkgs=()
  for c in "${missing_cmds[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  echo "step compile: go build ${missing_cmds[*]:-} $([[ -x "$BIN/etcd" ]] || echo etcd) (-p $JOBS; a cold build of all takes ~15-20 min on 2 cores)"
  : >"$K8S_DIR/build.log"
  if [[ ${#pkgs[@]} -gt 0 ]]; then
    (cd "$SRC" && "$GO" build -p "$JOBS" -ldflags "$ldflags" -o "$OUT/" "${pkgs[@]}" >>"$K8S_DIR/build.log" 2>&1) \
      || die "step compile: go build failed (see $K8S_DIR/build.log: $(tail -1 "$K8S_DIR/build.log"))"
  fi
  if [[ ! -x "$BIN/etcd" ]]; then
    (cd "$SRC" && "$GO" build -p "$JOBS" -ldflags "-s -w" -o "$OUT/etcd" ./etcd >>"$K8S_DIR/build.log" 2>&1) \
      || die "step compile: go build etcd failed (see $K8S_DIR/build.log: $(tail -1 "$K8S_DIR/build.log"))"
  fi
  for c in "${K8S_CMDS[@]}" etcd; do
    [[ -x "$OUT/$c" ]] || cp -p "$BIN/$c" "$OUT/$c" || die "step install: cannot copy $BIN/$c"
  done
  for c in kube-apiserver kubelet kube-proxy; do
    "$OUT/$c" --version >/dev/null || die "step compile: the built $c does not run (see $K8S_DIR/build.log)"
  done
  "$OUT/kubelet" --version
  "$OUT/etcd" --version | sed -n 1p
  install_bin "$OUT" "$BIN"
fi

# ---- llm-d-inference-sim ------------------------------------------------------------------
if [[ $need_sim == 1 ]]; then
  # `go install ...@version` also asks the proxy for the module's version list (deprecation
  # check), which the proxy here refuses; a wrapper module needs only the pinned version.
  SSRC="$TMP/sim-src"
  SOUT="$TMP/sim-bin"
  mkdir -p "$SSRC" "$SOUT" "$SIM_DIR"
  printf 'module llmbench.local/simbuild\n\ngo 1.25.7\n\nrequire github.com/llm-d/llm-d-inference-sim %s\n' \
    "$SIM_VERSION" >"$SSRC/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "github.com/llm-d/llm-d-inference-sim/cmd/llm-d-inference-sim"\n' \
    >"$SSRC/tools.go"
  echo "step download: resolving github.com/llm-d/llm-d-inference-sim@$SIM_VERSION"
  (cd "$SSRC" && "$GO" mod tidy >"$SIM_DIR/tidy.log" 2>&1) \
    || die "step download: llm-d-inference-sim $SIM_VERSION: 'go mod tidy' failed (see $SIM_DIR/tidy.log: $(tail -1 "$SIM_DIR/tidy.log")) — check network/GOPROXY"
  echo "step compile: go build llm-d-inference-sim $SIM_VERSION"
  (cd "$SSRC" && "$GO" build -p "$JOBS" -ldflags "-s -w" -o "$SOUT/llm-d-inference-sim" \
      github.com/llm-d/llm-d-inference-sim/cmd/llm-d-inference-sim >"$SIM_DIR/build.log" 2>&1) \
    || die "step compile: building llm-d-inference-sim $SIM_VERSION failed (see $SIM_DIR/build.log: $(tail -1 "$SIM_DIR/build.log"))"
  install_bin "$SOUT" "$SIM_BIN"
fi

# ---- helm ---------------------------------------------------------------------------------
if [[ $need_helm == 1 ]]; then
  HOUT="$TMP/helm-bin"
  mkdir -p "$HOUT" "$HELM_DIR"
  # The ldflags of helm's Makefile: its version, and the Kubernetes version that `helm
  # template`/`lint` assume (Capabilities.KubeVersion), taken from the client-go it requires
  # (v0.N.x -> 1.N); without them helm assumes v1.20 and refuses charts needing newer.
  echo "step download: fetching helm.sh/helm/v3@$HELM_VERSION go.mod"
  hgomod="$(cd "$TMP" && "$GO" mod download -json "helm.sh/helm/v3@$HELM_VERSION" 2>&1 | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')" || true
  [[ -n "$hgomod" && -f "$hgomod" ]] \
    || die "step download: cannot fetch helm.sh/helm/v3@$HELM_VERSION from the Go module proxy — check network/GOPROXY ($("$GO" env GOPROXY)) and that the version exists"
  hgo=$(awk '$1 == "go" { print $2; exit }' "$hgomod")
  if [[ "$hgo" =~ ^1\.([0-9]+) ]] && (( BASH_REMATCH[1] > GO_MINOR )); then
    die "step go-toolchain: helm $HELM_VERSION needs Go >= $hgo, this is $gov — install a newer Go or set GO=/path/to/go"
  fi
  client_go=$(awk '$1 == "k8s.io/client-go" { print $2 }' "$hgomod")
  [[ "$client_go" =~ ^v0\.([0-9]+)\. ]] \
    || die "step download: helm $HELM_VERSION's go.mod names no k8s.io/client-go v0.N.x ('$client_go')"
  hk8s_minor="${BASH_REMATCH[1]}"
  hldflags="-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
  hldflags+=" -X helm.sh/helm/v3/internal/version.metadata= -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
  for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    hldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$hk8s_minor"
  done
  echo "step compile: go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION (cold, modules downloaded too: ~3.5 min on 2 cores)"
  (cd "$TMP" && GOBIN="$HOUT" "$GO" install -p "$JOBS" -ldflags "$hldflags" \
      "helm.sh/helm/v3/cmd/helm@$HELM_VERSION" >"$HELM_DIR/build.log" 2>&1) \
    || die "step compile: 'go install helm.sh/helm/v3/cmd/helm@$HELM_VERSION' failed (see $HELM_DIR/build.log: $(tail -1 "$HELM_DIR/build.log")) — check network/GOPROXY"
  "$HOUT/helm" version --short || die "step compile: the built helm does not run (see $HELM_DIR/build.log)"
  install_bin "$HOUT" "$HELM_BIN"
fi

# ---- CoreDNS (the cluster DNS: Service names like vllm.<ns>.svc for target.service) ------------
if [[ $need_dns == 1 ]]; then
  # A CoreDNS with only the plugins the test cluster uses (CoreDNS's documented way to pick
  # plugins: its own main with dnsserver.Directives), so only their modules are compiled.
  DSRC="$TMP/coredns-src"
  DOUT="$TMP/coredns-bin"
  mkdir -p "$DSRC" "$DOUT" "$COREDNS_DIR"
  printf 'module llmbench.local/corednsbuild\n\ngo 1.25.0\n\nrequire github.com/coredns/coredns %s\n' \
    "$COREDNS_VERSION" >"$DSRC/go.mod"
  cat >"$DSRC/main.go" <<'EOF'
// CoreDNS with the plugins of the llmbench test cluster's DNS: bind (one address per
// cluster), errors, log, kubernetes (Service and pod records from the API server).
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/log"
)

func init() {
	dnsserver.Directives = []string{"bind", "errors", "log", "kubernetes"}
}

func main() { coremain.Run() }
EOF
  echo "step download: resolving github.com/coredns/coredns@$COREDNS_VERSION"
  (cd "$DSRC" && "$GO" mod tidy >"$COREDNS_DIR/tidy.log" 2>&1) \
    || die "step download: coredns $COREDNS_VERSION: 'go mod tidy' failed (see $COREDNS_DIR/tidy.log: $(tail -1 "$COREDNS_DIR/tidy.log")) — check network/GOPROXY"
  echo "step compile: go build coredns $COREDNS_VERSION (bind, errors, log, kubernetes)"
  (cd "$DSRC" && "$GO" build -p "$JOBS" -ldflags "-s -w" -o "$DOUT/coredns" . >"$COREDNS_DIR/build.log" 2>&1) \
    || die "step compile: building coredns $COREDNS_VERSION failed (see $COREDNS_DIR/build.log: $(tail -1 "$COREDNS_DIR/build.log"))"
  "$DOUT/coredns" -version >/dev/null || die "step compile: the built coredns does not run (see $COREDNS_DIR/build.log)"
  install_bin "$DOUT" "$COREDNS_BIN"
fi

end=$(date +%s)
echo "cluster binaries: built in $((end - start)) s (cold build time) -> $BIN, $SIM_BIN, $HELM_BIN, $COREDNS_BIN"
