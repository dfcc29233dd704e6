"""The operator as its users run it: ``helm install`` of charts/llmbench-operator.

:class:`Release` is one install: its values, its operator pod (Ready from kopf's ``/healthz``),
the pod's log (``kubectl logs``) for diagnostics, and ``helm uninstall`` waiting until the pod
is gone (so the next module's operator never overlaps it). The operator runs in its pod from
the image ``hack/image/build.sh`` built (:func:`image_values`) with the chart's
ServiceAccount token and RBAC, nothing else; its runner Jobs run the same image.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any

from tests.charts.helm import CHART, helm, set_args

OPERATOR_NS = "llmbench-system"


def image_values(k8s: Any) -> dict[str, Any]:
    """The chart values that select the built llmbench image (present on every node)."""
    repository, _, tag = k8s.image("llmbench").rpartition(":")
    return {"image.repository": repository, "image.tag": tag}


def operator_values(k8s: Any, **values: Any) -> dict[str, Any]:
    """What the e2e operators run with: the built image, a fast first retry and probe."""
    return {**image_values(k8s), "retryDelaySeconds": 0.5, "liveness.initialDelaySeconds": 1,
            "metrics.port": 0, **values}


class Release:
    """One ``helm install`` of the chart; its operator pod's log for diagnostics."""

    def __init__(self, k8s: Any, name: str, namespace: str) -> None:
        self.k8s, self.name, self.namespace = k8s, name, namespace
        self.fullname = f"{name}-llmbench-operator"
        self.selector = f"app.kubernetes.io/instance={name}"
        self.notes = ""
        self.ready_seconds = 0.0

    def helm(self, *args: str, check: bool = True) -> Any:
        return helm(*args, "--namespace", self.namespace, "--kubeconfig",
                    str(self.k8s.kubeconfig), check=check)

    def install(self, **values: Any) -> None:
        out = self.helm("install", self.name, str(CHART), *set_args(values))
        self.notes = out.stdout

    def restart(self) -> dict[str, Any]:
        """Kills the operator pod at once (no grace: a crash, not a shutdown) and waits for
        the Deployment's next pod to be Ready; returns it."""
        old = self.pod()["metadata"]["name"]
        self.k8s.kubectl("delete", "pod", old, "-n", self.namespace, "--grace-period=0",
                         "--force", "--wait=false")
        self.k8s.wait_for("the killed operator pod to be replaced",
                          lambda: self.pod().get("metadata", {}).get("name") not in (None, old),
                          60, diag=self.diag)
        return self.ready()

    def patch_pod(self, patch: list[dict[str, Any]]) -> dict[str, Any]:
        """A JSON patch of the Deployment's pod template (what a user's values overlay would
        do), rolled out; returns the new Ready pod."""
        old = self.pod()["metadata"]["name"]
        self.k8s.kubectl("patch", "deployment", self.fullname, "-n", self.namespace,
                         "--type", "json", "-p", json.dumps(patch))
        self.k8s.wait_for("the patched operator pod",
                          lambda: self.pod().get("metadata", {}).get("name") not in (None, old),
                          90, diag=self.diag)
        return self.ready()

    def uninstall(self) -> None:
        self.helm("uninstall", self.name, "--wait", "--timeout", "60s", check=False)
        self.k8s.wait_for(
            "the operator pod to be gone", lambda: not self.k8s.pods(self.namespace, self.selector),
            60,
        )

    def pod(self) -> dict[str, Any]:
        """The operator pod (the newest one that is not being deleted)."""
        pods = [p for p in self.k8s.pods(self.namespace, self.selector)
                if not p["metadata"].get("deletionTimestamp")]
        pods.sort(key=lambda p: p["metadata"]["creationTimestamp"])
        return dict(pods[-1]) if pods else {}

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
        """The operator pod's whole output (``kubectl logs``, as a user reads it)."""
        out = self.k8s.kubectl("logs", "-n", self.namespace, "-l", self.selector,
                               "--tail", "-1", "--prefix=false", check=False)
        return out.stdout + out.stderr

    def tail(self, n: int = 6000) -> str:
        """The end of the operator's output (what wait_phase shows when it times out)."""
        return self.log()[-n:]

    def assert_nothing_forbidden(self) -> None:
        """The chart's RBAC let the operator do everything it tried (no 403 in its log)."""
        lines = [line for line in self.log().splitlines() if "aiohttp.access" not in line]
        bad = forbidden_lines(lines)
        assert lines and not bad, "\n".join(bad)

    def diag(self) -> str:
        return f"{self.k8s.describe(self.namespace)}\n--- operator log ---\n{self.tail()}"


#: A refusal in a log line: the status code 403 as a token of its own (``(403)``,
#: ``'code': 403``, ``status=403``, ``403 Forbidden``; not the digits inside a uid, a
#: resourceVersion or ``0.403 s``), or Forbidden/forbidden anywhere (``APIForbiddenError``).
FORBIDDEN = re.compile(r"(?<![\w.-])403(?![\w.-])|[Ff]orbidden")


def forbidden_lines(lines: list[str]) -> list[str]:
    """The lines of an operator log that report a refusal (:data:`FORBIDDEN`)."""
    return [line for line in lines if FORBIDDEN.search(line)]


def installed(k8s: Any, name: str = "e2e", namespace: str = OPERATOR_NS,
              **values: Any) -> Iterator[Release]:
    """A generator for fixtures: the chart installed with :func:`operator_values` and Ready, then
    uninstalled (the pod gone) when the fixture ends."""
    if k8s.get("namespace", namespace) is None:
        k8s.kubectl("create", "namespace", namespace)
    rel = Release(k8s, name, namespace)
    t0 = time.monotonic()
    rel.install(**operator_values(k8s, **values))
    try:
        rel.ready()
        rel.ready_seconds = time.monotonic() - t0
        yield rel
    finally:
        rel.uninstall()
