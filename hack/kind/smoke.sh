#!/usr/bin/env bash
# Smoke check of a running hack/kind cluster (hack/kind/up.sh): what only real nodes show.
# Builds a scratch image of llm-d-inference-sim (hack/cluster/build.sh's binary), loads it and
# the Debian base into the nodes, applies hack/kind/smoke.yaml and checks that
#   - the client pod runs as uid 65532 and cannot write its read-only root,
#   - it gets HTTP 200 from the simulator through the ClusterIP Service, by DNS name, across
#     nodes (zone-b -> the H100 node, where the simulator holds 2 nvidia.com/gpu),
#   - the node itself reaches the Service's ClusterIP (kube-proxy's rules),
#   - a pod writes to a local-path PersistentVolumeClaim.
# Deletes its namespace at the end; prints each check's result.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
source "$here/env.sh"
ensure_docker
export KUBECONFIG="$KIND_KUBECONFIG"
K="$KCACHE/k8s-$K8S_VERSION/bin/kubectl"
SIM="$CACHE/llm-d-inference-sim-${LLMBENCH_SIM_VERSION:-v0.10.2}/bin/llm-d-inference-sim"
[[ -x "$SIM" ]] || die "step sim: no $SIM — run hack/cluster/build.sh"
ctx="$(mktemp -d)"
trap 'rm -rf "$ctx"' EXIT
cp "$SIM" "$ctx/"
printf 'FROM scratch\nCOPY llm-d-inference-sim /llm-d-inference-sim\nUSER 65532:65532\nENTRYPOINT ["/llm-d-inference-sim"]\n' >"$ctx/Dockerfile"
docker build -q --network none -t llmbench-kind/sim:smoke "$ctx" >/dev/null
"$KIND_BIN" load docker-image --name "$KIND_CLUSTER" llmbench-kind/sim:smoke llmbench-kind/debian:bookworm >/dev/null

"$K" apply -f "$here/smoke.yaml" >/dev/null
fail=0
check() { if "$@"; then echo "ok   $desc"; else echo "FAIL $desc"; fail=1; fi; }
"$K" -n kind-smoke wait --for=jsonpath='{.status.phase}'=Succeeded pod/client pod/writer --timeout=300s >/dev/null || true
log="$("$K" -n kind-smoke logs client 2>&1 || true)"
desc="client pod runs as uid 65532"; check grep -q '^uid=65532 ' <<<"$log"
desc="client pod's root filesystem is read-only"; check grep -q '^root fs read-only' <<<"$log"
desc="HTTP 200 from the simulator via sim.kind-smoke.svc.cluster.local (ClusterIP, other node)"; check grep -q '^HTTP/1.1 200' <<<"$log"
ip="$("$K" -n kind-smoke get svc sim -o jsonpath='{.spec.clusterIP}')"
node="$("$K" -n kind-smoke get pod client -o jsonpath='{.spec.nodeName}')"
desc="node $node reaches ClusterIP $ip (curl on the node)"
check docker exec "$node" curl -sf -o /dev/null "http://$ip/v1/models"
desc="pod writes to a local-path PVC"; check grep -qx hello <<<"$("$K" -n kind-smoke logs writer 2>&1 || true)"
"$K" delete namespace kind-smoke --wait=false >/dev/null
(( fail == 0 )) || die "a check failed (client log: $(tr '\n' ' ' <<<"$log" | cut -c1-300))"
say "all checks passed"
