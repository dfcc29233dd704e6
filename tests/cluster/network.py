"""The test cluster's network: one private network per cluster, so clusters never meet.

Why: kube-proxy's iptables chains (``KUBE-SERVICES`` ...) are global per network namespace and
CNI bridge names and subnets are global per host, so two clusters on one machine (two pytest
sessions, the demo beside the tests, CI) would rewrite each other's rules. Here each cluster
claims a number ``N`` (1..MAX_CLUSTERS) and gets, all named and numbered from ``N``:

* a *switch*: network namespace ``llmbench-N`` holding bridge ``br0``; nothing else runs in it,
  so the bridged traffic between nodes passes only that namespace's (empty, ACCEPT) netfilter
  and never the host's ``FORWARD`` chain (which Docker sets to DROP);
* the host on that switch: veth ``llmbN`` in the host namespace with ``100.64.N.1/24``; the
  API server and the cluster DNS listen there, and the host reaches pods and Services through
  routes via the nodes;
* one network namespace per node, ``llmbench-N-<node>``, with ``eth0`` on the switch
  (``100.64.N.<10+i>``) and its own pod subnet ``10.<150+N>.<i>.0/24`` (the CNI bridge
  ``cni0`` lives inside it, so bridge names never clash); containerd, the kubelet and
  kube-proxy of that node run inside it;
* Services in ``10.200.N.0/24`` (the host routes them via the first node, whose kube-proxy
  translates them).

Claims live in ``/run/llmbench-clusters/N.json`` (tmpfs: a reboot clears them together with
the namespaces). A claim whose cluster is gone (its owner process and every process of its
``state.json`` dead: a killed pytest, a reboot-less crash) is reclaimed by the next start, which
first removes everything the dead cluster left: processes in its cgroups, containerd shims,
namespaces, the host veth and its routes (:func:`clean_leftovers`).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from .processes import alive

RUN_DIR = Path(os.environ.get("LLMBENCH_NET_DIR", "/run/llmbench-clusters"))
MAX_CLUSTERS = 40
CGROUP_FS = Path("/sys/fs/cgroup")


class NetworkError(RuntimeError):
    """One-line, actionable reason why the cluster network could not be set up."""


@dataclass(frozen=True)
class ClusterNet:
    """The names and addresses of cluster number ``index`` with ``nodes`` (in order)."""

    index: int
    nodes: tuple[str, ...]

    @property
    def switch_ns(self) -> str:
        return f"llmbench-{self.index}"

    @property
    def host_if(self) -> str:
        return f"llmb{self.index}"

    @property
    def host_ip(self) -> str:
        """The host's address on the switch: API server, cluster DNS."""
        return f"100.64.{self.index}.1"

    @property
    def cluster_cidr(self) -> str:
        return f"10.{150 + self.index}.0.0/16"

    @property
    def service_cidr(self) -> str:
        return f"10.200.{self.index}.0/24"

    @property
    def kubernetes_service_ip(self) -> str:
        """The ``kubernetes`` Service's ClusterIP (the first of the range)."""
        return f"10.200.{self.index}.1"

    @property
    def run_dir(self) -> Path:
        """Sockets and runtime state of this cluster's nodes (short paths: unix sockets)."""
        return RUN_DIR / str(self.index)

    def node_ns(self, node: str) -> str:
        return f"llmbench-{self.index}-{node}"

    def node_ip(self, node: str) -> str:
        return f"100.64.{self.index}.{10 + self.nodes.index(node)}"

    def pod_cidr(self, node: str) -> str:
        return f"10.{150 + self.index}.{self.nodes.index(node)}.0/24"

    def cgroup_root(self, node: str) -> str:
        """The kubelet's ``cgroupRoot``: every pod of ``node`` runs below it."""
        return f"/llmbench-{self.index}-{node}"


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    try:
        r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    except FileNotFoundError:
        raise NetworkError(
            "step network: 'ip' not found — run 'bash hack/cluster/build.sh' (it installs "
            "iproute2) or apt-get install -y iproute2"
        ) from None
    if check and r.returncode != 0:
        raise NetworkError(f"step network: 'ip {' '.join(args)}' failed: {r.stderr.strip()}")
    return r


def _ip_batch(lines: Sequence[str], ns: str | None = None) -> None:
    """Many ``ip`` commands in one process (``ip [-n NS] -batch -``); fails naming the first
    bad one."""
    argv = ["ip", *(["-n", ns] if ns else []), "-batch", "-"]
    r = subprocess.run(argv, input="\n".join(lines) + "\n", capture_output=True, text=True,
                       timeout=60)
    if r.returncode != 0:
        where = f" in {ns}" if ns else ""
        raise NetworkError(f"step network: ip -batch{where} failed: {r.stderr.strip()[:400]}")


def in_netns(ns: str, argv: Sequence[str]) -> list[str]:
    """``argv`` run inside network namespace ``ns`` (mounts, /sys and cgroups stay the host's:
    ``ip netns exec`` would remount /sys and hide the cgroup hierarchies)."""
    return ["nsenter", f"--net=/run/netns/{ns}", "--", *argv]


def _sysctl(ns: str, key: str, value: str) -> None:
    path = "/proc/sys/" + key.replace(".", "/")
    r = subprocess.run(in_netns(ns, ["sh", "-c", f"echo {value} > {path}"]),
                       capture_output=True, text=True, timeout=30)
    if r.returncode != 0:
        raise NetworkError(f"step network: {key}={value} in {ns} failed: {r.stderr.strip()}")


def setup(net: ClusterNet) -> None:
    """Switch, host veth, node namespaces, addresses and routes of ``net`` (fresh: call
    :func:`clean_leftovers` first)."""
    sw, host = net.switch_ns, net.host_if
    _ip_batch([
        f"netns add {sw}",
        *(f"netns add {net.node_ns(node)}" for node in net.nodes),
        f"link add {host} type veth peer name host netns {sw}",
        f"addr add {net.host_ip}/24 dev {host}",
        f"link set {host} up",
    ])
    switch = ["link set lo up", "link add br0 type bridge", "link set br0 up",
              "link set host master br0 up"]
    for i, node in enumerate(net.nodes):
        switch += [f"link add n{i} type veth peer name eth0 netns {net.node_ns(node)}",
                   f"link set n{i} master br0 up"]
    _ip_batch(switch, sw)
    for node in net.nodes:
        lines = [
            "link set lo up",
            f"addr add {net.node_ip(node)}/24 dev eth0",
            "link set eth0 up",
            f"route add default via {net.host_ip}",
        ]
        lines += [f"route add {net.pod_cidr(other)} via {net.node_ip(other)}"
                  for other in net.nodes if other != node]
        _ip_batch(lines, net.node_ns(node))
    _ip_batch([
        *(f"route add {net.pod_cidr(node)} via {net.node_ip(node)} dev {host}"
          for node in net.nodes),
        f"route add {net.service_cidr} via {net.node_ip(net.nodes[0])} dev {host}",
    ])
    for node in net.nodes:
        _sysctl(net.node_ns(node), "net.ipv4.ip_forward", "1")
        _sysctl(net.node_ns(node), "net.bridge.bridge-nf-call-iptables", "1")


# --------------------------------------------------------------------------------- cgroups


def cgroup_dirs(root: str) -> list[Path]:
    """``root`` in every mounted v1 hierarchy (or the v2 one), for create/kill/remove."""
    out = []
    for hierarchy in sorted(CGROUP_FS.iterdir()) if CGROUP_FS.is_dir() else []:
        if hierarchy.is_dir() and (hierarchy / "cgroup.procs").exists():
            out.append(hierarchy / root.lstrip("/"))
    if (CGROUP_FS / "cgroup.controllers").exists():  # pure cgroup v2
        out = [CGROUP_FS / root.lstrip("/")]
    return out


def create_cgroup(root: str) -> None:
    """The kubelet's ``cgroupRoot`` must exist in every hierarchy before it starts; cpuset
    needs its CPUs and memory nodes filled in before anything can join it."""
    for d in cgroup_dirs(root):
        d.mkdir(exist_ok=True)
        for key in ("cpuset.cpus", "cpuset.mems"):
            if (d / key).exists() and not (d / key).read_text().strip():
                (d / key).write_text((d.parent / key).read_text())


def _cgroup_pids(d: Path) -> set[int]:
    pids: set[int] = set()
    if not d.is_dir():
        return pids
    for procs in d.rglob("cgroup.procs"):
        with contextlib.suppress(OSError, ValueError):
            pids.update(int(p) for p in procs.read_text().split())
    return pids


def remove_cgroup(root: str, timeout: float = 15.0) -> None:
    """SIGKILL every process below ``root`` (the pods' containers), then remove the tree."""
    dirs = cgroup_dirs(root)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        pids = set().union(*(_cgroup_pids(d) for d in dirs)) if dirs else set()
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    for d in dirs:
        if not d.is_dir():
            continue
        for sub in sorted((p for p in d.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                sub.rmdir()
        with contextlib.suppress(OSError):
            d.rmdir()


# --------------------------------------------------------------------------------- claims


def _claim_alive(claim: dict[str, object]) -> bool:
    """Whether the cluster behind a claim still runs: its claimant, or any process its
    ``state.json`` lists."""
    owner = claim.get("pid")
    if isinstance(owner, int) and alive(owner):
        return True
    state = Path(str(claim.get("workdir", ""))) / "state.json"
    try:
        pids = json.loads(state.read_text()).get("pids", {})
    except (OSError, ValueError):
        return False
    return any(isinstance(p, int) and alive(p) for p in pids.values())


@contextlib.contextmanager
def _claims_locked() -> Iterator[None]:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    with open(RUN_DIR / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def claim(workdir: Path, nodes: Sequence[str]) -> ClusterNet:
    """A cluster number for ``workdir``: the one it held before (its cluster is known to be
    stopped: the caller checked ``state.json``), else the first free or dead one. Whatever
    the number's previous cluster left is removed first."""
    with _claims_locked():
        claims: dict[int, dict[str, object] | None] = {}
        for index in range(1, MAX_CLUSTERS + 1):
            try:
                claims[index] = json.loads((RUN_DIR / f"{index}.json").read_text())
            except (OSError, ValueError):
                claims[index] = None
        mine = [i for i, c in claims.items() if c is not None and c.get("workdir") == str(workdir)]
        free = [i for i, c in claims.items() if c is None or not _claim_alive(c)]
        if not mine and not free:
            raise NetworkError(
                f"step network: all {MAX_CLUSTERS} cluster numbers are in use (see "
                f"{RUN_DIR}/*.json) — stop a cluster (hack/cluster/down.sh --dir DIR)"
            )
        index = (mine or free)[0]
        clean_leftovers(index)
        (RUN_DIR / f"{index}.json").write_text(json.dumps(
            {"workdir": str(workdir), "pid": os.getpid(), "nodes": list(nodes)}))
        return ClusterNet(index, tuple(nodes))


def release(net: ClusterNet) -> None:
    """Everything of ``net`` removed, and its number free again."""
    with _claims_locked():
        clean_leftovers(net.index)
        with contextlib.suppress(FileNotFoundError):
            (RUN_DIR / f"{net.index}.json").unlink()


def _pids_with_arg(fragment: str) -> list[int]:
    """Processes whose command line contains ``fragment`` (a path only this cluster uses)."""
    out = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if fragment.encode() in (proc / "cmdline").read_bytes():
                out.append(int(proc.name))
    return [p for p in out if p != os.getpid()]


def clean_leftovers(index: int) -> None:
    """Remove whatever cluster ``index`` left: its nodes' processes (kubelet, kube-proxy,
    containerd and its shims, all of which name a path under its run dir), the pods in its
    cgroups, its namespaces, the host veth (its routes go with it) and its run dir."""
    run_dir = RUN_DIR / str(index)
    for pid in _pids_with_arg(f"{run_dir}/"):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    for hierarchy in cgroup_dirs("/"):
        for d in hierarchy.glob(f"llmbench-{index}-*"):
            remove_cgroup("/" + d.name)
    netns_dir = Path("/run/netns")
    names = [p.name for p in netns_dir.glob(f"llmbench-{index}-*")] if netns_dir.is_dir() else []
    if (netns_dir / f"llmbench-{index}").exists():
        names.append(f"llmbench-{index}")
    for ns in names:
        _ip("netns", "del", ns, check=False)
    _ip("link", "del", f"llmb{index}", check=False)
    if run_dir.exists():
        subprocess.run(["rm", "-rf", str(run_dir)], check=False)
