"""The GitOps health checks of ``examples/gitops/``, run for real against status fixtures.

The Argo CD check is a Lua script: it runs here in Lua 5.1 (``lupa.lua51``; Argo CD embeds
gopher-lua, a Lua 5.1), with the resource as the global ``obj`` as Argo CD passes it, and
must return ``hs`` with ``status`` and ``message``. The Flux check is three CEL expressions
(``healthCheckExprs``: ``inProgress``, ``failed``, ``current``, evaluated in that order, the
first true one wins): they run here with cel-python, the resource's top-level fields as the
variables, as kustomize-controller passes them. Both must give the same verdict for every
status the operator writes (``docs/gitops.md``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import lupa.lua51 as lua51  # type: ignore[import-untyped]
import pytest
import yaml
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

ROOT = Path(__file__).resolve().parents[1]
LUA = (ROOT / "examples" / "gitops" / "argocd-health.lua").read_text()
FLUX = yaml.safe_load((ROOT / "examples" / "gitops" / "flux-kustomization.yaml").read_text())


def c(type_: str, status: str, reason: str = "R", message: str = "") -> dict[str, str]:
    return {"type": type_, "status": status, "reason": reason, "message": message}


def benchmark(status: dict[str, Any] | None, generation: int = 1) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "llmbench.io/v1alpha1",
        "kind": "LLMBenchmark",
        "metadata": {"name": "b", "namespace": "llm", "generation": generation},
        "spec": {"target": {"model": "m", "url": "http://vllm:8000"}},
    }
    if status is not None:
        obj["status"] = status
    return obj


VALID = c("MeasurementValid", "True", "Valid", "no validity warning")
ACCEPTED = c("Accepted", "True", "Valid", "the spec is valid")
DONE = {"phase": "Succeeded", "run": 3, "observedGeneration": 1}

# name -> (resource, Argo CD health, a word of the message)
CASES: dict[str, tuple[dict[str, Any], str, str]] = {
    "succeeded-valid": (
        benchmark({**DONE, "conditions": [ACCEPTED, c("Succeeded", "True"), VALID]}),
        "Healthy", "run 3",
    ),
    "succeeded-valid-not-regressed": (
        benchmark({**DONE, "conditions": [ACCEPTED, VALID, c("Regressed", "False")]}),
        "Healthy", "valid",
    ),
    "succeeded-valid-regression-unknown": (
        benchmark({**DONE, "conditions": [VALID, c("Regressed", "Unknown", "NoBaseline")]}),
        "Healthy", "valid",
    ),
    "regressed": (
        benchmark({**DONE, "conditions": [VALID, c(
            "Regressed", "True", "Regressed", "max OTT under SLO 1800 -> 1500 (-16.7 %)")]}),
        "Degraded", "-16.7 %",
    ),
    "invalid-measurement": (
        benchmark({**DONE, "conditions": [c(
            "MeasurementValid", "False", "ValidityWarnings", "foreign traffic")]}),
        "Degraded", "foreign traffic",
    ),
    "succeeded-without-validity": (
        benchmark({**DONE, "conditions": [ACCEPTED]}), "Degraded", "MeasurementValid",
    ),
    "failed": (
        benchmark({"phase": "Failed", "run": 1, "observedGeneration": 1,
                   "message": "2 point(s) failed", "conditions": [c("Succeeded", "False")]}),
        "Degraded", "point(s) failed",
    ),
    "not-accepted": (
        benchmark({"phase": "Failed", "run": 1, "observedGeneration": 1, "conditions": [
            c("Accepted", "False", "InvalidSpec", "spec.schedule never fires")]}),
        "Degraded", "spec.schedule",
    ),
    "not-accepted-before-phase-update": (
        benchmark({"phase": "Pending", "run": 1, "observedGeneration": 1, "conditions": [
            c("Accepted", "False", "InvalidSpec", "spec.schedule never fires")]}),
        "Degraded", "spec.schedule",
    ),
    "new": (benchmark(None), "Progressing", "operator"),
    "empty-status": (benchmark({}), "Progressing", "operator"),
    "pending-target": (
        benchmark({"phase": "Pending", "run": 1, "observedGeneration": 1,
                   "message": "Service llm/vllm does not exist",
                   "conditions": [c("TargetReady", "False", "ServiceNotFound")]}),
        "Progressing", "does not exist",
    ),
    "queued": (
        benchmark({"phase": "Queued", "run": 1, "observedGeneration": 1,
                   "queuedBehind": "llm/other"}),
        "Progressing", "Queued",
    ),
    "running": (
        benchmark({"phase": "Running", "run": 2, "observedGeneration": 1, "progress": "2/6",
                   "message": "the sweep is running",
                   "conditions": [ACCEPTED, c("Running", "True"), VALID]}),
        "Progressing", "running",
    ),
    # the spec changed (generation 2) and the last verdict was for generation 1: a new run is
    # due, so neither the old green nor the old red stands
    "spec-changed-after-success": (
        benchmark({**DONE, "conditions": [VALID]}, generation=2), "Progressing", "new spec",
    ),
    "spec-changed-after-regression": (
        benchmark({**DONE, "conditions": [VALID, c("Regressed", "True")]}, generation=2),
        "Progressing", "new spec",
    ),
    "spec-changed-during-run": (
        benchmark({"phase": "Running", "run": 1, "observedGeneration": 1, "job": "b-run-1",
                   "message": "the spec changed during run 1; it runs when this run finishes"},
                  generation=2),
        "Progressing", "when this run finishes",
    ),
}


def to_lua(rt: Any, value: Any) -> Any:
    """JSON as Argo CD hands it to Lua: objects and arrays become tables (arrays 1-based)."""
    if isinstance(value, dict):
        return rt.table_from({k: to_lua(rt, v) for k, v in value.items()})
    if isinstance(value, list):
        return rt.table_from([to_lua(rt, v) for v in value])
    return value


def argocd_health(obj: dict[str, Any]) -> tuple[str, str]:
    rt = lua51.LuaRuntime(unpack_returned_tuples=True)
    rt.globals().obj = to_lua(rt, obj)
    hs = rt.execute(LUA)
    assert hs is not None, "the script returned nothing"
    return str(hs["status"]), str(hs["message"])


def flux_health(obj: dict[str, Any]) -> str:
    """kustomize-controller's order: inProgress, failed, current; none true: still waiting."""
    (exprs,) = [e for e in FLUX["spec"]["healthCheckExprs"] if e["kind"] == "LLMBenchmark"]
    env = celpy.Environment()
    activation = {k: json_to_cel(v) for k, v in obj.items()}
    for key, verdict in (("inProgress", "InProgress"), ("failed", "Failed"),
                         ("current", "Current")):
        result = env.program(env.compile(exprs[key])).evaluate(activation)
        if isinstance(result, CELEvalError):
            # Flux waits (until its timeout) on an expression that errors: only a resource
            # without status yet may do that
            assert "status" not in obj, (key, result)
            return "InProgress"
        if result:
            return verdict
    return "InProgress"


FLUX_OF = {"Healthy": "Current", "Degraded": "Failed", "Progressing": "InProgress"}


@pytest.mark.parametrize("case", list(CASES))
def test_argocd_lua_health_check(case: str) -> None:
    obj, want, word = CASES[case]
    got, message = argocd_health(obj)
    assert got == want, (case, got, message)
    assert word in message, (case, message)


@pytest.mark.parametrize("case", list(CASES))
def test_flux_cel_health_check_agrees_with_argocd(case: str) -> None:
    obj, want, _ = CASES[case]
    assert flux_health(obj) == FLUX_OF[want], case


def test_the_flux_snippet_checks_the_shipped_benchmarks() -> None:
    spec = FLUX["spec"]
    assert (FLUX["apiVersion"], FLUX["kind"]) == ("kustomize.toolkit.fluxcd.io/v1", "Kustomization")
    shipped = {
        (d["metadata"]["namespace"], d["metadata"]["name"])
        for f in yaml.safe_load((ROOT / "examples" / "kustomization.yaml").read_text())[
            "resources"]
        for d in yaml.safe_load_all((ROOT / "examples" / f).read_text())
        if d and d.get("kind") == "LLMBenchmark"
    }
    checked = {(h["namespace"], h["name"]) for h in spec["healthChecks"]
               if h["kind"] == "LLMBenchmark"}
    assert checked == shipped
    assert spec["path"] == "./examples"


def test_the_docs_carry_the_same_lua_script() -> None:
    doc = (ROOT / "docs" / "gitops.md").read_text()
    assert "resource.customizations.health.llmbench.io_LLMBenchmark" in doc
    # every line of the script appears in the argocd-cm block of the page
    for line in LUA.splitlines():
        if line.strip() and not line.startswith("--"):
            assert line in doc, line
