#!/usr/bin/env bash
# Renders deploy/operator-rbac.yaml (the operator's Namespace, ServiceAccount, ClusterRole and
# binding for `kubectl apply`, without helm, and the two ClusterRoles aggregated into the default
# view and edit roles) from the chart, whose files/rbac/*.yaml are the one
# source of the operator's RBAC rules; with --admission, deploy/admission-policy.yaml (the
# ValidatingAdmissionPolicy that checks the creator's rights, and its binding). tests/charts/test_chart.py fails when either file differs.
#
# Usage: bash hack/render-rbac.sh > deploy/operator-rbac.yaml
#        bash hack/render-rbac.sh --admission > deploy/admission-policy.yaml
# helm: $HELM, else the one hack/cluster/build.sh caches, else helm on PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${LLMBENCH_CACHE:-$HOME/.cache/llmbench}"
HELM="${HELM:-$CACHE/helm-${LLMBENCH_HELM_VERSION:-v3.22.0}/bin/helm}"
if [[ ! -x "$HELM" ]]; then
  HELM="$(command -v helm || true)"
  [[ -n "$HELM" ]] || { echo "hack/render-rbac.sh: no helm — run 'bash hack/cluster/build.sh'" >&2; exit 1; }
fi
if [[ "${1:-}" == --admission ]]; then
  cat <<'HEADER'
# Authorization at admission for `kubectl apply` without helm (docs/security.md): refuses an
# LLMBenchmark whose creator lacks the rights its apiKeySecretRef, runner.image or cross-namespace
# target.service stand for. Kubernetes 1.30+. Generated from charts/llmbench-operator
# (templates/admission.yaml); do not edit. Regenerate:
#   bash hack/render-rbac.sh --admission > deploy/admission-policy.yaml
# The runner images anyone may name are the variable allowedImages (a CEL list of strings; a
# trailing '*' matches a prefix); the operator's --allowed-runner-images should repeat them.
HEADER
  exec "$HELM" template llmbench-operator charts/llmbench-operator --namespace llmbench-system \
    --show-only templates/admission.yaml 2> >(grep -v 'found symbolic link in path' >&2)
fi
cat <<'HEADER'
# The operator's identity and exactly the API calls it makes, for `kubectl apply` without helm.
# Generated from charts/llmbench-operator (rules: its files/rbac/*.yaml, which
# tests/operator/test_rbac.py compares with llmbench/operator/kube.py); do not edit.
# Regenerate: bash hack/render-rbac.sh > deploy/operator-rbac.yaml
# Apply after the CRD: kubectl apply -f crds/ -f deploy/operator-rbac.yaml
# It also aggregates LLMBenchmarks into Kubernetes' default view and edit roles (get/list/watch;
# edit adds create/update/patch/delete, never status): whoever holds those roles in a namespace
# may read or write its benchmarks. Remove the two *-view/*-edit ClusterRoles to grant them yourself.
apiVersion: v1
kind: Namespace
metadata:
  name: llmbench-system
HEADER
"$HELM" template llmbench-operator charts/llmbench-operator --namespace llmbench-system \
  --show-only templates/serviceaccount.yaml --show-only templates/rbac.yaml \
  --show-only templates/aggregate-roles.yaml 2> >(grep -v 'found symbolic link in path' >&2)
