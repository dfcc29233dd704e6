"""A real Kubernetes control plane on 127.0.0.1, without containers.

Starts etcd + kube-apiserver (RBAC, static-token auth, x509 client CA, service-account signing
keys) + kube-controller-manager (all default controllers, per-controller service-account
credentials) + kube-scheduler, then the process kubelet (``tests/cluster/kubelet.py``) with a
set of fake nodes. Binaries come from ``hack/cluster/build.sh`` (cached under
``${LLMBENCH_CACHE:-~/.cache/llmbench}/k8s-<version>/bin``).

Everything is stopped by PID, also when the start fails half-way.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

K8S_VERSION = os.environ.get("LLMBENCH_K8S_VERSION", "v1.35.4")
SIM_VERSION = os.environ.get("LLMBENCH_SIM_VERSION", "v0.10.2")
REPO_ROOT = Path(__file__).resolve().parents[2]
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")


class ClusterError(RuntimeError):
    """One-line, actionable reason why the test cluster could not start."""


def cache_dir() -> Path:
    return Path(os.environ.get("LLMBENCH_CACHE", Path.home() / ".cache" / "llmbench"))


def bin_dir(version: str = K8S_VERSION) -> Path:
    return cache_dir() / f"k8s-{version}" / "bin"


def sim_binary() -> Path:
    return cache_dir() / f"llm-d-inference-sim-{SIM_VERSION}" / "bin" / "llm-d-inference-sim"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def check_port_free(port: int, what: str) -> None:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            raise ClusterError(
                f"step ports: 127.0.0.1:{port} ({what}) is already in use ({exc.strerror}) — "
                f"stop whatever listens there (ss -ltnp 'sport = :{port}') or pick another port"
            ) from None


def rss_bytes(pid: int) -> int:
    """Resident set size of pid plus all its descendants (Linux /proc)."""
    total = 0
    todo = [pid]
    seen: set[int] = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for tid in os.listdir(f"/proc/{p}/task"):
                children = Path(f"/proc/{p}/task/{tid}/children").read_text().split()
                todo.extend(int(c) for c in children)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


def _openssl(*args: str, cwd: Path) -> None:
    try:
        subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True, text=True)
    except FileNotFoundError:
        raise ClusterError(
            "step pki: 'openssl' not found — install it (apt-get install openssl)"
        ) from None
    except subprocess.CalledProcessError as exc:
        err = exc.stderr.strip()[:300]
        raise ClusterError(f"step pki: openssl {args[0]} failed: {err}") from None


def make_pki(pki: Path) -> None:
    """CA, apiserver serving cert (127.0.0.1/localhost/kubernetes.default.svc), SA key pair."""
    pki.mkdir(parents=True, exist_ok=True)
    _openssl(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "3650",
        "-subj",
        "/CN=llmbench-test-ca",
        cwd=pki,
    )
    (pki / "san.cnf").write_text(
        "[req]\ndistinguished_name=dn\n[dn]\n[ext]\n"
        "basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\n"
        "extendedKeyUsage=serverAuth\n"
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,"
        "DNS:kubernetes.default,DNS:kubernetes.default.svc,"
        "DNS:kubernetes.default.svc.cluster.local\n"
    )
    _openssl(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "apiserver.key",
        "-out",
        "apiserver.csr",
        "-subj",
        "/CN=kube-apiserver",
        cwd=pki,
    )
    _openssl(
        "x509",
        "-req",
        "-in",
        "apiserver.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "apiserver.crt",
        "-days",
        "3650",
        "-extfile",
        "san.cnf",
        "-extensions",
        "ext",
        cwd=pki,
    )
    _openssl("genrsa", "-out", "sa.key", "2048", cwd=pki)
    _openssl("rsa", "-in", "sa.key", "-pubout", "-out", "sa.pub", cwd=pki)


def write_kubeconfig(path: Path, server: str, ca: Path, token: str, user: str) -> None:
    import yaml

    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "llmbench", "cluster": {"server": server, "certificate-authority": str(ca)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": "llmbench", "context": {"cluster": "llmbench", "user": user}}],
        "current-context": "llmbench",
    }
    path.write_text(yaml.safe_dump(cfg))
    path.chmod(0o600)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


@dataclass
class Cluster:
    """A running (or to-be-started) test cluster rooted at ``workdir``."""

    workdir: Path
    version: str = K8S_VERSION
    apiserver_port: int = 0
    nodes: str = "default"
    tie_to_parent: bool = False  # kill the processes if the starting process dies (pytest)
    pids: dict[str, int] = field(default_factory=dict)
    start_seconds: float = 0.0

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.apiserver_port}"

    @property
    def ca(self) -> Path:
        return self.workdir / "pki" / "ca.crt"

    @property
    def admin_token(self) -> str:
        return (self.workdir / "admin.token").read_text().strip()

    @property
    def state_file(self) -> Path:
        return self.workdir / "state.json"

    # ---------------------------------------------------------------- start
    def start(self, timeout: float = 90.0) -> Cluster:
        t0 = time.monotonic()
        try:
            self._start(timeout)
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.monotonic() - t0
        return self

    def _start(self, timeout: float) -> None:
        bins = bin_dir(self.version)
        missing = [c for c in COMPONENTS if not (bins / c).is_file()]
        if missing:
            raise ClusterError(
                f"step binaries: {', '.join(missing)} missing in {bins} — run "
                f"'bash hack/cluster/build.sh {self.version}' (cold build ~10-15 min)"
            )
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.state_file.exists():
            old = json.loads(self.state_file.read_text())
            if any(_alive(p) for p in old.get("pids", {}).values()):
                raise ClusterError(
                    f"step workdir: a cluster is still running from {self.workdir} — "
                    f"stop it first (hack/cluster/down.sh {self.workdir})"
                )
        for sub in ("etcd", "logs", "pods"):
            d = self.workdir / sub
            if d.exists():
                subprocess.run(["rm", "-rf", str(d)], check=False)
            d.mkdir(parents=True)
        pki = self.workdir / "pki"
        make_pki(pki)

        if self.apiserver_port:
            check_port_free(self.apiserver_port, "kube-apiserver")
        else:
            self.apiserver_port = free_port()
        etcd_port, peer_port, kubelet_port = free_port(), free_port(), free_port()
        tokens = {n: os.urandom(16).hex() for n in ("admin", "cm", "sched")}
        (self.workdir / "admin.token").write_text(tokens["admin"])
        (pki / "tokens.csv").write_text(
            f'{tokens["admin"]},admin,admin,"system:masters"\n'
            f"{tokens['cm']},system:kube-controller-manager,kcm\n"
            f"{tokens['sched']},system:kube-scheduler,ksched\n"
        )
        write_kubeconfig(self.kubeconfig, self.server, pki / "ca.crt", tokens["admin"], "admin")
        write_kubeconfig(
            self.workdir / "cm.kubeconfig",
            self.server,
            pki / "ca.crt",
            tokens["cm"],
            "system:kube-controller-manager",
        )
        write_kubeconfig(
            self.workdir / "sched.kubeconfig",
            self.server,
            pki / "ca.crt",
            tokens["sched"],
            "system:kube-scheduler",
        )
        self._save_state()

        self._spawn(
            "etcd",
            [
                str(bins / "etcd"),
                "--name",
                "llmbench",
                "--data-dir",
                str(self.workdir / "etcd"),
                "--listen-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--advertise-client-urls",
                f"http://127.0.0.1:{etcd_port}",
                "--listen-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-advertise-peer-urls",
                f"http://127.0.0.1:{peer_port}",
                "--initial-cluster",
                f"llmbench=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync",
                "--log-level",
                "warn",
                "--quota-backend-bytes",
                str(2 << 30),
            ],
        )
        self._spawn(
            "kube-apiserver",
            [
                str(bins / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.apiserver_port}",
                f"--cert-dir={pki}",
                f"--tls-cert-file={pki / 'apiserver.crt'}",
                f"--tls-private-key-file={pki / 'apiserver.key'}",
                f"--client-ca-file={pki / 'ca.crt'}",
                f"--token-auth-file={pki / 'tokens.csv'}",
                "--authorization-mode=Node,RBAC",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={pki / 'sa.pub'}",
                f"--service-account-signing-key-file={pki / 'sa.key'}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                "--kubelet-preferred-address-types=InternalIP",
                "--profiling=false",
                "--v=1",
            ],
        )
        self._wait_ready(timeout)
        self._spawn(
            "kube-controller-manager",
            [
                str(bins / "kube-controller-manager"),
                f"--kubeconfig={self.workdir / 'cm.kubeconfig'}",
                f"--authentication-kubeconfig={self.workdir / 'cm.kubeconfig'}",
                f"--authorization-kubeconfig={self.workdir / 'cm.kubeconfig'}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.workdir / 'pki' / 'kcm'}",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                "--controllers=*",
                f"--service-account-private-key-file={pki / 'sa.key'}",
                f"--root-ca-file={pki / 'ca.crt'}",
                f"--cluster-signing-cert-file={pki / 'ca.crt'}",
                f"--cluster-signing-key-file={pki / 'ca.key'}",
                "--profiling=false",
                "--v=1",
            ],
        )
        self._spawn(
            "kube-scheduler",
            [
                str(bins / "kube-scheduler"),
                f"--kubeconfig={self.workdir / 'sched.kubeconfig'}",
                f"--authentication-kubeconfig={self.workdir / 'sched.kubeconfig'}",
                f"--authorization-kubeconfig={self.workdir / 'sched.kubeconfig'}",
                "--bind-address=127.0.0.1",
                f"--secure-port={free_port()}",
                f"--cert-dir={self.workdir / 'pki' / 'sched'}",
                "--leader-elect=false",
                "--profiling=false",
                "--v=1",
            ],
        )
        self._spawn(
            "kubelet",
            [
                sys.executable,
                str(Path(__file__).with_name("kubelet.py")),
                "--kubeconfig",
                str(self.kubeconfig),
                "--dir",
                str(self.workdir / "pods"),
                "--nodes",
                self.nodes,
                "--port",
                str(kubelet_port),
                "--tls-cert",
                str(pki / "apiserver.crt"),
                "--tls-key",
                str(pki / "apiserver.key"),
            ],
        )
        self._wait_settled(timeout)

    def _spawn(self, name: str, argv: list[str], cwd: Path | None = None) -> None:
        log = open(self.workdir / "logs" / f"{name}.log", "wb")  # noqa: SIM115
        env = dict(os.environ)
        try:
            proc = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                cwd=cwd or self.workdir,
                env=env,
                start_new_session=True,
                preexec_fn=_die_with_parent if self.tie_to_parent else None,
            )
        except OSError as exc:
            raise ClusterError(f"step start-{name}: cannot execute {argv[0]}: {exc}") from None
        finally:
            log.close()
        self.pids[name] = proc.pid
        self._procs = getattr(self, "_procs", {})
        self._procs[name] = proc
        self._save_state()

    def _check_alive(self) -> None:
        for name, proc in getattr(self, "_procs", {}).items():
            if proc.poll() is not None:
                tail = self.log_tail(name)
                hint = ""
                if "address already in use" in tail:
                    hint = (
                        " — a port is already in use; retry (ports are picked at random) or free it"
                    )
                raise ClusterError(
                    f"step start-{name}: exited with code {proc.returncode}{hint}; last log line: "
                    f"{tail.strip().splitlines()[-1] if tail.strip() else '(empty)'} "
                    f"(full log: {self.workdir / 'logs' / (name + '.log')})"
                )

    def log_tail(self, name: str, nbytes: int = 4000) -> str:
        p = self.workdir / "logs" / f"{name}.log"
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            return ""
        return data[-nbytes:].decode(errors="replace")

    def _save_state(self) -> None:
        self.state_file.write_text(
            json.dumps(
                {
                    "pids": self.pids,
                    "apiserver_port": self.apiserver_port,
                    "version": self.version,
                    "kubeconfig": str(self.kubeconfig),
                    "server": self.server,
                },
                indent=1,
            )
        )

    def api(
        self, path: str, method: str = "GET", body: dict | None = None, timeout: float = 5.0
    ) -> tuple[int, dict | str]:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.admin_token}",
                "Content-Type": "application/json",
            },
        )
        try:
            with urllib.request.urlopen(req, context=ctx, timeout=timeout) as r:
                raw = r.read().decode()
                code = r.status
        except urllib.error.HTTPError as e:
            raw, code = e.read().decode(), e.code
        try:
            return code, json.loads(raw)
        except ValueError:
            return code, raw

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            self._check_alive()
            try:
                code, body = self.api("/readyz", timeout=2)
                if code == 200:
                    return
                last = f"HTTP {code}"
            except (OSError, urllib.error.URLError) as exc:
                last = str(exc)
            time.sleep(0.25)
        raise ClusterError(
            f"step wait-apiserver: /readyz not ok after {timeout:.0f}s ({last}); "
            f"see {self.workdir / 'logs' / 'kube-apiserver.log'}"
        )

    def _wait_settled(self, timeout: float) -> None:
        """Controller-manager issued the default SA + root CA; the kubelet's nodes are Ready."""
        deadline = time.monotonic() + timeout
        waiting = "default ServiceAccount"
        while time.monotonic() < deadline:
            self._check_alive()
            code, _ = self.api("/api/v1/namespaces/default/serviceaccounts/default")
            if code != 200:
                waiting = "default ServiceAccount (kube-controller-manager)"
            else:
                code, _ = self.api("/api/v1/namespaces/default/configmaps/kube-root-ca.crt")
                if code != 200:
                    waiting = "kube-root-ca.crt ConfigMap (kube-controller-manager)"
                else:
                    code, nodes = self.api("/api/v1/nodes")
                    items = nodes.get("items", []) if isinstance(nodes, dict) else []
                    ready = [
                        n
                        for n in items
                        if any(
                            c["type"] == "Ready" and c["status"] == "True"
                            for c in n.get("status", {}).get("conditions", [])
                        )
                    ]
                    if (
                        items
                        and len(ready) == len(items)
                        and not any(
                            t.get("key", "").startswith("node.kubernetes.io/")
                            for n in items
                            for t in n.get("spec", {}).get("taints", []) or []
                        )
                    ):
                        return
                    waiting = f"Ready nodes from the process kubelet ({len(ready)}/{len(items)})"
            time.sleep(0.25)
        raise ClusterError(
            f"step wait-settled: still waiting for {waiting} after {timeout:.0f}s; "
            f"logs in {self.workdir / 'logs'}"
        )

    # ---------------------------------------------------------------- inspect / stop
    def total_rss(self) -> int:
        return sum(rss_bytes(p) for p in self.pids.values() if _alive(p))

    def rss_by_component(self) -> dict[str, int]:
        return {n: rss_bytes(p) for n, p in self.pids.items() if _alive(p)}

    def kill_pod_processes(self) -> None:
        """Pod processes left behind by a kubelet that died without cleaning up."""
        pods = self.workdir / "pods"
        for pidfile in pods.glob("*/containers/*/pid"):
            try:
                pid = int(pidfile.read_text())
                if os.readlink(f"/proc/{pid}/cwd").startswith(str(pods)):
                    _signal_group(pid, signal.SIGKILL)
            except (ValueError, OSError):
                pass

    def stop(self, grace: float = 10.0) -> None:
        stop_pids(self.pids, grace)
        self.kill_pod_processes()
        for proc in getattr(self, "_procs", {}).values():
            try:
                proc.wait(timeout=0.1)
            except subprocess.TimeoutExpired:
                pass
        self.pids = {}
        if self.workdir.exists():
            self._save_state()

    @classmethod
    def from_state(cls, workdir: Path) -> Cluster:
        st = json.loads((workdir / "state.json").read_text())
        c = cls(
            workdir=workdir,
            version=st.get("version", K8S_VERSION),
            apiserver_port=st.get("apiserver_port", 0),
        )
        c.pids = {k: int(v) for k, v in st.get("pids", {}).items()}
        return c


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def stop_pids(pids: dict[str, int], grace: float = 10.0) -> None:
    """SIGTERM in reverse start order (kubelet first, etcd last), then SIGKILL stragglers.

    Every component runs in its own session, so its whole process group is signalled."""
    order = list(pids.items())[::-1]
    for _name, pid in order:
        _signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            _signal_group(pid, signal.SIGKILL)
    for _name, pid in order:  # children of groups (e.g. pod processes) die with their group
        _signal_group(pid, signal.SIGKILL)


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
