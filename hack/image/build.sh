#!/usr/bin/env bash
# Build (or reuse) the images the test cluster's real nodes run, with no registry and no
# container daemon (buildah, chroot isolation):
#
#   base      Debian bookworm minbase (debootstrap) + Debian's python3 (3.11, the lock's Python),
#             pip in /usr/local like the official python image (from Debian's own pip
#             wheel), so the Dockerfile's `pip uninstall` removes it from the final image
#   llmbench  the project's Dockerfile, unchanged, with --build-arg BASE_IMAGE=<base>
#   sim       llm-d-inference-sim (the binary hack/cluster/build.sh caches) on the base
#   dcgm      the simulated dcgm-exporter (llmbench's DcgmSimulator on :9400/metrics)
#   pause     the pod sandbox image containerd's CRI needs (sleeps for ever)
#
#   bash hack/image/build.sh            build what changed, then list the images
#   bash hack/image/build.sh --list     only list (fails naming what is not built yet)
#   bash hack/image/build.sh --refs     only the references pods use (`NAME REFERENCE`)
#
# Output: one line per image, `NAME REFERENCE ARCHIVE`; each ARCHIVE is a docker-archive
# tarball (`ctr -n k8s.io images import` loads it) under
# ${LLMBENCH_CACHE:-~/.cache/llmbench}/images/. Incremental: every image is keyed by a hash of
# its inputs (the base's recipe; the Dockerfile and the build context; the simulator binary;
# the base key for sim and pause; the llmbench key for dcgm), so an unchanged tree rebuilds
# nothing (~1 s) and a source edit rebuilds llmbench and dcgm only (~1 min on 2 cores).
# Concurrent runs wait on $CACHE/images/.lock. Archives of older keys are pruned (newest 3
# per image are kept).
#
# A step that fails names itself and the fix. Needs root, buildah and debootstrap
# (hack/cluster/build.sh installs them), the Debian mirror over HTTP and PyPI (the Dockerfile's
# pip install; the host's CA bundle is mounted over the image's for that step only, so an
# intercepting proxy's CA works without changing the Dockerfile).
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
CACHE="${LLMBENCH_CACHE:-$HOME/.cache/llmbench}"
OUT="$CACHE/images"
SIM_VERSION="${LLMBENCH_SIM_VERSION:-v0.10.2}"
SIM_BIN="$CACHE/llm-d-inference-sim-$SIM_VERSION/bin/llm-d-inference-sim"
MIRROR="${LLMBENCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
SUITE=bookworm
BASE_PKGS=python3,python3-venv,python-is-python3,ca-certificates
HOST_CA=/etc/ssl/certs/ca-certificates.crt
KEEP=3

# The references the cluster's pods use: a registry host no one serves, so a missing image
# fails fast with ErrImagePull instead of pulling something else.
declare -A REF=(
  [llmbench]=localhost/llmbench:dev
  [sim]="localhost/llm-d-inference-sim:$SIM_VERSION"
  [dcgm]=localhost/dcgm-exporter-sim:dev
  [pause]=localhost/pause:llmbench
)
NAMES=(llmbench sim dcgm pause)

die() { echo "hack/image/build.sh: $*" >&2; exit 1; }
list_only=0
case "${1:-}" in
  --list) list_only=1 ;;
  --refs) for n in "${NAMES[@]}"; do echo "$n ${REF[$n]}"; done; exit 0 ;;
  "") ;;
  -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
  *) die "unknown argument '$1' (see --help)" ;;
esac

# ---- keys ----------------------------------------------------------------------------------
sha() { sha256sum | cut -c1-16; }
# The recipe of the base image: changing any of these lines makes a new base.
base_key="$(printf 'base v2 pip-in-usr-local\n%s\n%s\n%s\n' "$MIRROR" "$SUITE" "$BASE_PKGS" | sha)"
# The build context as the Dockerfile sees it (the .dockerignore allowlist), plus both files.
context_key() {
  (cd "$root" && find README.md pyproject.toml requirements.lock Dockerfile .dockerignore \
      hack/image llmbench -type f ! -path '*/__pycache__/*' ! -name '*.py[cod]' \
      ! -name 'build.sh' ! -name '*.Containerfile' ! -name 'dcgm-exporter.py' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}
declare -A KEY
KEY[llmbench]="$( { echo "llmbench v1 $base_key"; context_key; } | sha)"
KEY[dcgm]="$( { echo "dcgm v1 ${KEY[llmbench]}"; cat "$root/hack/image/dcgm-exporter.Containerfile" \
  "$root/hack/image/dcgm-exporter.py"; } | sha)"
KEY[pause]="$( { echo "pause v1 $base_key"; cat "$root/hack/image/pause.Containerfile"; } | sha)"
if [[ -x "$SIM_BIN" ]]; then
  KEY[sim]="$( { echo "sim v1 $base_key"; sha256sum <"$SIM_BIN"; \
    cat "$root/hack/image/sim.Containerfile"; } | sha)"
else
  KEY[sim]=none
fi
archive() { echo "$OUT/$1-${KEY[$1]}.tar"; }

print_list() {
  local n
  for n in "${NAMES[@]}"; do echo "$n ${REF[$n]} $(archive "$n")"; done
}
all_built() {
  local n
  for n in "${NAMES[@]}"; do [[ -s "$(archive "$n")" ]] || return 1; done
}
if all_built; then print_list; exit 0; fi
if [[ $list_only == 1 ]]; then
  missing=()
  for n in "${NAMES[@]}"; do [[ -s "$(archive "$n")" ]] || missing+=("$n"); done
  die "step list: image(s) ${missing[*]} not built for this tree — run 'bash hack/image/build.sh'"
fi

# ---- tools, lock ---------------------------------------------------------------------------
[[ "$(id -u)" == 0 ]] || die "step tools: needs root (debootstrap, buildah's chroot isolation) — run as root"
for tool in buildah debootstrap; do
  command -v "$tool" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "$tool" >/dev/null 2>&1 \
    || die "step tools: '$tool' not found — run 'bash hack/cluster/build.sh' (it installs the Debian packages) or apt-get install -y $tool"
done
export PATH="$PATH:/usr/sbin:/sbin"
mkdir -p "$OUT"
exec 9>>"$OUT/.lock"
if ! flock -n 9; then
  echo "images: waiting for another image build to finish — lock $OUT/.lock" >&2
  flock 9
fi
if all_built; then print_list; exit 0; fi
rm -rf "$OUT"/.tmp-*  # we hold the lock: any other is left over from a killed run
TMP="$(mktemp -d "$OUT/.tmp-XXXXXX")"
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# A private buildah store: other buildah or podman users of this machine are not touched.
STORE="$CACHE/buildah"
bh() { buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver overlay "$@"; }
log="$OUT/build.log"
: >"$log"
step() { echo "step $1: $2" >&2; echo "== step $1: $2" >>"$log"; }
run_logged() {  # run_logged STEP FIX CMD...: CMD's output to the log; on failure, die naming STEP
  local s="$1" fix="$2"; shift 2
  "$@" >>"$log" 2>&1 || die "step $s: '$1 ${2:-}' failed (last line: $(tail -1 "$log")) — $fix; full log $log"
}
# ensure_stored REF ARCHIVE: REF in the private store (pulled back from its archive if a
# cleanup removed it), so a FROM with --pull=never finds it.
ensure_stored() {
  bh inspect --type image "$1" >/dev/null 2>&1 && return 0
  local id
  id="$(bh pull --quiet "docker-archive:$2" 2>>"$log")" \
    || die "step store: cannot load $2 (last line: $(tail -1 "$log")) — remove it and run again"
  bh tag "$id" "$1" >>"$log" 2>&1
}
# save NAME BUILT_REF: the docker-archive of BUILT_REF, tagged with NAME's reference
save() {
  run_logged "save-$1" "check free space in $OUT" \
    bh push --quiet "$2" "docker-archive:$TMP/$1.tar:${REF[$1]}"
  mv -f "$TMP/$1.tar" "$(archive "$1")"
}
started=$(date +%s)

# ---- base ----------------------------------------------------------------------------------
BASE_REF="localhost/llmbench-base:$base_key"
BASE_TAR="$OUT/base-$base_key.tar"
if [[ ! -s "$BASE_TAR" ]]; then
  step base "debootstrap --variant=minbase $SUITE + $BASE_PKGS (~2 min)"
  rootfs="$TMP/rootfs"
  run_logged base "check that $MIRROR answers over HTTP (LLMBENCH_DEBIAN_MIRROR=another mirror)" \
    debootstrap --variant=minbase --include="$BASE_PKGS" "$SUITE" "$rootfs" "$MIRROR"
  # Debian marks its Python externally managed and its own pip (python3-pip) refuses to
  # uninstall itself ("outside environment"); the official image's pip is a plain install
  # that the Dockerfile's `pip uninstall` removes. So: no marker, and pip installed from
  # Debian's pip wheel (python3-pip-whl, which python3-venv brings; Debian disables
  # ensurepip) into /usr/local, Debian's scheme for local installs, as in the official image.
  rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
  run_logged base "see the log" chroot "$rootfs" sh -c \
    'whl=$(ls /usr/share/python-wheels/pip-*.whl) && python3 "$whl/pip" install --no-index --no-cache-dir "$whl"'
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/cache/apt/archives/*.deb \
    "$rootfs"/var/log/* "$rootfs"/tmp/*
  mkdir -p "$TMP/base-ctx"
  run_logged base "check free space in $TMP" tar -C "$rootfs" -cf "$TMP/base-ctx/rootfs.tar" .
  rm -rf "$rootfs"
  printf 'FROM scratch\nADD rootfs.tar /\nENV LANG=C.UTF-8\nCMD ["bash"]\n' >"$TMP/base-ctx/Containerfile"
  run_logged base "see the log" bh bud --quiet --pull=never --isolation chroot \
    -t "$BASE_REF" -f "$TMP/base-ctx/Containerfile" "$TMP/base-ctx"
  run_logged base "check free space in $OUT" \
    bh push --quiet "$BASE_REF" "docker-archive:$TMP/base.tar:$BASE_REF"
  mv -f "$TMP/base.tar" "$BASE_TAR"
  rm -rf "$TMP/base-ctx"
fi
ensure_stored "$BASE_REF" "$BASE_TAR"

# ---- llmbench (the project's Dockerfile) ------------------------------------------------------
LLMB_REF="localhost/llmbench:${KEY[llmbench]}"
if [[ -s "$(archive llmbench)" ]]; then
  [[ -s "$(archive dcgm)" ]] || ensure_stored "$LLMB_REF" "$(archive llmbench)"  # dcgm's FROM
else
    step llmbench "buildah bud Dockerfile --build-arg BASE_IMAGE=$BASE_REF (~1-2 min)"
    ca=()
    [[ -f "$HOST_CA" ]] && ca=(-v "$HOST_CA:$HOST_CA:ro")
    revision="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)"
    run_logged llmbench "pip in the build step needs PyPI: check the network and $HOST_CA" \
      bh bud --quiet --pull=never --network host --isolation chroot "${ca[@]}" \
        --build-arg "BASE_IMAGE=$BASE_REF" --build-arg "REVISION=$revision" \
        -t "$LLMB_REF" -f "$root/Dockerfile" "$root"
    save llmbench "$LLMB_REF"
fi

# ---- the small images on top ---------------------------------------------------------------
declare -A CONTAINERFILE=([sim]=sim [pause]=pause [dcgm]=dcgm-exporter)
build_small() {  # build_small NAME CONTEXT BUILD-ARGS...
  local n="$1" ctx="$2" file="$root/hack/image/${CONTAINERFILE[$1]}.Containerfile"; shift 2
  [[ -s "$(archive "$n")" ]] && return 0
  step "$n" "buildah bud ${file#"$root"/}"
  run_logged "$n" "see the log" bh bud --quiet --pull=never --isolation chroot "$@" \
    -t "localhost/llmbench-$n:${KEY[$n]}" -f "$file" "$ctx"
  save "$n" "localhost/llmbench-$n:${KEY[$n]}"
}
build_small pause "$TMP" --build-arg "BASE_IMAGE=$BASE_REF"
build_small dcgm "$root/hack/image" --build-arg "LLMBENCH_IMAGE=$LLMB_REF"
[[ "${KEY[sim]}" != none ]] \
  || die "step sim: $SIM_BIN missing — run 'bash hack/cluster/build.sh' first"
mkdir -p "$TMP/sim-ctx"
cp "$SIM_BIN" "$TMP/sim-ctx/llm-d-inference-sim"
build_small sim "$TMP/sim-ctx" --build-arg "BASE_IMAGE=$BASE_REF"

# ---- prune ---------------------------------------------------------------------------------
# The archives are what the nodes load; the store keeps only the base (every FROM's parent,
# reloaded from its archive when missing), so it does not grow with every source edit.
for n in base "${NAMES[@]}"; do
  ls -1t "$OUT/$n"-*.tar 2>/dev/null | tail -n +$((KEEP + 1)) | xargs -r rm -f
done
bh images --noheading --format '{{.Name}}:{{.Tag}}' 2>/dev/null | grep -vxF "$BASE_REF" \
  | xargs -r buildah --root "$STORE/root" --runroot "$STORE/run" --storage-driver overlay rmi -f >>"$log" 2>&1 || true
echo "images: built in $(( $(date +%s) - started )) s -> $OUT" >&2
print_list
