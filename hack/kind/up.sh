#!/usr/bin/env bash
# Start the llmbench kind cluster (hack/kind/cluster.yaml) from the node image that
# hack/kind/build.sh builds (it runs first; warm it takes seconds). Advertises nvidia.com/gpu
# on the GPU nodes, waits for every node and kube-system pod, prints the times, the memory of
# the node containers and the KUBECONFIG to export. Idempotent: an existing cluster is reused.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
start=$(date +%s)
bash "$here/build.sh"
built=$(date +%s)
ensure_docker
NODE_IMAGE="$(cat "$NODE_IMAGE_FILE")"
KUBECTL="$KCACHE/k8s-$K8S_VERSION/bin/kubectl"
export KUBECONFIG="$KIND_KUBECONFIG"

if "$KIND_BIN" get clusters 2>/dev/null | grep -qx "$KIND_CLUSTER"; then
  say "cluster $KIND_CLUSTER exists; reusing it"
  "$KIND_BIN" export kubeconfig --name "$KIND_CLUSTER" --kubeconfig "$KIND_KUBECONFIG" >/dev/null
else
  say "kind create cluster --name $KIND_CLUSTER --image $NODE_IMAGE (config hack/kind/cluster.yaml)"
  "$KIND_BIN" create cluster --name "$KIND_CLUSTER" --image "$NODE_IMAGE" --config "$here/cluster.yaml" \
      --kubeconfig "$KIND_KUBECONFIG" --wait 10m >"$KCACHE/create.log" 2>&1 \
    || die "step create: kind create cluster failed (see $KCACHE/create.log: $(grep -m1 -iE 'error|fail' "$KCACHE/create.log")); 'kind export logs --name $KIND_CLUSTER' has the node logs"
fi
created=$(date +%s)

# Extended resources are advertised by patching node status capacity (no device plugin).
for n in $("$KUBECTL" get nodes -l nvidia.com/gpu.count -o name); do
  count="$("$KUBECTL" get "$n" -o jsonpath='{.metadata.labels.nvidia\.com/gpu\.count}')"
  "$KUBECTL" patch "$n" --subresource=status --type=json \
    -p "[{\"op\":\"add\",\"path\":\"/status/capacity/nvidia.com~1gpu\",\"value\":\"$count\"}]" >/dev/null \
    || die "step gpu: patching $n status capacity nvidia.com/gpu=$count failed"
done
"$KUBECTL" wait --for=condition=Ready nodes --all --timeout=5m >/dev/null \
  || die "step ready: not every node is Ready after 5 min ($KUBECTL get nodes)"
"$KUBECTL" -n kube-system wait --for=condition=Ready pods --all --timeout=5m >/dev/null \
  || die "step ready: kube-system pods not Ready after 5 min ($KUBECTL -n kube-system get pods)"
ready=$(date +%s)

say "build $((built - start)) s, create $((created - built)) s, ready $((ready - created)) s, total $((ready - start)) s"
"$KUBECTL" get nodes -L topology.kubernetes.io/zone,nvidia.com/gpu.product \
  -o custom-columns='NAME:.metadata.name,STATUS:.status.conditions[-1].type,ZONE:.metadata.labels.topology\.kubernetes\.io/zone,GPU:.status.allocatable.nvidia\.com/gpu,RUNTIME:.status.nodeInfo.containerRuntimeVersion'
docker stats --no-stream --format '{{.Name}} {{.MemUsage}}' $(docker ps -q --filter "label=io.x-k8s.kind.cluster=$KIND_CLUSTER")
echo "export KUBECONFIG=$KIND_KUBECONFIG"
