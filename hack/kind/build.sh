#!/usr/bin/env bash
# Build (or reuse) a kind node image on a machine that reaches no container registry: only
# Debian's apt repositories and the Go module proxy. See docs/kind.md.
#
# Usage: hack/kind/build.sh            (k8s ${LLMBENCH_K8S_VERSION:-v1.35.4}, kind v0.33.0)
# Output: the node image's name in ${LLMBENCH_CACHE:-~/.cache/llmbench}/kind/node-image, the
# image itself in the private dockerd of hack/kind/env.sh. Everything is cached under
# .../kind (binaries, the Debian rootfs, buildah's store, docker's data root); each step is
# skipped when its inputs are unchanged, so a warm run takes seconds.
#
# Steps (each names itself when it fails):
#   packages     docker.io buildah debootstrap (Debian), installed once if missing
#   kind         go install sigs.k8s.io/kind@v0.33.0; its module holds images/base
#   control      hack/cluster/build.sh: kube-apiserver, -controller-manager, -scheduler
#   node-bins    kubeadm kubelet kubectl kube-proxy (the same wrapper-module recipe)
#   extras       etcd, CoreDNS, containerd 2.x, crictl, local-path-provisioner (Go module
#                proxy), kindnetd and pause (sources in hack/kind)
#   debian       debootstrap --variant=minbase bookworm, docker import
#   base         kind's images/base/Dockerfile `--target base` (unchanged) + hack/kind/base
#   images       one image per component, tagged exactly as kubeadm v1.35 / kind v0.33 expect
#   tarball      kubernetes-server-linux-amd64.tar.gz in the layout of a Kubernetes release
#   node-image   kind build node-image --type file <tarball> --base-image <base>
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
source "$here/env.sh"

ETCD_VERSION="${LLMBENCH_KIND_ETCD_VERSION:-v3.6.6}"      # kubeadm v1.35: registry.k8s.io/etcd:3.6.6-0
COREDNS_VERSION="${LLMBENCH_KIND_COREDNS_VERSION:-v1.13.1}" # kubeadm v1.35: coredns/coredns:v1.13.1
CRICTL_VERSION="${LLMBENCH_KIND_CRICTL_VERSION:-v1.36.0}"  # kind v0.33's base image
CONTAINERD_VERSION="${LLMBENCH_KIND_CONTAINERD_VERSION:-v2.3.4}" # kind v0.33's base image
# kind v0.33 builds v0.0.34; the Go module proxy here serves v0.0.30 only.
LPP_VERSION="${LLMBENCH_KIND_LPP_VERSION:-v0.0.30}"
# The image names kind v0.33 hard-codes (pkg/build/nodeimage/const_*.go, images/base config).
KINDNETD_IMAGE=docker.io/kindest/kindnetd:v20260820-69b56db7
LPP_IMAGE=docker.io/kindest/local-path-provisioner:v20260820-69b56db7
LPH_IMAGE=docker.io/kindest/local-path-helper:v20260131-7181c60a
PAUSE_IMAGE=registry.k8s.io/pause:3.10   # sandbox_image of kind's containerd config.toml
JOBS="${LLMBENCH_BUILD_JOBS:-$(nproc 2>/dev/null || echo 2)}"

[[ "$K8S_VERSION" =~ ^v1\.([0-9]+)\.([0-9]+)$ ]] \
  || die "step args: '$K8S_VERSION' is not a Kubernetes release like v1.35.4 — set LLMBENCH_K8S_VERSION=v1.35.4"
MINOR="${BASH_REMATCH[1]}"
STAGING_VERSION="v0.${MINOR}.${BASH_REMATCH[2]}"
start=$(date +%s)
t_last=$start
lap() { local now; now=$(date +%s); say "$1 ($((now - t_last)) s)"; t_last=$now; }

# ---- packages -----------------------------------------------------------------------------
need_pkgs=()
command -v dockerd >/dev/null 2>&1 || need_pkgs+=(docker.io)
command -v buildah >/dev/null 2>&1 || need_pkgs+=(buildah)
command -v debootstrap >/dev/null 2>&1 || need_pkgs+=(debootstrap)
command -v flock >/dev/null 2>&1 || need_pkgs+=(util-linux)
command -v jq >/dev/null 2>&1 || need_pkgs+=(jq)
if (( ${#need_pkgs[@]} )); then
  [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null 2>&1 \
    || die "step packages: missing ${need_pkgs[*]} — install them (Debian: apt-get install ${need_pkgs[*]}) and rerun"
  say "step packages: apt-get install ${need_pkgs[*]}"
  apt-get -o DPkg::Lock::Timeout=600 install -y "${need_pkgs[@]}" >/dev/null \
    || die "step packages: 'apt-get install ${need_pkgs[*]}' failed — run 'apt-get update' and retry, or install them by hand"
fi
[[ $(id -u) == 0 ]] || die "step packages: dockerd, buildah and debootstrap need root here — run as root"

# ---- lock and work directory --------------------------------------------------------------
mkdir -p "$KCACHE"
exec 9>>"$KCACHE/.build.lock"
if ! flock -n 9; then
  say "waiting for another build (pid $(head -c 16 "$KCACHE/.build.lock" | tr -dc 0-9)) — lock $KCACHE/.build.lock"
  flock 9
fi
echo "$$" >"$KCACHE/.build.lock"
rm -rf "$KCACHE"/.tmp-*
TMP="$(mktemp -d "$KCACHE/.tmp-XXXXXX")"
trap 'rm -rf "$TMP"' EXIT

GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
[[ -x "$GO" ]] || die "step go-toolchain: no 'go' found — install Go >= 1.25 or set GO=/path/to/go"
export GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS="-trimpath -buildvcs=false"

# key WORDS/FILES...: a short hash of strings and file contents (the cache key of a step).
key() {
  local a
  for a in "$@"; do if [[ -f "$a" ]]; then sha256sum <"$a"; else echo "$a"; fi; done | sha256sum | cut -c1-16
}

# go_build NAME OUTDIR PKG REQUIRE [LDFLAGS [TAGS]]: build PKG in a throwaway wrapper module
# (`require REQUIRE`, a tools.go importing PKG; a dir $TMP/NAME-main adds a main package) and
# install the binary as OUTDIR/NAME. Skipped when OUTDIR/NAME exists.
go_build() {
  local name="$1" out="$2" pkg="$3" req="$4" ldflags="${5:-}" tags="${6:-}"
  [[ -x "$out/$name" ]] && return 0
  local src="$TMP/src-$name"
  mkdir -p "$src" "$out"
  printf 'module llmbench.local/kind-%s\n\ngo 1.25\n\nrequire %s\n' "$name" "$req" >"$src/go.mod"
  printf '//go:build tools\n\npackage tools\n\nimport _ "%s"\n' "$pkg" >"$src/tools.go"
  if [[ -d "$TMP/$name-main" ]]; then cp -r "$TMP/$name-main" "$src/main"; pkg=./main; fi
  (cd "$src" && "$GO" mod tidy >"$out/tidy-$name.log" 2>&1) \
    || die "step extras: $name: 'go mod tidy' failed (see $out/tidy-$name.log: $(tail -1 "$out/tidy-$name.log")) — check network/GOPROXY"
  (cd "$src" && "$GO" build -p "$JOBS" -tags "$tags" -ldflags "-s -w $ldflags" -o "$src/$name.bin" "$pkg" \
      >"$out/build-$name.log" 2>&1) \
    || die "step extras: $name: go build failed (see $out/build-$name.log: $(tail -1 "$out/build-$name.log"))"
  mv "$src/$name.bin" "$out/$name"
}

# go_build_dir NAME SRCDIR: build the main package of a source directory of this repository
# into $KCACHE/tools/NAME-<hash of its sources> (an edit rebuilds it); prints the binary.
go_build_dir() {
  local name="$1" dir="$2" k
  k=$(key "$dir"/go.* "$dir"/*.go)
  local out="$KCACHE/tools/$name-$k"
  if [[ ! -x "$out/$name" ]]; then
    mkdir -p "$out"
    (cd "$dir" && "$GO" build -p "$JOBS" -ldflags "-s -w" -o "$TMP/$name.bin" . >"$out/build.log" 2>&1) \
      || die "step extras: $name: go build in $dir failed (see $out/build.log: $(tail -1 "$out/build.log"))"
    mv "$TMP/$name.bin" "$out/$name"
  fi
  printf '%s' "$out/$name"
}

# ---- kind ---------------------------------------------------------------------------------
if [[ ! -x "$KIND_BIN" ]]; then
  say "step kind: go install sigs.k8s.io/kind@$KIND_VERSION"
  mkdir -p "$(dirname "$KIND_BIN")"
  (cd "$TMP" && GOBIN="$(dirname "$KIND_BIN")" "$GO" install "sigs.k8s.io/kind@$KIND_VERSION" >"$TMP/kind.log" 2>&1) \
    || die "step kind: 'go install sigs.k8s.io/kind@$KIND_VERSION' failed ($(tail -1 "$TMP/kind.log")) — check network/GOPROXY"
fi
KIND_SRC="$(cd "$TMP" && "$GO" mod download -json "sigs.k8s.io/kind@$KIND_VERSION" | jq -r .Dir)"
[[ -f "$KIND_SRC/images/base/Dockerfile" ]] \
  || die "step kind: no images/base/Dockerfile in the module sigs.k8s.io/kind@$KIND_VERSION ($KIND_SRC)"
lap "step kind: $("$KIND_BIN" version)"

# ---- control plane ------------------------------------------------------------------------
# hack/cluster/build.sh builds (and caches) them for the process-kubelet cluster too; it also
# builds the simulator and helm, which kind does not need, so it runs only when one is missing.
CP_BIN="$CACHE/k8s-$K8S_VERSION/bin"
CP_CMDS=(kube-apiserver kube-controller-manager kube-scheduler)
for c in "${CP_CMDS[@]}"; do
  [[ -x "$CP_BIN/$c" ]] && continue
  bash "$root/hack/cluster/build.sh" "$K8S_VERSION" >"$TMP/control.log" 2>&1 \
    || die "step control: hack/cluster/build.sh failed: $(tail -1 "$TMP/control.log")"
  break
done
lap "step control: $CP_BIN"

# ---- node binaries ------------------------------------------------------------------------
NODE_BIN="$KCACHE/k8s-$K8S_VERSION/bin"
NODE_CMDS=(kubeadm kubelet kubectl kube-proxy)
missing=()
for c in "${NODE_CMDS[@]}"; do
  # hack/cluster/build.sh may build some of them into the shared cache; reuse those.
  if [[ ! -x "$NODE_BIN/$c" && -x "$CP_BIN/$c" ]]; then mkdir -p "$NODE_BIN"; cp "$CP_BIN/$c" "$NODE_BIN/$c"; fi
  [[ -x "$NODE_BIN/$c" ]] || missing+=("$c")
done
if (( ${#missing[@]} )); then
  say "step node-bins: go build ${missing[*]} $K8S_VERSION (cold: ~5-25 min on 2 cores)"
  gomod="$(cd "$TMP" && "$GO" mod download -json "k8s.io/kubernetes@$K8S_VERSION" | jq -r .GoMod)"
  [[ -f "$gomod" ]] || die "step node-bins: cannot fetch k8s.io/kubernetes@$K8S_VERSION from the Go module proxy"
  src="$TMP/k8s-src"
  mkdir -p "$src" "$NODE_BIN"
  {
    echo "module llmbench.local/kind-k8s"
    echo
    echo "go $(awk '$1 == "go" { print $2; exit }' "$gomod")"
    grep -E '^godebug ' "$gomod" || true
    echo
    echo "require k8s.io/kubernetes $K8S_VERSION"
    echo
    echo "replace ("
    awk '/^require/,/^\)/ { if ($1 ~ /^k8s\.io\// && $2 == "v0.0.0") print "\t" $1 " => " $1 " '"$STAGING_VERSION"'" }' "$gomod" | sort -u
    echo ")"
  } >"$src/go.mod"
  { printf '//go:build tools\n\npackage tools\n\nimport (\n'
    for c in "${missing[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$c"; done
    printf ')\n'; } >"$src/tools.go"
  (cd "$src" && "$GO" mod tidy >"$NODE_BIN/../tidy.log" 2>&1) \
    || die "step node-bins: 'go mod tidy' failed (see $NODE_BIN/../tidy.log)"
  vp=k8s.io/component-base/version
  ldflags="-s -w -X $vp.gitVersion=$K8S_VERSION -X $vp.gitMajor=1 -X $vp.gitMinor=$MINOR -X $vp.gitTreeState=clean -X $vp.buildDate=1970-01-01T00:00:00Z"
  pkgs=(); for c in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$c"); done
  mkdir -p "$TMP/k8s-out"
  (cd "$src" && "$GO" build -p "$JOBS" -ldflags "$ldflags" -o "$TMP/k8s-out/" "${pkgs[@]}" >"$NODE_BIN/../build.log" 2>&1) \
    || die "step node-bins: go build failed (see $NODE_BIN/../build.log: $(tail -1 "$NODE_BIN/../build.log"))"
  for c in "${missing[@]}"; do mv "$TMP/k8s-out/$c" "$NODE_BIN/$c"; done
fi
lap "step node-bins: $NODE_BIN"

# ---- extras -------------------------------------------------------------------------------
T="$KCACHE/tools"
mkdir -p "$TMP/etcd-main"
cat >"$TMP/etcd-main/main.go" <<'EOF'
// etcd server: the same entry point as the upstream etcd binary.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
EOF
ETCD="$T/etcd-$ETCD_VERSION"; COREDNS="$T/coredns-$COREDNS_VERSION"
CRICTL="$T/crictl-$CRICTL_VERSION"; LPP="$T/local-path-provisioner-$LPP_VERSION"
CTRD="$T/containerd-$CONTAINERD_VERSION"
say "step extras: etcd $ETCD_VERSION, coredns $COREDNS_VERSION, containerd $CONTAINERD_VERSION, crictl $CRICTL_VERSION, local-path-provisioner $LPP_VERSION, kindnetd, pause"
go_build etcd "$ETCD" go.etcd.io/etcd/server/v3/etcdmain "go.etcd.io/etcd/server/v3 $ETCD_VERSION"
go_build coredns "$COREDNS" github.com/coredns/coredns "github.com/coredns/coredns $COREDNS_VERSION"
go_build crictl "$CRICTL" sigs.k8s.io/cri-tools/cmd/crictl "sigs.k8s.io/cri-tools $CRICTL_VERSION" \
  "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION"
go_build local-path-provisioner "$LPP" github.com/rancher/local-path-provisioner \
  "github.com/rancher/local-path-provisioner $LPP_VERSION" "-X main.VERSION=$LPP_VERSION"
# containerd the way its Makefile builds it (version ldflags, kind's BUILDTAGS; the shim
# without grpc), statically (CGO off: btrfs, the one cgo user, is tagged out).
cm=github.com/containerd/containerd/v2
cld="-X $cm/version.Version=$CONTAINERD_VERSION -X $cm/version.Package=$cm"
ctags="urfave_cli_no_docs no_aufs no_zfs no_btrfs no_devmapper"
for c in containerd ctr; do go_build "$c" "$CTRD" "$cm/cmd/$c" "$cm $CONTAINERD_VERSION" "$cld" "$ctags"; done
go_build containerd-shim-runc-v2 "$CTRD" "$cm/cmd/containerd-shim-runc-v2" "$cm $CONTAINERD_VERSION" "$cld" "$ctags no_grpc"
KINDNETD_BIN="$(go_build_dir kindnetd "$here/kindnetd")"
PAUSE_BIN="$(go_build_dir pause "$here/pause")"
lap "step extras: $T"

# ---- docker, Debian base ------------------------------------------------------------------
ensure_docker
BUILDAH=(buildah --root "$KCACHE/buildah" --runroot "$DOCKER_RUN/buildah" --storage-driver overlay)
image_exists() { docker image inspect "$1" >/dev/null 2>&1; }
DEBIAN_IMAGE=llmbench-kind/debian:bookworm
if ! image_exists "$DEBIAN_IMAGE"; then
  rootfs_tar="$KCACHE/debian-bookworm-minbase.tar"
  if [[ ! -f "$rootfs_tar" ]]; then
    say "step debian: debootstrap --variant=minbase bookworm (~1-5 min, network-bound)"
    debootstrap --variant=minbase bookworm "$TMP/rootfs" http://deb.debian.org/debian >"$TMP/debootstrap.log" 2>&1 \
      || die "step debian: debootstrap failed (see its log: $(tail -1 "$TMP/debootstrap.log")) — check that deb.debian.org is reachable"
    tar -C "$TMP/rootfs" -cf "$rootfs_tar.part" . && mv "$rootfs_tar.part" "$rootfs_tar"
    rm -rf "$TMP/rootfs"
  fi
  docker import "$rootfs_tar" "$DEBIAN_IMAGE" >/dev/null || die "step debian: docker import failed"
fi
lap "step debian: $DEBIAN_IMAGE"

# ---- kind base ----------------------------------------------------------------------------
BASE_BINS=("$CRICTL/crictl" "$CTRD/containerd" "$CTRD/ctr" "$CTRD/containerd-shim-runc-v2")
BASE_KEY=$(key "$KIND_VERSION" "$(docker image inspect -f '{{.Id}}' "$DEBIAN_IMAGE")" "$here/base/Dockerfile" "${BASE_BINS[@]}")
BASE_IMAGE="llmbench-kind/base:$KIND_VERSION-$BASE_KEY"
if ! image_exists "$BASE_IMAGE"; then
  say "step base: kind's images/base --target base, then hack/kind/base/Dockerfile (buildah; ~5 min)"
  docker save "$DEBIAN_IMAGE" -o "$TMP/debian.tar"
  "${BUILDAH[@]}" pull "docker-archive:$TMP/debian.tar" >"$TMP/base.log" 2>&1 \
    || die "step base: buildah pull of $DEBIAN_IMAGE failed (see output: $(tail -1 "$TMP/base.log"))"
  stage="localhost/llmbench-kind/base-stage:$KIND_VERSION-$BASE_KEY"
  "${BUILDAH[@]}" bud --pull=never --network host --isolation chroot --layers=false --target base \
      --build-arg "BASE_IMAGE=localhost/$DEBIAN_IMAGE" -f "$KIND_SRC/images/base/Dockerfile" \
      -t "$stage" "$KIND_SRC/images/base" >>"$KCACHE/base.log" 2>&1 \
    || die "step base: kind's images/base/Dockerfile --target base failed (see $KCACHE/base.log: $(tail -1 "$KCACHE/base.log"))"
  mkdir -p "$TMP/basectx"
  cp "$here/base/Dockerfile" "${BASE_BINS[@]}" "$TMP/basectx/"
  "${BUILDAH[@]}" bud --pull=never --network host --isolation chroot --layers=false \
      --build-arg "KIND_BASE_STAGE=$stage" -t "localhost/$BASE_IMAGE" "$TMP/basectx" >>"$KCACHE/base.log" 2>&1 \
    || die "step base: hack/kind/base/Dockerfile failed (see $KCACHE/base.log: $(tail -1 "$KCACHE/base.log"))"
  # buildah's docker-daemon: transport does not reach a daemon on a custom socket; an archive does.
  "${BUILDAH[@]}" push "localhost/$BASE_IMAGE" "docker-archive:$TMP/base.tar:$BASE_IMAGE" >>"$KCACHE/base.log" 2>&1 \
    && docker load -i "$TMP/base.tar" >/dev/null \
    || die "step base: moving the base image from buildah to docker failed (see $KCACHE/base.log)"
  docker rmi "localhost/$BASE_IMAGE" >/dev/null 2>&1 || true
  "${BUILDAH[@]}" rmi -a >/dev/null 2>&1 || true
fi
lap "step base: $BASE_IMAGE"

# ---- component images ---------------------------------------------------------------------
# A distroless-like root for the static Go binaries: users root/nobody/nonroot(65532), /tmp.
STATIC_ROOT="$TMP/static-root"
mkdir -p "$STATIC_ROOT/etc" "$STATIC_ROOT/tmp" "$STATIC_ROOT/usr/local/bin"
chmod 1777 "$STATIC_ROOT/tmp"
printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$STATIC_ROOT/etc/passwd"
printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$STATIC_ROOT/etc/group"

# image TAG FROM ENTRYPOINT-JSON FILE...: docker build TAG from FROM (scratch: the static
# root above) with FILEs in /usr/local/bin; skipped when the image's key label matches.
IMAGES=()
image() {
  local tag="$1" from="$2" entry="$3"; shift 3
  local k ctx
  k=$(key "$tag" "$from" "$entry" "$@" "$here/images/iptables-wrapper")
  IMAGES+=("$tag")
  [[ "$(docker image inspect -f '{{index .Config.Labels "llmbench.kind.key"}}' "$tag" 2>/dev/null)" == "$k" ]] && return 0
  ctx="$TMP/ctx-$(echo "$tag" | tr '/:' '__')"
  mkdir -p "$ctx/bin"
  (( $# == 0 )) || cp "$@" "$ctx/bin/"
  {
    if [[ "$from" == scratch ]]; then
      cp -r "$STATIC_ROOT" "$ctx/root"
      echo "FROM scratch"
      echo "COPY root/ /"
    else
      echo "FROM $from"
    fi
    echo "COPY bin/ /usr/local/bin/"
    echo "ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin"
    echo "LABEL llmbench.kind.key=$k"
    echo "ENTRYPOINT $entry"
  } >"$ctx/Dockerfile"
  docker build -q --network none -t "$tag" "$ctx" >"$TMP/image.log" 2>&1 \
    || die "step images: docker build $tag failed: $(tail -3 "$TMP/image.log")"
}

# Debian with iptables/nftables/conntrack, for kube-proxy and kindnetd (upstream:
# distroless-iptables) and bash for local-path-helper (upstream: a staged sh/rm/mkdir).
NET_IMAGE=llmbench-kind/debian-net:bookworm
NET_KEY=$(key "$(docker image inspect -f '{{.Id}}' "$DEBIAN_IMAGE")" "$here/images/iptables-wrapper")
if [[ "$(docker image inspect -f '{{index .Config.Labels "llmbench.kind.key"}}' "$NET_IMAGE" 2>/dev/null)" != "$NET_KEY" ]]; then
  say "step images: $NET_IMAGE (apt-get install iptables nftables conntrack)"
  ctx="$TMP/ctx-net"; mkdir -p "$ctx"
  cp "$here/images/iptables-wrapper" "$ctx/"
  cat >"$ctx/Dockerfile" <<EOF
FROM $DEBIAN_IMAGE
RUN apt-get update && apt-get install -y --no-install-recommends iptables nftables conntrack \\
    && apt-get clean && rm -rf /var/lib/apt/lists/*
COPY iptables-wrapper /usr/sbin/iptables-wrapper
RUN chmod 0755 /usr/sbin/iptables-wrapper \\
    && for c in iptables iptables-save iptables-restore ip6tables ip6tables-save ip6tables-restore; do \\
         ln -sf iptables-wrapper "/usr/sbin/\$c"; done
LABEL llmbench.kind.key=$NET_KEY
EOF
  docker build -q --network host -t "$NET_IMAGE" "$ctx" >"$TMP/net.log" 2>&1 \
    || die "step images: $NET_IMAGE failed (apt inside the build): $(tail -3 "$TMP/net.log")"
fi

R=registry.k8s.io
V="$K8S_VERSION"
image "$R/kube-apiserver:$V" scratch '["/usr/local/bin/kube-apiserver"]' "$CP_BIN/kube-apiserver"
image "$R/kube-controller-manager:$V" scratch '["/usr/local/bin/kube-controller-manager"]' "$CP_BIN/kube-controller-manager"
image "$R/kube-scheduler:$V" scratch '["/usr/local/bin/kube-scheduler"]' "$CP_BIN/kube-scheduler"
image "$R/kube-proxy:$V" "$NET_IMAGE" '["/usr/local/bin/kube-proxy"]' "$NODE_BIN/kube-proxy"
image "$R/etcd:${ETCD_VERSION#v}-0" scratch '["/usr/local/bin/etcd"]' "$ETCD/etcd"
image "$R/coredns/coredns:$COREDNS_VERSION" scratch '["/usr/local/bin/coredns"]' "$COREDNS/coredns"
image "$PAUSE_IMAGE" scratch '["/usr/local/bin/pause"]' "$PAUSE_BIN"
image "$KINDNETD_IMAGE" "$NET_IMAGE" '["/usr/local/bin/kindnetd"]' "$KINDNETD_BIN"
image "$LPP_IMAGE" scratch '["/usr/local/bin/local-path-provisioner"]' "$LPP/local-path-provisioner"
image "$LPH_IMAGE" "$DEBIAN_IMAGE" '["/bin/sh"]'
lap "step images: ${#IMAGES[@]} images"

# ---- server tarball -----------------------------------------------------------------------
ids=(); for i in "${IMAGES[@]}"; do ids+=("$(docker image inspect -f '{{.Id}}' "$i")"); done
# The layout is this script's: an edit of it rebuilds the tarball too.
TAR_KEY=$(key "$V" "${ids[@]}" "$NODE_BIN/kubeadm" "$NODE_BIN/kubelet" "$NODE_BIN/kubectl" "$here/build.sh")
TARBALL="$KCACHE/kubernetes-server-linux-amd64-$V-$TAR_KEY.tar.gz"
if [[ ! -f "$TARBALL" ]]; then
  say "step tarball: $TARBALL"
  rm -f "$KCACHE"/kubernetes-server-linux-amd64-*.tar.gz
  sb="$TMP/tar/kubernetes/server/bin"
  mkdir -p "$sb"
  echo "$V" >"$TMP/tar/kubernetes/version"
  for c in kubeadm kubelet kubectl; do cp "$NODE_BIN/$c" "$sb/"; done
  for c in kube-apiserver kube-controller-manager kube-scheduler; do cp "$CP_BIN/$c" "$sb/"; done
  cp "$NODE_BIN/kube-proxy" "$sb/"
  for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy; do
    echo "$V" >"$sb/$c.docker_tag"
    docker save -o "$sb/$c.tar" "$R/$c:$V"
  done
  # kind loads only these four archives and `ctr content fetch`es every other image it needs
  # (etcd, CoreDNS, pause, kindnetd, local-path-*) from its registry, which fails here. It
  # skips the fetch for images it finds in the archives, reading their names from the first
  # of `manifest.json` / `repositories` in each tar (kind: GetArchiveTags). So kube-proxy.tar
  # is one `docker save` of kube-proxy and those images — every image under its own name —
  # repacked with `repositories` (all names) ahead of `manifest.json` (containerd reads only
  # manifest.json, in any order). docker writes docker.io names short (kindest/kindnetd);
  # kind compares them with the long form (docker.io/kindest/kindnetd), which is the same
  # name, so `repositories` gets the long form. No image is renamed and kind is not patched.
  extra=("$R/etcd:${ETCD_VERSION#v}-0" "$R/coredns/coredns:$COREDNS_VERSION" "$PAUSE_IMAGE" "$KINDNETD_IMAGE" "$LPP_IMAGE" "$LPH_IMAGE")
  mkdir -p "$TMP/proxy-tar"
  docker save "$R/kube-proxy:$V" "${extra[@]}" | tar -C "$TMP/proxy-tar" -x
  jq -c 'with_entries(if (.key | split("/") | length > 1 and (.[0] | test("[.:]") or . == "localhost"))
                      then . else .key = "docker.io/" + .key end)' \
    "$TMP/proxy-tar/repositories" >"$TMP/repositories" && mv "$TMP/repositories" "$TMP/proxy-tar/repositories"
  (cd "$TMP/proxy-tar" && tar -cf "$sb/kube-proxy.tar" repositories manifest.json \
      $(ls -A | grep -vxE 'repositories|manifest.json'))
  rm -rf "$TMP/proxy-tar"
  gz=gzip; command -v pigz >/dev/null 2>&1 && gz=pigz
  tar -C "$TMP/tar" -c kubernetes | "$gz" -1 >"$TARBALL.part" && mv "$TARBALL.part" "$TARBALL"
  rm -rf "$TMP/tar"
fi
lap "step tarball: $(du -h "$TARBALL" | cut -f1)"

# ---- node image ---------------------------------------------------------------------------
NODE_IMAGE="llmbench-kind/node:$V-$(key "$TARBALL" "$BASE_IMAGE")"
if ! image_exists "$NODE_IMAGE"; then
  say "step node-image: kind build node-image --type file ... --image $NODE_IMAGE"
  "$KIND_BIN" build node-image --type file "$TARBALL" --base-image "$BASE_IMAGE" --image "$NODE_IMAGE" \
      >"$KCACHE/node-image.log" 2>&1 \
    || die "step node-image: kind build node-image failed (see $KCACHE/node-image.log: $(grep -m1 -iE 'error|fail' "$KCACHE/node-image.log"))"
fi
echo "$NODE_IMAGE" >"$NODE_IMAGE_FILE"
# Older node and base images (~1.3 GB and ~0.4 GB each) go; one a cluster still runs stays.
for old in $(docker images --format '{{.Repository}}:{{.Tag}}' llmbench-kind/node; docker images --format '{{.Repository}}:{{.Tag}}' llmbench-kind/base); do
  [[ "$old" == "$NODE_IMAGE" || "$old" == "$BASE_IMAGE" ]] || docker rmi "$old" >/dev/null 2>&1 || true
done
docker image prune -f >/dev/null 2>&1 || true
lap "step node-image: $NODE_IMAGE"
say "built in $(( $(date +%s) - start )) s -> $NODE_IMAGE (hack/kind/up.sh starts a cluster from it)"
