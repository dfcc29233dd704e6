"""GitOps and the operator on the project's control plane (docs/gitops.md).

A GitOps controller applies the manifest server-side under its own field manager (here
``argocd-controller``, as Argo CD's server-side apply does); the operator writes only
``status`` (through the status subresource) and its own objects. So re-applying the same
manifest changes nothing and starts nothing, the second apply needs no ``--force-conflicts``,
the managers own disjoint fields, and a changed spec runs again under a new run number.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
import yaml

from tests.e2e.release import Release
from tests.e2e.test_operator import (  # noqa: F401  (operator: a pytest fixture)
    Target,
    benchmark,
    diag,
    operator,
    status,
    wait_phase,
)

pytestmark = pytest.mark.e2e

MANAGER = "argocd-controller"


def apply_server_side(k8s: Any, obj: dict[str, Any]) -> str:
    """``kubectl apply --server-side`` as the GitOps controller, never forcing conflicts."""
    r = k8s.kubectl("apply", "--server-side", f"--field-manager={MANAGER}", "-f", "-",
                    input=yaml.safe_dump(obj), check=False)
    assert r.returncode == 0, f"server-side apply refused (conflict?): {r.stderr}"
    return str(r.stdout)


def read(k8s: Any, namespace: str) -> dict[str, Any]:
    """The benchmark through the API, managedFields included (kubectl hides them)."""
    return dict(k8s.custom.get_namespaced_custom_object(
        "llmbench.io", "v1alpha1", namespace, "llmbenchmarks", "nightly"))


def owned(entry: dict[str, Any]) -> set[str]:
    """The top-level fields a managedFields entry owns (``f:spec``, ``f:status``, ...)."""
    return set((entry.get("fieldsV1") or {}).keys())


def test_gitops_reapply_is_a_no_op_and_a_new_spec_runs_again(
    k8s: Any, namespace: str, operator: Release  # noqa: F811
) -> None:
    target = Target(k8s, namespace)
    target.deploy()
    ref = target.ref
    tiny = {"telemetry": {"dcgm": "off"}, "sweep": {"type": "concurrency", "values": [1]},
            "load": {"requestCount": 8, "warmupRequestCount": 0}}
    manifest = benchmark("nightly", namespace, ref, **tiny)

    apply_server_side(k8s, manifest)
    st = wait_phase(k8s, namespace, "nightly", operator, ("Succeeded", "Failed"))
    assert st["phase"] == "Succeeded" and st["run"] == 1, json.dumps(st, indent=1)
    before = read(k8s, namespace)
    generation = before["metadata"]["generation"]
    assert st["observedGeneration"] == generation

    # the GitOps controller syncs again: the same manifest, the same manager, no force
    apply_server_side(k8s, manifest)
    after = read(k8s, namespace)
    assert after["metadata"]["generation"] == generation
    # a no-op apply leaves the manager's entry as it was (the operator may still be writing
    # status, so resourceVersion proves nothing here)
    entry = [f for f in before["metadata"]["managedFields"] if f["manager"] == MANAGER]
    assert entry == [f for f in after["metadata"]["managedFields"] if f["manager"] == MANAGER]
    # nothing starts: watched for a few seconds through the API
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        now = status(k8s, namespace, "nightly")
        assert now["run"] == 1 and now["phase"] == "Succeeded", json.dumps(now, indent=1)
        assert k8s.get("job", "nightly-run-2", namespace) is None
        time.sleep(0.5)
    jobs = k8s.kubectl("get", "jobs", "-n", namespace, "-o", "name").stdout.split()
    assert jobs == ["job.batch/nightly-run-1"]

    # who owns what: the GitOps manager the spec, the operator status (and kopf its own
    # annotations/finalizers in metadata), so neither ever overwrites the other
    fields = after["metadata"]["managedFields"]
    shown = json.dumps(fields, indent=1)
    gitops = [f for f in fields if f["manager"] == MANAGER]
    assert len(gitops) == 1, shown
    assert gitops[0]["operation"] == "Apply" and "subresource" not in gitops[0], shown
    assert "f:spec" in owned(gitops[0]) and owned(gitops[0]) <= {"f:spec", "f:metadata"}, shown
    others = [f for f in fields if f["manager"] != MANAGER]
    assert others, shown
    for f in others:
        assert "f:spec" not in owned(f), f"{f['manager']} owns spec fields:\n{shown}"
        if f.get("subresource") == "status":
            assert owned(f) == {"f:status"}, shown
        else:  # kopf: its own annotations
            assert owned(f) <= {"f:metadata"}, shown
    assert any(f.get("subresource") == "status" and f["manager"] == "llmbench-operator"
               for f in others), shown

    # a changed spec in Git: the same manager applies it, and run 2 measures it
    changed = benchmark("nightly", namespace, ref, **{**tiny, "load": {
        "requestCount": 6, "warmupRequestCount": 0}})
    apply_server_side(k8s, changed)
    obj = k8s.get("llmb", "nightly", namespace)
    assert obj["metadata"]["generation"] == generation + 1
    st = k8s.wait_for(
        "run 2 to finish",
        lambda: (s := status(k8s, namespace, "nightly")).get("run") == 2
        and s.get("phase") in ("Succeeded", "Failed") and s,
        180, interval=0.5, diag=diag(k8s, namespace, operator),
    )
    assert st["phase"] == "Succeeded", json.dumps(st, indent=1)
    assert st["observedGeneration"] == generation + 1
    assert k8s.get("job", "nightly-run-2", namespace) is not None
    spec = k8s.get("llmb", "nightly", namespace)["spec"]
    assert spec["load"]["requestCount"] == 6  # the operator never wrote the spec back
