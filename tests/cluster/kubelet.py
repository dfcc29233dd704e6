"""Process kubelet: fake Nodes whose pods run as host processes (no container runtime).

Registers Nodes (some GPU-shaped), keeps them Ready (Lease + node status heartbeats), and runs
every pod bound to them as host processes:

* command/args/env as Kubernetes resolves them (``$(VAR)`` expansion; env ``value``,
  ``fieldRef``, ``resourceFieldRef``, ``secretKeyRef``, ``configMapKeyRef``, ``envFrom``);
* one writable directory per pod: ``<dir>/<ns>_<pod>_<uid>/``. ``emptyDir`` volumes,
  ``configMap``/``secret``/service-account-token volumes and each container's
  ``terminationMessagePath`` are files below it. There is no mount namespace: every
  ``mountPath`` / ``terminationMessagePath`` that appears in command, args or env values is
  rewritten to its host directory (write ``--out=/data/x`` and the process gets
  ``--out=<poddir>/volumes/data/x``); a missing ``subPath`` directory is created;
  ``LLMBENCH_POD_DIR`` names the pod directory;
* ``persistentVolumeClaim`` volumes: the claim must be Bound to a PersistentVolume with
  ``hostPath.path`` or ``local.path``; that host directory (created if missing) is the volume,
  shared by every pod that mounts the claim. Until then no container starts: they stay Waiting
  (``ContainerCreating``, the message names the claim) and the kubelet looks again (1 s,
  doubling to 5 s) until the claim is usable or the pod is deleted. ``readOnly`` is not
  enforced;
* a pod running under a service account (``automountServiceAccountToken`` not false) gets a
  token from the TokenRequest API bound to the pod, written as a kubeconfig
  (``KUBECONFIG``) plus ``<poddir>/serviceaccount/{token,ca.crt,namespace}`` (also the
  rewrite target of ``/var/run/secrets/kubernetes.io/serviceaccount``), so RBAC applies;
* Pending→Running→Succeeded/Failed with exit codes, restart counts and the termination message
  (``FallbackToLogsOnError`` honoured); ``restartPolicy`` Always/OnFailure/Never with backoff;
  readiness from ``readinessProbe`` httpGet/tcpSocket/exec against 127.0.0.1; pod IP 127.0.0.1;
* on deletion: SIGTERM to the process group, SIGKILL after the grace period, then the final
  delete of the pod object.

Images are not pulled. Image → host command (first match wins, see ``resolve_argv``):

====================================  ===============================================
image contains                        entrypoint when the container has no ``command``
====================================  ===============================================
``llm-d-inference-sim``               the cached llm-d-inference-sim binary (build.sh)
``llmbench``                          the ``llmbench`` console script of this venv
``python``                            this venv's python
``busybox``/``alpine``/``debian``/    ``/bin/sh`` (host)
``ubuntu``
====================================  ===============================================

An explicit ``command[0]`` is looked up by base name: ``llm-d-inference-sim`` → the cached
binary, ``python``/``python3`` → this venv's python, anything else in ``<venv>/bin`` then the
host ``PATH`` (absolute host paths are used as they are). An image that maps to nothing and has
no command leaves the container Waiting with reason ``ErrImagePull``.
"""

from __future__ import annotations

import argparse
import base64
import http.server
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import traceback
import urllib.parse
from datetime import UTC, datetime
from pathlib import Path

import httpx
import yaml

VENV_BIN = Path(sys.executable).parent
CACHE = Path(os.environ.get("LLMBENCH_CACHE", Path.home() / ".cache" / "llmbench"))
SIM_VERSION = os.environ.get("LLMBENCH_SIM_VERSION", "v0.10.2")
SIM_BIN = CACHE / f"llm-d-inference-sim-{SIM_VERSION}" / "bin" / "llm-d-inference-sim"
SA_MOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
HOST_PATH = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")

# name, zone, gpus, gpu product, cpu, memory
NODE_SETS = {
    "default": [
        ("gpu-node-a", "zone-a", 8, "NVIDIA-H100-80GB-HBM3", "64", "512Gi"),
        ("gpu-node-b", "zone-b", 4, "NVIDIA-A100-SXM4-80GB", "32", "256Gi"),
        ("cpu-node-a", "zone-a", 0, "", "16", "64Gi"),
    ],
}


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def log(msg: str) -> None:
    print(f"{now()} {msg}", flush=True)


class Api:
    """Minimal Kubernetes REST client (bearer token or client cert from a kubeconfig)."""

    def __init__(self, kubeconfig: str):
        cfg = yaml.safe_load(Path(kubeconfig).read_text())
        ctx_name = cfg.get("current-context")
        ctx = next(c["context"] for c in cfg["contexts"] if c["name"] == ctx_name)
        cluster = next(c["cluster"] for c in cfg["clusters"] if c["name"] == ctx["cluster"])
        user = next(u["user"] for u in cfg["users"] if u["name"] == ctx["user"])
        self.server = cluster["server"].rstrip("/")
        base = Path(kubeconfig).parent
        if "certificate-authority-data" in cluster:
            ca_path = base / ".kubelet-ca.crt"
            ca_path.write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
            self.ca = str(ca_path)
        else:
            self.ca = str(base / cluster["certificate-authority"])
        self.ca_pem = Path(self.ca).read_text()
        headers: dict[str, str] = {}
        self.ssl = ssl.create_default_context(cafile=self.ca)
        if "token" in user:
            headers["Authorization"] = f"Bearer {user['token']}"
        elif "client-certificate" in user:
            self.ssl.load_cert_chain(user["client-certificate"], user["client-key"])
        self.headers = headers
        self.http = httpx.Client(base_url=self.server, timeout=30, verify=self.ssl, headers=headers)

    def stream_client(self) -> httpx.Client:
        return httpx.Client(
            base_url=self.server,
            timeout=httpx.Timeout(30, read=None),
            verify=self.ssl,
            headers=self.headers,
        )

    def req(self, method: str, path: str, body=None, ctype="application/json", ok=(200, 201, 202)):
        data = json.dumps(body) if body is not None else None
        r = self.http.request(method, path, content=data, headers={"Content-Type": ctype})
        if r.status_code not in ok:
            raise ApiError(r.status_code, f"{method} {path}: {r.status_code} {r.text[:300]}")
        return r.json() if r.content else {}

    def get(self, path: str):
        return self.req("GET", path)

    def merge_patch(self, path: str, body):
        return self.req("PATCH", path, body, "application/merge-patch+json")


class ApiError(Exception):
    def __init__(self, code: int, msg: str):
        super().__init__(msg)
        self.code = code


# ------------------------------------------------------------------------------------ nodes
def node_objects(node_set: str, port: int = 10250) -> list[tuple[dict, dict]]:
    out = []
    for name, zone, gpus, product, cpu, mem in NODE_SETS[node_set]:
        labels = {
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "topology.kubernetes.io/zone": zone,
            "topology.kubernetes.io/region": "local",
            "llmbench.io/process-kubelet": "true",
        }
        capacity = {"cpu": cpu, "memory": mem, "pods": "110", "ephemeral-storage": "500Gi"}
        taints = []
        if gpus:
            labels.update(
                {
                    "nvidia.com/gpu.present": "true",
                    "nvidia.com/gpu.product": product,
                    "nvidia.com/gpu.count": str(gpus),
                }
            )
            capacity["nvidia.com/gpu"] = str(gpus)
            taints.append({"key": "nvidia.com/gpu", "effect": "NoSchedule"})
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": taints},
        }
        status = {
            "capacity": capacity,
            "allocatable": dict(capacity),
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "nodeInfo": {
                "machineID": name,
                "systemUUID": name,
                "bootID": name,
                "kernelVersion": os.uname().release,
                "osImage": "llmbench process kubelet",
                "containerRuntimeVersion": "process://host",
                "kubeletVersion": "v1.35.4",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
        }
        out.append((node, status))
    return out


def node_conditions() -> list[dict]:
    t = now()
    conds = [
        ("MemoryPressure", "False", "KubeletHasSufficientMemory"),
        ("DiskPressure", "False", "KubeletHasNoDiskPressure"),
        ("PIDPressure", "False", "KubeletHasSufficientPID"),
        ("Ready", "True", "KubeletReady"),
    ]
    return [
        {
            "type": ty,
            "status": st,
            "reason": rs,
            "message": rs,
            "lastHeartbeatTime": t,
            "lastTransitionTime": t,
        }
        for ty, st, rs in conds
    ]


# ------------------------------------------------------------------------------ containers
def resolve_argv(image: str, command: list[str], args: list[str]) -> list[str] | None:
    img = image.rsplit("@", 1)[0]
    repo = img.rsplit("/", 1)[-1].split(":")[0].lower()
    full = img.lower()
    if command:
        head = command[0]
        base = os.path.basename(head)
        if base == "llm-d-inference-sim":
            exe = str(SIM_BIN)
        elif base in ("python", "python3") or re.fullmatch(r"python3\.\d+", base):
            exe = sys.executable
        elif (VENV_BIN / base).exists():
            exe = str(VENV_BIN / base)
        elif os.path.isabs(head) and os.path.exists(head):
            exe = head
        else:
            exe = shutil.which(base, path=HOST_PATH) or head
        return [exe, *command[1:], *args]
    if "llm-d-inference-sim" in full:
        return [str(SIM_BIN), *args]
    if "llmbench" in repo:
        return [str(VENV_BIN / "llmbench"), *args]
    if repo.startswith("python"):
        return [sys.executable, *args]
    if repo in ("busybox", "alpine", "debian", "ubuntu"):
        return ["/bin/sh", *args] if args else ["/bin/sh", "-c", "true"]
    return None


_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")


def expand(s: str, env: dict[str, str]) -> str:
    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        return env.get(m.group(1), m.group(0))

    return _VAR.sub(sub, s)


class PodRunner:
    """Runs one pod's containers as host processes and reports its status."""

    def __init__(self, kubelet: Kubelet, pod: dict):
        self.k = kubelet
        self.api = kubelet.api
        self.pod = pod
        md = pod["metadata"]
        self.ns, self.name, self.uid = md["namespace"], md["name"], md["uid"]
        self.path = f"/api/v1/namespaces/{self.ns}/pods/{self.name}"
        self.dir = kubelet.dir / f"{self.ns}_{self.name}_{self.uid[:8]}"
        self.lock = threading.RLock()
        self.procs: dict[str, subprocess.Popen] = {}
        self.status: dict[str, dict] = {}  # container name -> containerStatus
        self.init_status: dict[str, dict] = {}
        self.terminating = False
        self.done = False
        self.start_time = now()
        self.wake = threading.Event()
        self.claim_dirs: dict[str, Path] = {}  # volume name -> host dir of its PVC's PV
        self.thread = threading.Thread(target=self._run, name=f"pod-{self.name}", daemon=True)

    # ------------------------------------------------------------------ setup
    def _prepare(self) -> tuple[dict[str, str], dict[str, str]]:
        """Creates the pod dir; returns (path rewrites, base env)."""
        spec = self.pod["spec"]
        self.dir.mkdir(parents=True, exist_ok=True)
        vol_dirs: dict[str, Path] = {}
        sa_dir = None
        for v in spec.get("volumes", []) or []:
            d = self.claim_dirs.get(v["name"]) or self.dir / "volumes" / v["name"]
            d.mkdir(parents=True, exist_ok=True)
            vol_dirs[v["name"]] = d
            if "configMap" in v or "secret" in v:
                self._fill_keys(v, d)
            elif "projected" in v:
                for src in v["projected"].get("sources", []) or []:
                    if "serviceAccountToken" in src:
                        sa_dir = d
                    elif "configMap" in src or "secret" in src:
                        self._fill_keys(src, d)
                    elif "downwardAPI" in src:
                        for item in src["downwardAPI"].get("items", []):
                            if "fieldRef" in item:
                                (d / item["path"]).write_text(
                                    self._field(item["fieldRef"]["fieldPath"])
                                )
        env: dict[str, str] = {
            "PATH": f"{VENV_BIN}:{HOST_PATH}",
            "HOME": str(self.dir),
            "HOSTNAME": self.name,
            "LLMBENCH_POD_DIR": str(self.dir),
            "LANG": os.environ.get("LANG", "C.UTF-8"),
        }
        if os.environ.get("LLMBENCH_CACHE"):
            env["LLMBENCH_CACHE"] = os.environ["LLMBENCH_CACHE"]
        rewrites: dict[str, str] = {}
        automount = spec.get("automountServiceAccountToken", True)
        if automount is not False:
            sa = spec.get("serviceAccountName") or "default"
            token = self._token(sa)
            sa_dir = sa_dir or self.dir / "serviceaccount"
            sa_dir.mkdir(parents=True, exist_ok=True)
            (sa_dir / "token").write_text(token)
            (sa_dir / "ca.crt").write_text(self.api.ca_pem)
            (sa_dir / "namespace").write_text(self.ns)
            kc = self.dir / "kubeconfig"
            kc.write_text(
                yaml.safe_dump(
                    {
                        "apiVersion": "v1",
                        "kind": "Config",
                        "clusters": [
                            {
                                "name": "in-cluster",
                                "cluster": {
                                    "server": self.api.server,
                                    "certificate-authority": str(sa_dir / "ca.crt"),
                                },
                            }
                        ],
                        "users": [{"name": sa, "user": {"tokenFile": str(sa_dir / "token")}}],
                        "contexts": [
                            {
                                "name": "in-cluster",
                                "context": {
                                    "cluster": "in-cluster",
                                    "user": sa,
                                    "namespace": self.ns,
                                },
                            }
                        ],
                        "current-context": "in-cluster",
                    }
                )
            )
            u = urllib.parse.urlsplit(self.api.server)
            env.update(
                {
                    "KUBECONFIG": str(kc),
                    "KUBERNETES_SERVICE_HOST": u.hostname or "",
                    "KUBERNETES_SERVICE_PORT": str(u.port or 443),
                }
            )
            rewrites[SA_MOUNT] = str(sa_dir)
        self.vol_dirs = vol_dirs
        return rewrites, env

    def _claim_dir(self, claim: str) -> tuple[Path | None, str]:
        """The host directory of a Bound claim's hostPath/local PV (created), else (None, why)."""
        try:
            pvc = self.api.get(f"/api/v1/namespaces/{self.ns}/persistentvolumeclaims/{claim}")
        except ApiError as e:
            if e.code == 404:
                return None, f'persistentvolumeclaim "{claim}" not found'
            raise
        phase = (pvc.get("status") or {}).get("phase", "Pending")
        pv_name = (pvc.get("spec") or {}).get("volumeName")
        if phase != "Bound" or not pv_name:
            return None, f'persistentvolumeclaim "{claim}" is not bound (phase {phase})'
        pv = self.api.get(f"/api/v1/persistentvolumes/{pv_name}")
        spec = pv.get("spec") or {}
        path = (spec.get("hostPath") or {}).get("path") or (spec.get("local") or {}).get("path")
        if not path:
            return None, (
                f'persistentvolumeclaim "{claim}": persistentvolume "{pv_name}" has neither '
                "hostPath nor local path (the process kubelet mounts only those)"
            )
        d = Path(path)
        d.mkdir(parents=True, exist_ok=True)
        return d, ""

    def _wait_for_claims(self) -> bool:
        """Resolves every persistentVolumeClaim volume to its host directory. Until all are
        usable the containers stay Waiting with the reason; False if the pod goes away first."""
        spec = self.pod["spec"]
        claims = {
            v["name"]: v["persistentVolumeClaim"]["claimName"]
            for v in spec.get("volumes", []) or []
            if "persistentVolumeClaim" in v
        }
        backoff, shown = 1.0, ""
        while claims:
            why = ""
            for vol, claim in list(claims.items()):
                try:
                    d, why = self._claim_dir(claim)
                except (ApiError, httpx.HTTPError, OSError) as exc:
                    d, why = None, f'persistentvolumeclaim "{claim}": {exc}'[:500]
                if d is None:
                    break
                self.claim_dirs[vol] = d
                del claims[vol]
            if not claims:
                break
            if why != shown:
                shown = why
                log(f"pod {self.ns}/{self.name}: waiting for volume: {why}")
                msg = f"process kubelet: unable to mount volumes: {why}"
                waiting = {"waiting": {"reason": "ContainerCreating", "message": msg}}
                with self.lock:
                    for c in spec.get("initContainers", []) or []:
                        self.init_status[c["name"]] = self._cs(c, waiting)
                    for c in spec["containers"]:
                        self.status[c["name"]] = self._cs(c, waiting)
                self.report()
            if self.wake.wait(backoff) or self.terminating:
                return False
            backoff = min(backoff * 2, 5.0)
        with self.lock:  # back to the default Waiting states
            self.status.clear()
            self.init_status.clear()
        return True

    def _fill_keys(self, v: dict, d: Path) -> None:
        if "configMap" in v:
            src, kind = v["configMap"], "configmaps"
        else:
            src, kind = v["secret"], "secrets"
        name = src.get("name") or src.get("secretName")
        try:
            obj = self.api.get(f"/api/v1/namespaces/{self.ns}/{kind}/{name}")
        except ApiError:
            if src.get("optional"):
                return
            raise
        data = dict(obj.get("data") or {})
        items = src.get("items")
        for key, val in data.items():
            raw = base64.b64decode(val) if kind == "secrets" else val.encode()
            target = key
            if items:
                match = [i for i in items if i["key"] == key]
                if not match:
                    continue
                target = match[0]["path"]
            (d / target).parent.mkdir(parents=True, exist_ok=True)
            (d / target).write_bytes(raw)

    def _token(self, sa: str) -> str:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {
                "expirationSeconds": 3600,
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": self.name,
                    "uid": self.uid,
                },
            },
        }
        r = self.api.req("POST", f"/api/v1/namespaces/{self.ns}/serviceaccounts/{sa}/token", body)
        return r["status"]["token"]

    def _field(self, fp: str) -> str:
        md, spec = self.pod["metadata"], self.pod["spec"]
        m = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", fp)
        if m:
            return (md.get(m.group(1)) or {}).get(m.group(2), "")
        return {
            "metadata.name": self.name,
            "metadata.namespace": self.ns,
            "metadata.uid": self.uid,
            "spec.nodeName": spec.get("nodeName", ""),
            "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            "status.podIP": "127.0.0.1",
            "status.podIPs": "127.0.0.1",
            "status.hostIP": "127.0.0.1",
            "status.hostIPs": "127.0.0.1",
        }.get(fp, "")

    def _key_ref(self, kind: str, ref: dict) -> str | None:
        try:
            obj = self.api.get(f"/api/v1/namespaces/{self.ns}/{kind}/{ref['name']}")
        except ApiError as e:
            if ref.get("optional") and e.code == 404:
                return None
            raise
        if kind == "secrets":
            val = (obj.get("data") or {}).get(ref["key"])
            if val is None:
                if ref.get("optional"):
                    return None
                raise ApiError(404, f"secret {ref['name']} has no key {ref['key']}")
            return base64.b64decode(val).decode()
        val = (obj.get("data") or {}).get(ref["key"])
        if val is None and not ref.get("optional"):
            raise ApiError(404, f"configmap {ref['name']} has no key {ref['key']}")
        return val

    def _container_env(self, c: dict, base: dict[str, str], rewrites: dict[str, str]):
        env = dict(base)
        for ef in c.get("envFrom", []) or []:
            prefix = ef.get("prefix", "")
            kind, ref = (
                ("configmaps", ef["configMapRef"])
                if "configMapRef" in ef
                else ("secrets", ef["secretRef"])
            )
            try:
                obj = self.api.get(f"/api/v1/namespaces/{self.ns}/{kind}/{ref['name']}")
            except ApiError:
                if ref.get("optional"):
                    continue
                raise
            for k, v in (obj.get("data") or {}).items():
                env[prefix + k] = base64.b64decode(v).decode() if kind == "secrets" else v
        for e in c.get("env", []) or []:
            if "value" in e or "valueFrom" not in e:
                env[e["name"]] = self._rewrite(expand(e.get("value", ""), env), rewrites)
                continue
            vf = e["valueFrom"]
            val: str | None
            if "fieldRef" in vf:
                val = self._field(vf["fieldRef"]["fieldPath"])
            elif "secretKeyRef" in vf:
                val = self._key_ref("secrets", vf["secretKeyRef"])
            elif "configMapKeyRef" in vf:
                val = self._key_ref("configmaps", vf["configMapKeyRef"])
            elif "resourceFieldRef" in vf:
                res = vf["resourceFieldRef"]["resource"]
                kind, _, rname = res.partition(".")
                val = str(((c.get("resources") or {}).get(kind) or {}).get(rname, "0"))
            else:
                val = ""
            if val is not None:
                env[e["name"]] = val
        return env

    @staticmethod
    def _rewrite(s: str, rewrites: dict[str, str]) -> str:
        """Every mount path in ``s`` replaced by its host directory, in one pass: a replaced
        path is never rewritten again (the pod directory may itself lie under a mount path
        such as ``/tmp``), and the longest mount path wins where two share a prefix."""
        if not rewrites:
            return s
        alternatives = "|".join(re.escape(src) for src in sorted(rewrites, key=len, reverse=True))
        pattern = re.compile(f"(?:{alternatives})(?=/|$|[^\\w.-])")
        return pattern.sub(lambda m: rewrites[m.group(0)], s)

    def _argv_env(self, c: dict, base_rewrites: dict[str, str], base_env: dict[str, str]):
        rewrites = dict(base_rewrites)
        for vm in c.get("volumeMounts", []) or []:
            d = self.vol_dirs.get(vm["name"])
            if d is not None and vm["mountPath"] != SA_MOUNT:
                target = d / vm.get("subPath", "")
                if not target.exists():  # like a real kubelet: a missing subPath becomes a dir
                    target.mkdir(parents=True, exist_ok=True)
                rewrites[vm["mountPath"]] = str(target).rstrip("/")
        tm = c.get("terminationMessagePath") or "/dev/termination-log"
        cdir = self.dir / "containers" / c["name"]
        cdir.mkdir(parents=True, exist_ok=True)
        rewrites[tm] = str(cdir / "termination-log")
        env = self._container_env(c, base_env, rewrites)
        cmd = [self._rewrite(expand(a, env), rewrites) for a in c.get("command", []) or []]
        args = [self._rewrite(expand(a, env), rewrites) for a in c.get("args", []) or []]
        argv = resolve_argv(c.get("image", ""), cmd, args)
        return argv, env, cdir

    # ------------------------------------------------------------------ lifecycle
    def _run(self) -> None:
        try:
            self._lifecycle()
        except Exception as exc:  # report instead of dying silently
            log(f"pod {self.ns}/{self.name}: {exc}\n{traceback.format_exc()}")
            with self.lock:
                for c in self.pod["spec"]["containers"]:
                    if c["name"] not in self.status:
                        self.status[c["name"]] = self._cs(
                            c,
                            {
                                "waiting": {
                                    "reason": "CreateContainerConfigError",
                                    "message": str(exc)[:500],
                                }
                            },
                        )
            self.report(message=str(exc)[:500])
            # wait for deletion; the pod stays Pending like on a real kubelet
        finally:
            pass

    def _cs(
        self,
        c: dict,
        state: dict,
        restarts: int = 0,
        last: dict | None = None,
        ready: bool = False,
        cid: str = "",
    ) -> dict:
        cs = {
            "name": c["name"],
            "image": c.get("image", ""),
            "imageID": "process://" + c.get("image", ""),
            "ready": ready,
            "restartCount": restarts,
            "started": "running" in state,
            "state": state,
            "lastState": last or {},
        }
        if cid:
            cs["containerID"] = cid
        return cs

    def _lifecycle(self) -> None:
        spec = self.pod["spec"]
        self.report()
        if not self._wait_for_claims():
            return
        rewrites, base_env = self._prepare()
        policy = spec.get("restartPolicy", "Always")
        # init containers, in order
        for c in spec.get("initContainers", []) or []:
            while True:
                code = self._run_once(c, rewrites, base_env, init=True)
                if self.terminating:
                    return
                if code == 0:
                    break
                if policy == "Never":
                    self._finish_pod()
                    return
                time.sleep(1)
        threads = [
            threading.Thread(
                target=self._container_loop, args=(c, rewrites, base_env, policy), daemon=True
            )
            for c in spec["containers"]
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if not self.terminating:
            self._finish_pod()

    def _container_loop(self, c: dict, rewrites, base_env, policy: str) -> None:
        restarts = 0
        backoff = 1.0
        while not self.terminating:
            code = self._run_once(c, rewrites, base_env, restarts=restarts)
            if self.terminating or code is None:
                return
            if policy == "Never" or (policy == "OnFailure" and code == 0):
                return
            restarts += 1
            with self.lock:
                cs = self.status[c["name"]]
                last = {"terminated": cs["state"].get("terminated", {})}
                self.status[c["name"]] = self._cs(
                    c, {"waiting": {"reason": "CrashLoopBackOff"}}, restarts, last
                )
            self.report()
            if self.wake.wait(backoff):
                return
            backoff = min(backoff * 2, 10.0)

    def _run_once(
        self, c: dict, rewrites, base_env, init: bool = False, restarts: int = 0
    ) -> int | None:
        table = self.init_status if init else self.status
        argv, env, cdir = self._argv_env(c, rewrites, base_env)
        last = (table.get(c["name"]) or {}).get("lastState", {})
        if argv is None:
            with self.lock:
                table[c["name"]] = self._cs(
                    c,
                    {
                        "waiting": {
                            "reason": "ErrImagePull",
                            "message": f"process kubelet: no host command for image "
                            f"{c.get('image')!r} and no container command "
                            "(see tests/cluster/kubelet.py)",
                        }
                    },
                )
            self.report()
            self.wake.wait()
            return None
        tm = cdir / "termination-log"
        tm.write_text("")
        logf = open(cdir / "output.log", "ab")  # noqa: SIM115
        started = now()
        try:
            with self.lock:
                if self.terminating:
                    return None
                proc = subprocess.Popen(
                    argv,
                    cwd=self.dir,
                    env=env,
                    stdout=logf,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,
                )
                self.procs[c["name"]] = proc
                (cdir / "pid").write_text(str(proc.pid))
        except OSError as exc:
            with self.lock:
                table[c["name"]] = self._cs(
                    c,
                    {
                        "terminated": {
                            "exitCode": 128,
                            "reason": "StartError",
                            "message": str(exc)[:1000],
                            "startedAt": started,
                            "finishedAt": now(),
                        }
                    },
                    restarts,
                    last,
                )
            self.report()
            return 128
        finally:
            logf.close()
        cid = f"process://{proc.pid}"
        probe = c.get("readinessProbe")
        with self.lock:
            table[c["name"]] = self._cs(
                c,
                {"running": {"startedAt": started}},
                restarts,
                last,
                ready=probe is None and not init,
                cid=cid,
            )
        log(f"pod {self.ns}/{self.name} container {c['name']} started pid {proc.pid}: {argv}")
        self.report()
        next_probe = time.monotonic() + (probe or {}).get("initialDelaySeconds", 0)
        while True:
            try:
                code = proc.wait(timeout=0.2)
                break
            except subprocess.TimeoutExpired:
                pass
            if probe and not init and time.monotonic() >= next_probe:
                next_probe = time.monotonic() + min(probe.get("periodSeconds", 10), 1)
                ok = self._probe(probe, c, env)
                with self.lock:
                    cs = table[c["name"]]
                    if cs["ready"] != ok and "running" in cs["state"]:
                        cs["ready"] = ok
                        changed = True
                    else:
                        changed = False
                if changed:
                    self.report()
        (cdir / "pid").unlink(missing_ok=True)
        msg = ""
        try:
            msg = tm.read_bytes()[:4096].decode(errors="replace")
        except FileNotFoundError:
            pass
        if not msg and code != 0 and c.get("terminationMessagePolicy") == "FallbackToLogsOnError":
            try:
                lines = (cdir / "output.log").read_bytes()[-2048:].decode(errors="replace")
                msg = "\n".join(lines.splitlines()[-80:])
            except FileNotFoundError:
                pass
        exit_code = code if code >= 0 else 128 - code  # killed by signal N -> 128+N
        term = {
            "exitCode": exit_code,
            "reason": "Completed" if code == 0 else "Error",
            "startedAt": started,
            "finishedAt": now(),
            "containerID": cid,
        }
        if code < 0:
            term["signal"] = -code
        if msg:
            term["message"] = msg
        with self.lock:
            table[c["name"]] = self._cs(c, {"terminated": term}, restarts, last, cid=cid)
        log(f"pod {self.ns}/{self.name} container {c['name']} exited {exit_code}")
        if not self.terminating:
            self.report()
        return exit_code

    def _probe(self, probe: dict, c: dict, env: dict[str, str]) -> bool:
        def port_of(p):
            if isinstance(p, int) or str(p).isdigit():
                return int(p)
            for cp in c.get("ports", []) or []:
                if cp.get("name") == p:
                    return int(cp["containerPort"])
            return 0

        try:
            if "httpGet" in probe:
                hg = probe["httpGet"]
                scheme = hg.get("scheme", "HTTP").lower()
                url = f"{scheme}://127.0.0.1:{port_of(hg['port'])}{hg.get('path', '/')}"
                r = httpx.get(url, timeout=probe.get("timeoutSeconds", 1), verify=False)
                return 200 <= r.status_code < 400
            if "tcpSocket" in probe:
                with socket.create_connection(
                    ("127.0.0.1", port_of(probe["tcpSocket"]["port"])), timeout=1
                ):
                    return True
            if "exec" in probe:
                done = subprocess.run(
                    probe["exec"]["command"],
                    env=env,
                    cwd=self.dir,
                    capture_output=True,
                    timeout=probe.get("timeoutSeconds", 1),
                )
                return done.returncode == 0
        except Exception:
            return False
        return True

    def _finish_pod(self) -> None:
        with self.lock:
            terms = [
                cs["state"].get("terminated", {})
                for cs in list(self.status.values()) + list(self.init_status.values())
            ]
            ok = all(t.get("exitCode", 1) == 0 for t in terms) and len(self.status) == len(
                self.pod["spec"]["containers"]
            )
            self.done = True
        self.report(phase="Succeeded" if ok else "Failed")

    def kill(self, grace: float) -> None:
        """SIGTERM the process groups, SIGKILL after grace seconds."""
        with self.lock:
            self.terminating = True
            procs = list(self.procs.values())
        self.wake.set()
        for p in procs:
            if p.poll() is None:
                _killpg(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        for p in procs:
            try:
                p.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for p in procs:
            _killpg(p.pid, signal.SIGKILL)  # also stray children left in the group
            try:
                p.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass

    # ------------------------------------------------------------------ status
    def report(self, phase: str | None = None, message: str | None = None) -> None:
        with self.lock:
            spec = self.pod["spec"]
            statuses = [
                self.status.get(c["name"])
                or self._cs(
                    c,
                    {
                        "waiting": {
                            "reason": "ContainerCreating"
                            if not self.init_status
                            else "PodInitializing"
                        }
                    },
                )
                for c in spec["containers"]
            ]
            inits = [
                self.init_status.get(c["name"])
                or self._cs(c, {"waiting": {"reason": "PodInitializing"}})
                for c in spec.get("initContainers", []) or []
            ]
            if phase is None:
                phase = (
                    "Running"
                    if any(
                        "running" in cs["state"]
                        or "terminated" in cs["state"]
                        or cs["restartCount"]
                        for cs in statuses
                    )
                    else "Pending"
                )
            init_done = all(
                "terminated" in cs["state"] and cs["state"]["terminated"]["exitCode"] == 0
                for cs in inits
            )
            ready = phase == "Running" and all(cs["ready"] for cs in statuses)
            t = now()
            conds: list[dict[str, str | None]] = [
                {"type": "PodReadyToStartContainers", "status": "True"},
                {"type": "Initialized", "status": "True" if init_done else "False"},
                {"type": "Ready", "status": "True" if ready else "False"},
                {"type": "ContainersReady", "status": "True" if ready else "False"},
                {"type": "PodScheduled", "status": "True"},
            ]
            prev = {c["type"]: c for c in self.pod.get("status", {}).get("conditions", []) or []}
            for cd in conds:
                p = prev.get(cd["type"])
                cd["lastProbeTime"] = None
                cd["lastTransitionTime"] = (
                    p.get("lastTransitionTime") if p and p.get("status") == cd["status"] else t
                )
                if cd["status"] == "False" and cd["type"] in ("Ready", "ContainersReady"):
                    cd["reason"] = (
                        "PodCompleted" if phase in ("Succeeded", "Failed") else "ContainersNotReady"
                    )
            status = {
                "phase": phase,
                "conditions": conds,
                "hostIP": "127.0.0.1",
                "hostIPs": [{"ip": "127.0.0.1"}],
                "podIP": "127.0.0.1",
                "podIPs": [{"ip": "127.0.0.1"}],
                "startTime": self.start_time,
                "containerStatuses": statuses,
                "qosClass": self.pod.get("status", {}).get("qosClass", "BestEffort"),
            }
            if inits:
                status["initContainerStatuses"] = inits
            if message:
                status["message"] = message
        try:
            self.api.merge_patch(self.path + "/status", {"status": status})
        except (ApiError, httpx.HTTPError) as exc:
            if not (isinstance(exc, ApiError) and exc.code == 404):
                log(f"pod {self.ns}/{self.name}: status update failed: {exc}")


def _killpg(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Kubelet:
    def __init__(self, kubeconfig: str, workdir: Path, node_set: str, port: int = 10250):
        self.api = Api(kubeconfig)
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.nodes = node_objects(node_set, port)
        self.node_names = {n["metadata"]["name"] for n, _ in self.nodes}
        self.pods: dict[str, PodRunner] = {}
        self.lock = threading.Lock()
        self.stopping = threading.Event()

    # ------------------------------------------------------------------ nodes
    def register(self) -> None:
        for node, status in self.nodes:
            name = node["metadata"]["name"]
            try:
                self.api.req("POST", "/api/v1/nodes", node)
            except ApiError as e:
                if e.code != 409:
                    raise
            status = dict(status, conditions=node_conditions())
            self.api.merge_patch(f"/api/v1/nodes/{name}/status", {"status": status})
            self._lease(name)
        log(f"registered nodes {sorted(self.node_names)}")

    def _lease(self, name: str) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}"
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": name, "namespace": "kube-node-lease"},
            "spec": {"holderIdentity": name, "leaseDurationSeconds": 40, "renewTime": now_micro()},
        }
        try:
            self.api.merge_patch(path, {"spec": body["spec"]})
        except ApiError as e:
            if e.code != 404:
                raise
            self.api.req("POST", path.rsplit("/", 1)[0], body)

    def heartbeat(self) -> None:
        n = 0
        while not self.stopping.wait(5):
            n += 1
            for name in self.node_names:
                try:
                    self._lease(name)
                    if n % 4 == 0:
                        self.api.merge_patch(
                            f"/api/v1/nodes/{name}/status",
                            {"status": {"conditions": node_conditions()}},
                        )
                except Exception as exc:
                    log(f"heartbeat {name}: {exc}")

    # ------------------------------------------------------------------ pods
    def handle(self, pod: dict, deleted: bool = False) -> None:
        node = pod.get("spec", {}).get("nodeName")
        if node not in self.node_names:
            return
        uid = pod["metadata"]["uid"]
        with self.lock:
            runner = self.pods.get(uid)
            phase = pod.get("status", {}).get("phase")
            if runner is None:
                if deleted or pod["metadata"].get("deletionTimestamp"):
                    if not deleted:
                        threading.Thread(
                            target=self._final_delete, args=(pod,), daemon=True
                        ).start()
                    return
                if phase in ("Succeeded", "Failed"):
                    return  # finished before this kubelet (re)started
                runner = PodRunner(self, pod)
                self.pods[uid] = runner
                runner.thread.start()
                return
            runner.pod["metadata"] = pod["metadata"]
        if deleted or pod["metadata"].get("deletionTimestamp"):
            if not runner.terminating:
                runner.terminating = True
                threading.Thread(
                    target=self._terminate, args=(runner, pod, deleted), daemon=True
                ).start()

    def _terminate(self, runner: PodRunner, pod: dict, deleted: bool) -> None:
        grace = pod["metadata"].get("deletionGracePeriodSeconds")
        if grace is None:
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
        log(f"pod {runner.ns}/{runner.name}: killing (grace {grace}s)")
        runner.kill(float(grace))
        # Like a real kubelet, report the terminal phase before the final delete: the Job
        # controller holds its tracking finalizer on the pod until it sees Failed/Succeeded.
        runner.thread.join(timeout=10)
        if not deleted:
            runner._finish_pod()
        with self.lock:
            self.pods.pop(runner.uid, None)
        if not deleted:
            self._final_delete(pod)

    def _final_delete(self, pod: dict) -> None:
        md = pod["metadata"]
        try:
            self.api.req(
                "DELETE",
                f"/api/v1/namespaces/{md['namespace']}/pods/{md['name']}",
                {
                    "apiVersion": "v1",
                    "kind": "DeleteOptions",
                    "gracePeriodSeconds": 0,
                    "preconditions": {"uid": md["uid"]},
                },
                ok=(200, 202),
            )
        except ApiError as e:
            if e.code not in (404, 409):
                log(f"final delete {md['name']}: {e}")

    def watch_pods(self) -> None:
        client = self.api.stream_client()
        rv = ""
        while not self.stopping.is_set():
            try:
                if not rv:
                    lst = self.api.get("/api/v1/pods?fieldSelector=spec.nodeName%21%3D")
                    rv = lst["metadata"]["resourceVersion"]
                    seen = set()
                    for p in lst["items"]:
                        seen.add(p["metadata"]["uid"])
                        self.handle(p)
                    with self.lock:
                        gone = [pr for u, pr in self.pods.items() if u not in seen]
                    for runner in gone:
                        self.handle(runner.pod, deleted=True)
                params = {
                    "watch": "1",
                    "resourceVersion": rv,
                    "allowWatchBookmarks": "true",
                    "timeoutSeconds": "60",
                    "fieldSelector": "spec.nodeName!=",
                }
                with client.stream("GET", "/api/v1/pods", params=params) as r:
                    if r.status_code != 200:
                        rv = ""
                        time.sleep(0.5)
                        continue
                    for line in r.iter_lines():
                        if not line:
                            continue
                        ev = json.loads(line)
                        obj = ev["object"]
                        if ev["type"] == "ERROR":
                            rv = ""
                            break
                        rv = obj["metadata"].get("resourceVersion", rv)
                        if ev["type"] == "BOOKMARK":
                            continue
                        self.handle(obj, deleted=ev["type"] == "DELETED")
            except Exception as exc:
                if self.stopping.is_set():
                    break
                log(f"watch: {exc}")
                rv = ""
                time.sleep(0.5)

    def shutdown(self) -> None:
        self.stopping.set()
        with self.lock:
            runners = list(self.pods.values())
        ts = [threading.Thread(target=r.kill, args=(2.0,)) for r in runners]
        for t in ts:
            t.start()
        for t in ts:
            t.join()


class _LogHandler(http.server.BaseHTTPRequestHandler):
    """The slice of the kubelet API that `kubectl logs` uses: /containerLogs/ns/pod/container."""

    pods_dir: Path

    def log_message(self, format, *args):  # noqa: A002 - quiet
        pass

    def do_GET(self):  # noqa: N802 - http.server API
        url = urllib.parse.urlsplit(self.path)
        parts = url.path.strip("/").split("/")
        if url.path in ("/healthz", "/readyz"):
            return self._send(200, b"ok")
        if len(parts) != 4 or parts[0] != "containerLogs":
            return self._send(404, b"process kubelet serves only /containerLogs")
        _, ns, pod, container = parts
        logs = sorted(
            self.pods_dir.glob(f"{ns}_{pod}_*/containers/{container}/output.log"),
            key=lambda p: p.stat().st_mtime,
        )
        if not logs:
            return self._send(404, f"no log for {ns}/{pod}/{container}".encode())
        data = logs[-1].read_bytes()
        q = urllib.parse.parse_qs(url.query)
        if "tailLines" in q:
            n = int(q["tailLines"][0])
            data = b"".join(data.splitlines(keepends=True)[-n:]) if n > 0 else b""
        if "limitBytes" in q:
            data = data[: int(q["limitBytes"][0])]
        self._send(200, data)

    def _send(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def serve_logs(pods_dir: Path, port: int, cert: str, key: str) -> None:
    handler = type("Handler", (_LogHandler,), {"pods_dir": pods_dir})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(cert, key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    srv.daemon_threads = True
    threading.Thread(target=srv.serve_forever, daemon=True, name="logs").start()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--dir", required=True, help="per-pod directories go here")
    ap.add_argument("--nodes", default="default", choices=sorted(NODE_SETS))
    ap.add_argument("--port", type=int, default=0, help="kubelet API port (kubectl logs)")
    ap.add_argument("--tls-cert", help="serving cert for --port")
    ap.add_argument("--tls-key", help="serving key for --port")
    a = ap.parse_args(argv)
    k = Kubelet(a.kubeconfig, Path(a.dir), a.nodes, a.port or 10250)
    if a.port and a.tls_cert and a.tls_key:
        serve_logs(Path(a.dir), a.port, a.tls_cert, a.tls_key)

    def on_term(signum, frame):
        k.shutdown()
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    k.register()
    threading.Thread(target=k.heartbeat, daemon=True, name="heartbeat").start()
    k.watch_pods()
    return 0


if __name__ == "__main__":
    sys.exit(main())
