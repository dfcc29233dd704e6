"""The test cluster: a real Kubernetes control plane and real nodes on this machine.

Starts etcd + kube-apiserver (RBAC, static-token auth, x509 client CA, service-account signing
keys) + kube-controller-manager (all default controllers, per-controller service-account
credentials) + kube-scheduler + CoreDNS, then the nodes: per node containerd, the kubelet and
kube-proxy, each node in its own network namespace on the cluster's private switch
(network.py, node.py); the pods are containers of the images ``hack/image/build.sh`` builds
(images.py). The API server and CoreDNS listen on the host's address on that switch
(``100.64.N.1``); etcd on 127.0.0.1.

Binaries come from ``hack/cluster/build.sh`` (cached under
``${LLMBENCH_CACHE:-~/.cache/llmbench}/k8s-<version>/bin``). Everything is stopped by PID, also
when the start fails half-way; the cluster's network, cgroups and containers are removed by
``network.release``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from . import images as images_mod
from . import network
from . import node as node_mod
from .processes import alive, die_with_parent, rss_bytes, stop_pids

K8S_VERSION = os.environ.get("LLMBENCH_K8S_VERSION", "v1.35.4")
SIM_VERSION = os.environ.get("LLMBENCH_SIM_VERSION", "v0.10.2")
REPO_ROOT = Path(__file__).resolve().parents[2]
COREDNS_VERSION = os.environ.get("LLMBENCH_COREDNS_VERSION", "v1.13.1")
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")
NODE_COMPONENTS = ("kubelet", "kube-proxy")
#: Host commands a real node needs, and the Debian package that provides each.
NODE_TOOLS = {"containerd": "containerd", "ctr": "containerd", "runc": "runc",
              "iptables": "iptables", "conntrack": "conntrack", "ip": "iproute2",
              "nsenter": "util-linux", "unshare": "util-linux"}


class ClusterError(RuntimeError):
    """One-line, actionable reason why the test cluster could not start."""


def cache_dir() -> Path:
    return Path(os.environ.get("LLMBENCH_CACHE", Path.home() / ".cache" / "llmbench"))


def bin_dir(version: str = K8S_VERSION) -> Path:
    return cache_dir() / f"k8s-{version}" / "bin"


def sim_binary() -> Path:
    return cache_dir() / f"llm-d-inference-sim-{SIM_VERSION}" / "bin" / "llm-d-inference-sim"


def coredns_binary() -> Path:
    return cache_dir() / f"coredns-{COREDNS_VERSION}" / "bin" / "coredns"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def check_port_free(port: int, what: str, host: str = "127.0.0.1") -> None:
    with socket.socket() as s:
        try:
            s.bind((host, port))
        except OSError as exc:
            raise ClusterError(
                f"step ports: {host}:{port} ({what}) is already in use ({exc.strerror}) — "
                f"stop whatever listens there (ss -ltnp 'sport = :{port}') or pick another port"
            ) from None


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


def make_pki(pki: Path, ips: tuple[str, ...]) -> None:
    """CA, apiserver serving cert (127.0.0.1, ``ips``, localhost, kubernetes.default.svc), SA
    key pair, and the apiserver's client certificate for the kubelets (``logs``, ``exec``)."""
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
        "subjectAltName=IP:127.0.0.1," + "".join(f"IP:{ip}," for ip in ips) +
        "DNS:localhost,DNS:kubernetes,"
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
    (pki / "client.cnf").write_text(
        "[req]\ndistinguished_name=dn\n[dn]\n[ext]\nbasicConstraints=CA:FALSE\n"
        "keyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n"
    )
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", "kubelet-client.key",
             "-out", "kubelet-client.csr",
             "-subj", "/O=system:masters/CN=kube-apiserver-kubelet-client", cwd=pki)
    _openssl("x509", "-req", "-in", "kubelet-client.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
             "-CAcreateserial", "-out", "kubelet-client.crt", "-days", "3650",
             "-extfile", "client.cnf", "-extensions", "ext", cwd=pki)


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
    net_index: int = 0  # the cluster number (network.py); 0: none claimed
    #: seconds per start phase (images, network, control plane, nodes ...), for the figures
    phases: dict[str, float] = field(default_factory=dict)
    #: more kube-apiserver flags (benchmarks/operator_queue.py turns on its audit log)
    apiserver_args: tuple[str, ...] = ()

    @property
    def node_specs(self) -> tuple[node_mod.NodeSpec, ...]:
        return node_mod.NODE_SETS[self.nodes]

    @property
    def net(self) -> network.ClusterNet:
        if not self.net_index:
            raise ClusterError("this cluster has no network (not started)")
        return network.ClusterNet(self.net_index, tuple(n.name for n in self.node_specs))

    @property
    def host(self) -> str:
        """The API server's address: the host's address on the cluster switch."""
        return self.net.host_ip if self.net_index else "127.0.0.1"

    def node_paths(self, node: str) -> node_mod.NodePaths:
        return node_mod.node_paths(self.net, node, cache_dir(), self.workdir)

    def container_pid(self, pod: dict) -> int:
        """The host PID of a running pod's first container (its containerd task)."""
        cid = pod["status"]["containerStatuses"][0]["containerID"]
        sock = self.node_paths(pod["spec"]["nodeName"]).containerd_sock
        for line in images_mod.ctr(sock, "tasks", "ls").stdout.splitlines()[1:]:
            task, pid, *_ = line.split()
            if task == cid.removeprefix("containerd://"):
                return int(pid)
        raise ClusterError(f"no containerd task for {cid} on {pod['spec']['nodeName']}")

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "admin.kubeconfig"

    @property
    def server(self) -> str:
        return f"https://{self.host}:{self.apiserver_port}"

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

    def _check_binaries(self) -> None:
        bins = bin_dir(self.version)
        needed = [bins / c for c in (*COMPONENTS, *NODE_COMPONENTS)] + [coredns_binary()]
        missing = [p.name for p in needed if not p.is_file()]
        if missing:
            raise ClusterError(
                f"step binaries: {', '.join(missing)} missing in {cache_dir()} — run "
                f"'bash hack/cluster/build.sh {self.version}' (cold build ~15-20 min)"
            )
        path = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
        absent = [t for t in NODE_TOOLS if shutil.which(t, path=path) is None]
        if absent:
            pkgs = " ".join(sorted({NODE_TOOLS[t] for t in absent}))
            raise ClusterError(
                f"step packages: {', '.join(absent)} not found — run 'bash "
                f"hack/cluster/build.sh' (it installs them) or apt-get install -y {pkgs}"
            )
        if os.geteuid() != 0:
            raise ClusterError(
                "step packages: the nodes need root (network namespaces, cgroups, containerd) "
                "— run as root, or point the e2e tests at another cluster with "
                "LLMBENCH_E2E_KUBECONFIG"
            )

    def _phase(self, name: str, t0: float) -> float:
        now = time.monotonic()
        self.phases[name] = round(now - t0, 2)
        return now

    def _start(self, timeout: float) -> None:
        bins = bin_dir(self.version)
        self._check_binaries()
        t = time.monotonic()
        try:
            built = images_mod.built_images()
        except images_mod.ImageError as exc:
            raise ClusterError(str(exc)) from None
        t = self._phase("images-build", t)
        self.workdir.mkdir(parents=True, exist_ok=True)
        if self.state_file.exists():
            old = json.loads(self.state_file.read_text())
            if any(alive(p) for p in old.get("pids", {}).values()):
                raise ClusterError(
                    f"step workdir: a cluster is still running from {self.workdir} — "
                    f"stop it first (hack/cluster/down.sh {self.workdir})"
                )
        for sub in ("etcd", "logs"):
            d = self.workdir / sub
            if d.exists():
                subprocess.run(["rm", "-rf", str(d)], check=False)
            d.mkdir(parents=True)
        try:
            net = network.claim(self.workdir, [n.name for n in self.node_specs])
            self.net_index = net.index
            self._save_state()
            network.setup(net)
        except network.NetworkError as exc:
            raise ClusterError(str(exc)) from None
        t = self._phase("network", t)
        pki = self.workdir / "pki"
        make_pki(pki, (net.host_ip, net.kubernetes_service_ip))

        if self.apiserver_port:
            check_port_free(self.apiserver_port, "kube-apiserver", self.host)
        else:
            self.apiserver_port = free_port(self.host)
        etcd_port, peer_port = free_port(), free_port()
        tokens = {n: os.urandom(16).hex() for n in ("admin", "cm", "sched", "proxy", "dns")}
        node_tokens = {n.name: os.urandom(16).hex() for n in self.node_specs}
        (self.workdir / "admin.token").write_text(tokens["admin"])
        (pki / "tokens.csv").write_text(
            f'{tokens["admin"]},admin,admin,"system:masters"\n'
            f"{tokens['cm']},system:kube-controller-manager,kcm\n"
            f"{tokens['sched']},system:kube-scheduler,ksched\n"
            f"{tokens['proxy']},system:kube-proxy,kproxy\n"
            # CoreDNS only reads Services, EndpointSlices, pods and namespaces; the bootstrap
            # roles have none for it, and this is a throwaway cluster's DNS
            f'{tokens["dns"]},llmbench:coredns,coredns,"system:masters"\n'
            + "".join(f'{tok},system:node:{name},node-{name},"system:nodes"\n'
                      for name, tok in node_tokens.items())
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
                f"--bind-address={self.host}",
                f"--advertise-address={self.host}",
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
                f"--service-cluster-ip-range={net.service_cidr}",
                "--allow-privileged=true",
                "--kubelet-preferred-address-types=InternalIP",
                f"--kubelet-client-certificate={pki / 'kubelet-client.crt'}",
                f"--kubelet-client-key={pki / 'kubelet-client.key'}",
                "--profiling=false",
                "--v=1",
                *self.apiserver_args,
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
        t = self._phase("control-plane", t)
        self._start_dns(tokens["dns"], pki)
        self._start_nodes(built, node_tokens, tokens["proxy"], pki)
        t = self._phase("nodes-start", t)
        self._wait_settled(timeout)
        self._phase("nodes-ready", t)
        self._save_state()

    # ---------------------------------------------------------------- real nodes
    def _start_dns(self, token: str, pki: Path) -> None:
        """CoreDNS on the host's switch address, port 53: Service names of this cluster."""
        kubeconfig = self.workdir / "coredns.kubeconfig"
        write_kubeconfig(kubeconfig, self.server, pki / "ca.crt", token, "coredns")
        corefile = self.workdir / "Corefile"
        corefile.write_text(
            f"cluster.local:53 {{\n  bind {self.net.host_ip}\n  errors\n"
            f"  kubernetes cluster.local {{\n    kubeconfig {kubeconfig} llmbench\n"
            f"    pods insecure\n  }}\n}}\n"
        )
        self._spawn("coredns", [str(coredns_binary()), "-conf", str(corefile)])

    def _start_nodes(self, built: dict[str, images_mod.Image], node_tokens: dict[str, str],
                     proxy_token: str, pki: Path) -> None:
        """containerd on every node, the images imported, then kube-proxy and the kubelet."""
        import yaml

        net, bins = self.net, bin_dir(self.version)
        pause = built["pause"].ref
        for spec in self.node_specs:
            paths = self.node_paths(spec.name)
            for d in (paths.run / "cni", paths.store, paths.logs):
                d.mkdir(parents=True, exist_ok=True)
            (paths.run / "containerd.toml").write_text(node_mod.containerd_config(paths, pause))
            (paths.run / "cni" / "10-llmbench.conflist").write_text(
                json.dumps(node_mod.cni_config(net, spec.name, paths), indent=1))
            network.create_cgroup(net.cgroup_root(spec.name))
        self._start_containerds()
        t = time.monotonic()
        with ThreadPoolExecutor(len(self.node_specs)) as pool:
            loaded = list(pool.map(
                lambda spec: self._load_images(spec.name, list(built.values())),
                self.node_specs))
        self.phases["images-import"] = round(time.monotonic() - t, 2)
        self.phases["images-imported"] = sum(len(x) for x in loaded)
        for spec in self.node_specs:
            paths = self.node_paths(spec.name)
            kubeconfig = paths.run / "kubelet.kubeconfig"
            write_kubeconfig(kubeconfig, self.server, pki / "ca.crt", node_tokens[spec.name],
                             f"system:node:{spec.name}")
            proxy_kubeconfig = paths.run / "kube-proxy.kubeconfig"
            write_kubeconfig(proxy_kubeconfig, self.server, pki / "ca.crt", proxy_token,
                             "system:kube-proxy")
            kcfg = paths.run / "kubelet.yaml"
            kcfg.write_text(yaml.safe_dump(
                node_mod.kubelet_config(net, spec.name, paths, pki / "ca.crt")))
            pcfg = paths.run / "kube-proxy.yaml"
            pcfg.write_text(yaml.safe_dump(
                node_mod.kube_proxy_config(net, spec.name, proxy_kubeconfig)))
            self._spawn(f"kube-proxy-{spec.name}",
                        node_mod.kube_proxy_argv(bins / "kube-proxy", net, spec.name, pcfg))
            self._spawn(f"kubelet-{spec.name}", node_mod.kubelet_argv(
                bins / "kubelet", net, spec.name, self.pids[f"containerd-{spec.name}"], paths,
                kcfg, kubeconfig))

    def _start_containerds(self, again: bool = False) -> None:
        """containerd on every node, waiting for its socket; containers a killed run left in
        a node's (persistent) store are deleted, and that containerd restarted clean."""
        for spec in self.node_specs:
            paths = self.node_paths(spec.name)
            paths.containerd_sock.unlink(missing_ok=True)
            self._spawn(f"containerd-{spec.name}", node_mod.containerd_argv(
                self.net, spec.name, paths.run / "containerd.toml"))
        stale = []
        for spec in self.node_specs:
            sock = self.node_paths(spec.name).containerd_sock
            name = f"containerd-{spec.name}"
            deadline = time.monotonic() + 60
            while True:
                self._check_alive()
                if sock.exists() and images_mod.ctr(sock, "version", timeout=10).returncode == 0:
                    break
                if time.monotonic() > deadline:
                    raise ClusterError(
                        f"step start-{name}: no socket {sock} after 60s; see "
                        f"{self.workdir / 'logs' / (name + '.log')}")
                time.sleep(0.1)
            left = images_mod.ctr(sock, "containers", "ls", "-q").stdout.split()
            if left:
                images_mod.ctr(sock, "containers", "delete", *left)
                stale.append(spec.name)
        if stale and not again:
            for spec in self.node_specs:
                name = f"containerd-{spec.name}"
                stop_pids({name: self.pids.pop(name)})
                self._procs.pop(name).wait(10)
            self._start_containerds(again=True)

    def _load_images(self, node: str, images: list[images_mod.Image]) -> list[str]:
        try:
            return images_mod.load(self.node_paths(node).containerd_sock, images)
        except images_mod.ImageError as exc:
            raise ClusterError(f"{exc} (node {node})") from None

    def _advertise_gpus(self, node: dict) -> bool:
        """``nvidia.com/gpu`` in the node's status capacity (the documented way to advertise
        an extended resource; the kubelet copies it to allocatable). True once allocatable."""
        name = node["metadata"]["name"]
        spec = node_mod.NODE_BY_NAME.get(name)
        if spec is None or not spec.gpus:
            return True
        want = str(spec.gpus)
        if (node.get("status", {}).get("allocatable") or {}).get("nvidia.com/gpu") == want:
            return True
        if (node.get("status", {}).get("capacity") or {}).get("nvidia.com/gpu") != want:
            self.api(f"/api/v1/nodes/{name}/status", "PATCH",
                     {"status": {"capacity": {"nvidia.com/gpu": want}}},
                     content_type="application/merge-patch+json")
        return False

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
                preexec_fn=die_with_parent if self.tie_to_parent else None,
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
                    "net_index": self.net_index,
                    "phases": self.phases,
                    "apiserver_port": self.apiserver_port,
                    "version": self.version,
                    "kubeconfig": str(self.kubeconfig),
                    "server": self.server,
                },
                indent=1,
            )
        )

    def api(
        self, path: str, method: str = "GET", body: dict | None = None, timeout: float = 5.0,
        content_type: str = "application/json",
    ) -> tuple[int, dict | str]:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(
            self.server + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.admin_token}",
                "Content-Type": content_type,
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
                    gpus_ok = all([self._advertise_gpus(n) for n in items])
                    if len(items) < len(self.node_specs):
                        ready = []
                    elif not gpus_ok:
                        waiting = "nvidia.com/gpu in the GPU nodes' allocatable"
                        time.sleep(0.25)
                        continue
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
                    waiting = f"Ready nodes ({len(ready)}/{len(self.node_specs)})"
            time.sleep(0.25)
        raise ClusterError(
            f"step wait-settled: still waiting for {waiting} after {timeout:.0f}s; "
            f"logs in {self.workdir / 'logs'}"
        )

    # ---------------------------------------------------------------- inspect / stop
    def total_rss(self) -> int:
        return sum(rss_bytes(p) for p in self.pids.values() if alive(p))

    def rss_by_component(self) -> dict[str, int]:
        return {n: rss_bytes(p) for n, p in self.pids.items() if alive(p)}

    def release_network(self) -> None:
        """The cluster's containers, namespaces, cgroups and cluster number (network.py)."""
        if self.net_index:
            network.release(self.net)
            self.net_index = 0

    def stop(self, grace: float = 10.0) -> None:
        stop_pids(self.pids, grace)
        self.release_network()
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
            net_index=st.get("net_index", 0),
        )
        c.pids = {k: int(v) for k, v in st.get("pids", {}).items()}
        return c
