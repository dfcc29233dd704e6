"""The operator as its users run it: ``helm install`` of charts/llmbench-operator.

:class:`Release` is one install: its values, its operator pod (Ready from kopf's ``/healthz``),
the pod's log (``kubectl logs``) for diagnostics, and ``helm uninstall`` waiting until the pod
is gone (so the next module's operator never overlaps it).
"""

from __future__ import annotations

from typing import Any

from tests.charts.helm import CHART, helm, set_args


class Release:
    """One ``helm install`` of the chart; its operator pod's log for diagnostics."""

    def __init__(self, k8s: Any, name: str, namespace: str) -> None:
        self.k8s, self.name, self.namespace = k8s, name, namespace
        self.fullname = f"{name}-llmbench-operator"
        self.selector = f"app.kubernetes.io/instance={name}"
        self.notes = ""

    def helm(self, *args: str, check: bool = True) -> Any:
        return helm(*args, "--namespace", self.namespace, "--kubeconfig",
                    str(self.k8s.kubeconfig), check=check)

    def install(self, **values: Any) -> None:
        out = self.helm("install", self.name, str(CHART), *set_args(values))
        self.notes = out.stdout

    def uninstall(self) -> None:
        self.helm("uninstall", self.name, "--wait", "--timeout", "60s", check=False)
        self.k8s.wait_for(
            "the operator pod to be gone", lambda: not self.k8s.pods(self.namespace, self.selector),
            60,
        )

    def pod(self) -> dict[str, Any]:
        pods = self.k8s.pods(self.namespace, self.selector)
        return dict(pods[0]) if pods else {}

    def ready(self) -> dict[str, Any]:
        def is_ready() -> dict[str, Any] | None:
            pod = self.pod()
            conditions = (pod.get("status") or {}).get("conditions") or []
            ok = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            return pod if ok else None

        return dict(self.k8s.wait_for(
            "the operator pod to be Ready (kopf's /healthz)", is_ready, 90, diag=self.diag,
        ))

    def log(self) -> str:
        """The operator pod's whole output."""
        out = self.k8s.kubectl("logs", "-n", self.namespace, "-l", self.selector,
                               "--tail", "-1", check=False)
        return out.stdout + out.stderr

    def tail(self, n: int = 6000) -> str:
        """The end of the operator's output (what wait_phase shows when it times out)."""
        return self.log()[-n:]

    def assert_nothing_forbidden(self) -> None:
        """The chart's RBAC let the operator do everything it tried (no 403 in its log)."""
        lines = [line for line in self.log().splitlines() if "aiohttp.access" not in line]
        bad = [line for line in lines if "403" in line or "orbidden" in line]
        assert lines and not bad, "\n".join(bad)

    def diag(self) -> str:
        return f"{self.k8s.describe(self.namespace)}\n--- operator log ---\n{self.tail()}"
