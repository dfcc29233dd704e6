#!/usr/bin/env bash
# The whole product on this machine in one command: a Kubernetes cluster (the project's test
# cluster: real API server, scheduler, controllers and CoreDNS; real nodes running containerd,
# the kubelet and kube-proxy), the images built here from the Dockerfile (hack/image/build.sh),
# the operator installed by its Helm chart from that image, llm-d-inference-sim as a 2-GPU
# inference Deployment behind a Service on a GPU node with the simulated dcgm-exporter beside
# it, and a concurrency sweep applied as an LLMBenchmark against the Service. Shows
# `kubectl get llmb` as it progresses and ends with the summary CSV, the knee and where the
# artefacts are.
#
#   bash hack/demo.sh [--dir DIR] [--quick]     # cold: ~20 min to build binaries and images once
#   bash hack/demo.sh --down [--dir DIR]        # stop everything it started
#
# --quick runs a 3-point sweep with fewer requests (what the tests use). A failing step names
# itself and the fix, and tears down what the demo started.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${LLMBENCH_DEMO_DIR:-/tmp/llmbench-demo}"
quick=0
down=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --dir) dir="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --down) down=1; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "demo: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [[ $down == 1 ]]; then
  bash "$root/hack/cluster/down.sh" --dir "$dir"
  exit 0
fi

py="$root/.venv/bin/python"
step="" fix=""
begin() { step="$1"; fix="$2"; echo "== $step"; }
on_error() {
  echo "demo: step '$step' failed; fix: $fix" >&2
  echo "demo: tearing down what it started ($dir)" >&2
  bash "$root/hack/cluster/down.sh" --dir "$dir" >/dev/null 2>&1 || true
}
trap on_error ERR

begin "python environment" "python3 -m venv .venv && .venv/bin/pip install -e '.[operator]'"
if [[ ! -x "$root/.venv/bin/llmbench" ]] || ! "$py" -c "import kopf, kubernetes" 2>/dev/null; then
  python3 -m venv "$root/.venv"
  "$root/.venv/bin/pip" install -q -e "$root[operator]"
fi

begin "cluster binaries" "bash hack/cluster/build.sh (needs Go, the Go module proxy and apt-get as root)"
bash "$root/hack/cluster/build.sh"
helm="${LLMBENCH_CACHE:-$HOME/.cache/llmbench}/helm-v3.22.0/bin/helm"

begin "images" "bash hack/image/build.sh (needs root, the Debian mirror and PyPI); log ~/.cache/llmbench/images/build.log"
images="$(bash "$root/hack/image/build.sh")"
ref() { awk -v n="$1" '$1 == n { print $2 }' <<<"$images"; }
llmbench_image="$(ref llmbench)"

begin "control plane" "bash hack/cluster/down.sh --dir $dir, then run the demo again"
bash "$root/hack/cluster/up.sh" --dir "$dir"
export KUBECONFIG="$dir/admin.kubeconfig"
kubectl get nodes -o wide

begin "operator (Helm chart)" "kubectl -n llmbench-system logs deploy/llmbench-operator"
"$helm" install llmbench-operator "$root/charts/llmbench-operator" -n llmbench-system --create-namespace \
  --set "image.repository=${llmbench_image%:*}" --set "image.tag=${llmbench_image##*:}" \
  --set liveness.initialDelaySeconds=1 --wait --timeout 180s
kubectl -n llmbench-system rollout status deploy/llmbench-operator --timeout=180s

begin "inference simulator" "kubectl -n llm-demo describe deploy/vllm"
sed -e "s|@IMAGE@|$(ref sim)|g" "$root/hack/demo/target.yaml" | kubectl apply -f -
artifacts="$dir/artifacts"
install -d -o 65532 -g 65532 "$artifacts"
sed -e "s|@DIR@|$artifacts|g" "$root/hack/demo/artifacts.yaml" | kubectl apply -f -
kubectl -n llm-demo rollout status deploy/vllm --timeout=180s
pod=$(kubectl -n llm-demo get pods -l app=vllm -o jsonpath='{.items[0].metadata.name}')

begin "dcgm exporter" "kubectl -n llm-demo describe pod dcgm-exporter"
sed -e "s|@IMAGE@|$(ref dcgm)|g" -e "s/@TARGET_POD@/$pod/g" "$root/hack/demo/exporter.yaml" \
  | kubectl apply -f -
kubectl -n llm-demo wait --for=condition=Ready pod/dcgm-exporter --timeout=180s

begin "benchmark" "kubectl -n llm-demo describe llmb demo"
if [[ $quick == 1 ]]; then requests=16 max=4 stop=false; else requests=64 max=32 stop=true; fi
sed -e "s/@REQUESTS@/$requests/g" -e "s/@MAX@/$max/g" -e "s/@STOP@/$stop/g" \
  "$root/hack/demo/benchmark.yaml" | kubectl apply -f -
last="" phase=""
for _ in $(seq 1 600); do
  row=$(kubectl -n llm-demo get llmb demo --no-headers 2>/dev/null || true)
  if [[ -n "$row" && "$row" != "$last" ]]; then
    [[ -z "$last" ]] && kubectl -n llm-demo get llmb demo | awk "NR == 1"  # awk reads all: no SIGPIPE
    echo "$row"
    last="$row"
  fi
  phase=$(kubectl -n llm-demo get llmb demo -o jsonpath='{.status.phase}' 2>/dev/null || true)
  [[ "$phase" == Succeeded || "$phase" == Failed ]] && break
  sleep 1
done
row=$(kubectl -n llm-demo get llmb demo --no-headers 2>/dev/null || true)
[[ "$row" != "$last" ]] && echo "$row"
if [[ "$phase" != Succeeded ]]; then
  kubectl -n llm-demo get llmb demo -o jsonpath='{.status.message}{"\n"}' >&2 || true
  false
fi
trap - ERR

echo
echo "== summary (status.summaryCSV = analyze_export_genai_perf.csv)"
kubectl -n llm-demo get llmb demo -o jsonpath='{.status.summaryCSV}' | tr -d '\r'
echo
echo "== knee"
kubectl -n llm-demo get llmb demo -o jsonpath='{.status.knee.message}{"\n"}'
echo "== max load under SLO"
kubectl -n llm-demo get llmb demo -o jsonpath='{.status.maxUnderSLO.message}{"\n"}'
echo
echo "results: kubectl -n llm-demo get configmap demo-run-1 -o yaml   (every point, the digest)"
echo "== the pods (containers on containerd:// nodes)"
kubectl get pods -A -o wide | awk 'NR == 1 || /llm-demo|llmbench-system/'
kubectl get nodes -o custom-columns=NODE:.metadata.name,RUNTIME:.status.nodeInfo.containerRuntimeVersion
echo "artefacts (spec.artifacts.pvc, every point's GenAI-Perf folder and the HTML report): $artifacts/demo/run-1"
echo "KUBECONFIG=$KUBECONFIG; stop everything: bash hack/demo.sh --down --dir $dir"
