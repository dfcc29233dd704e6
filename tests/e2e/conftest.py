"""e2e fixtures: a real Kubernetes cluster for the whole session.

By default the session starts the project's own cluster (tests/cluster: etcd, kube-apiserver,
kube-controller-manager, kube-scheduler, CoreDNS, and three real nodes — containerd, the
kubelet and kube-proxy each — in a private network of their own; binaries from
``hack/cluster/build.sh``, images from ``hack/image/build.sh``). With
``LLMBENCH_E2E_KUBECONFIG=/path/to/kubeconfig`` the same tests run against that cluster instead
(kind, a dev cluster: load the archives ``hack/image/build.sh`` prints, e.g. ``kind load
image-archive``) and nothing is started.

If the cluster cannot start, every e2e test fails with the reason: nothing is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.cluster import Cluster, ClusterError
from tests.cluster.images import built_images, refs

REPO_ROOT = Path(__file__).resolve().parents[2]

KUBECTL = os.environ.get("KUBECTL", "kubectl")
#: The names ``K8s.get`` reads through the API client instead of a kubectl process.
BENCHMARK_KINDS = frozenset({"llmbenchmark", "llmbenchmarks", "llmb"})


@dataclass
class K8s:
    """What an e2e test gets: the admin kubeconfig plus small helpers."""

    kubeconfig: Path
    cluster: Cluster | None = None  # None when running against LLMBENCH_E2E_KUBECONFIG
    _api: Any = field(default=None, repr=False)
    _images: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def local(self) -> bool:
        return self.cluster is not None

    def image(self, name: str) -> str:
        """The reference of a built image: ``llmbench`` (the product, with ``python``),
        ``sim`` (llm-d-inference-sim), ``dcgm`` (the simulated dcgm-exporter)."""
        if not self._images:
            self._images = refs()
        return self._images[name]

    def pinned_image(self, name: str) -> str:
        """The same image by its content-keyed tag (``localhost/llmbench:<key>``, which the
        archive also carries): another reference that every node has."""
        image = built_images(build=False)[name]
        return f"{image.ref.rpartition(':')[0]}:{image.key.split('-', 1)[1]}"

    @property
    def api_client(self):
        if self._api is None:
            from kubernetes import config

            self._api = config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._api

    @property
    def core(self):
        from kubernetes import client

        return client.CoreV1Api(self.api_client)

    @property
    def batch(self):
        from kubernetes import client

        return client.BatchV1Api(self.api_client)

    @property
    def apps(self):
        from kubernetes import client

        return client.AppsV1Api(self.api_client)

    @property
    def rbac(self):
        from kubernetes import client

        return client.RbacAuthorizationV1Api(self.api_client)

    @property
    def custom(self):
        from kubernetes import client

        return client.CustomObjectsApi(self.api_client)

    @property
    def ext(self):
        from kubernetes import client

        return client.ApiextensionsV1Api(self.api_client)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        r = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({r.returncode}): {r.stderr}")
        return r

    def apply(self, obj: dict | list[dict], namespace: str | None = None) -> None:
        objs = obj if isinstance(obj, list) else [obj]
        doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": objs})
        self.kubectl("apply", *(["-n", namespace] if namespace else []), "-f", "-", input=doc)

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict | None:
        if kind in BENCHMARK_KINDS and namespace:
            return self.benchmark(name, namespace)
        r = self.kubectl(
            "get", kind, name, "-o", "json", *(["-n", namespace] if namespace else []), check=False
        )
        if r.returncode != 0:
            if "NotFound" in r.stderr:
                return None
            raise AssertionError(f"kubectl get {kind} {name}: {r.stderr}")
        return json.loads(r.stdout)

    def benchmark(self, name: str, namespace: str) -> dict | None:
        """One LLMBenchmark through the API client: the tests poll it several times a second
        while a run measures, and a ``kubectl`` process per look (about 0.1 s of CPU each) was a
        steady part of what the runner's event loop competed with on this 2-core machine."""
        from kubernetes.client.exceptions import ApiException

        try:
            obj = self.custom.get_namespaced_custom_object(
                "llmbench.io", "v1alpha1", namespace, "llmbenchmarks", name, _request_timeout=30
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise AssertionError(f"get llmbenchmark {namespace}/{name}: {exc}") from exc
        return dict(obj)

    def pods(self, namespace: str, selector: str) -> list[dict]:
        r = self.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json")
        return json.loads(r.stdout)["items"]

    def wait_for(
        self,
        what: str,
        fn: Callable[[], Any],
        timeout: float = 60,
        interval: float = 0.25,
        diag: Callable[[], str] | None = None,
    ) -> Any:
        """Polls fn until it returns something truthy; fails with what + diagnostics."""
        deadline = time.monotonic() + timeout
        while True:
            val = fn()
            if val:
                return val
            if time.monotonic() > deadline:
                extra = ""
                if diag is not None:
                    try:
                        extra = "\n" + diag()
                    except Exception as exc:  # diagnostics must not hide the timeout
                        extra = f"\n(diagnostics failed: {exc})"
                raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}{extra}")
            time.sleep(interval)

    def describe(self, namespace: str) -> str:
        out = self.kubectl("get", "all,events", "-n", namespace, "-o", "wide", check=False).stdout
        if self.cluster is not None:
            for name in self.cluster.pids:
                if name.startswith("kubelet"):
                    out += f"\n--- {name} log tail ---\n" + self.cluster.log_tail(name, 2000)
        return out


_start_error: str | None = None


@pytest.fixture(scope="session")
def k8s_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[K8s]:
    global _start_error
    external = os.environ.get("LLMBENCH_E2E_KUBECONFIG")
    if external:
        path = Path(external)
        if not path.is_file():
            pytest.fail(
                f"LLMBENCH_E2E_KUBECONFIG={external} does not name a kubeconfig file", pytrace=False
            )
        yield K8s(kubeconfig=path)
        return
    if _start_error:
        pytest.fail(_start_error, pytrace=False)
    workdir = tmp_path_factory.mktemp("k8s")
    cluster = Cluster(workdir=workdir, tie_to_parent=True)
    try:
        cluster.start()
    except ClusterError as exc:
        _start_error = f"test cluster did not start: {exc}"
        pytest.fail(_start_error, pytrace=False)
    rss = cluster.total_rss()
    sys.stderr.write(
        f"\n[k8s_cluster] {cluster.server} up in {cluster.start_seconds:.1f} s "
        f"({', '.join(f'{k} {v}' for k, v in cluster.phases.items())}), "
        f"total RSS {rss / 2**20:.0f} MiB; workdir {workdir}\n"
    )
    try:
        yield K8s(kubeconfig=cluster.kubeconfig, cluster=cluster)
    finally:
        cluster.stop()


@pytest.fixture
def k8s(k8s_cluster: K8s) -> K8s:
    return k8s_cluster


CRD_FILE = REPO_ROOT / "crds" / "llmbench.io_llmbenchmarks.yaml"


@pytest.fixture(scope="session")
def crd_installed(k8s_cluster: K8s) -> K8s:
    """The generated LLMBenchmark CRD applied, Established, and its endpoint serving."""
    k8s = k8s_cluster
    k8s.kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD_FILE))

    def established() -> bool:
        obj = k8s.get("crd", "llmbenchmarks.llmbench.io")
        conditions = (obj or {}).get("status", {}).get("conditions") or []
        return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)

    k8s.wait_for("CRD llmbenchmarks.llmbench.io to be Established", established, 60)
    k8s.wait_for(
        "the llmbenchmarks endpoint to serve",
        lambda: k8s.kubectl("get", "llmbenchmarks", "-A", check=False).returncode == 0,
        30,
    )
    return k8s


@pytest.fixture
def namespace(k8s_cluster: K8s) -> Iterator[str]:
    """A fresh namespace, deleted (without waiting) after the test."""
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    k8s_cluster.kubectl("create", "namespace", name)
    # the ServiceAccount controller creates 'default' asynchronously; pods need it
    k8s_cluster.wait_for(
        f"ServiceAccount default in {name}",
        lambda: k8s_cluster.get("serviceaccount", "default", name),
        30,
    )
    try:
        yield name
    finally:
        k8s_cluster.kubectl("delete", "namespace", name, "--wait=false", check=False)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.e2e)
