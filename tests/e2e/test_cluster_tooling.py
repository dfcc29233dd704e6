"""The cluster scripts themselves: figures printed, bad input and faults give one clear line,
a half-started cluster is torn down (its network, namespaces and cluster number too), a
missing Debian package is named with its fix, concurrent builds wait for each other, and two
clusters on one machine do not meet. These start their own throwaway clusters, so they need
the cached binaries and images but not LLMBENCH_E2E_KUBECONFIG.

Nothing here starts a cold build (~15 min): the tests that need the real binaries fail at once
if ``bash hack/cluster/build.sh`` has not been run (``.ci/run`` always runs it first); the
build-script tests use a throwaway LLMBENCH_CACHE and stop before compiling."""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.charts.helm import HELM_VERSION
from tests.cluster import (
    COMPONENTS,
    K8S_VERSION,
    Cluster,
    ClusterError,
    bin_dir,
    network,
    sim_binary,
)
from tests.cluster import node as node_mod
from tests.cluster.controlplane import COREDNS_VERSION, NODE_COMPONENTS, coredns_binary
from tests.cluster.processes import alive

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        bool(os.environ.get("LLMBENCH_E2E_KUBECONFIG")),
        reason="tests the project's own cluster scripts; LLMBENCH_E2E_KUBECONFIG names another",
    ),
]

ROOT = Path(__file__).resolve().parents[2]
BUILD = ROOT / "hack" / "cluster" / "build.sh"
SIM_VERSION = "v0.10.2"


def _kill_group(p: subprocess.Popen) -> None:
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def run(cmd: list[str], timeout: float = 120, **kw) -> subprocess.CompletedProcess[str]:
    """subprocess.run, but in its own process group, all of which is killed on timeout (a
    build's go processes or a cluster's components are never left behind)."""
    with subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        start_new_session=True,
        **kw,
    ) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(p)
            out, err = p.communicate()
            pytest.fail(f"{' '.join(cmd)} ran over {timeout} s (killed):\n{out}\n{err}")
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def require_prebuilt() -> None:
    """The real cluster binaries, built beforehand: fail now rather than start a cold build."""
    wanted = [bin_dir() / c for c in (*COMPONENTS, *NODE_COMPONENTS)]
    wanted += [sim_binary(), coredns_binary()]
    missing = [str(b) for b in wanted if not os.access(b, os.X_OK)]
    if missing:
        pytest.fail(
            f"cluster binaries missing: {', '.join(missing)} — run 'bash hack/cluster/build.sh "
            f"{K8S_VERSION}' first (cold build ~11 min); these tests never start a build",
            pytrace=False,
        )


def _fake_binaries(cache: Path) -> list[Path]:
    """Executable stand-ins where build.sh looks for the binaries (for a temp LLMBENCH_CACHE)."""
    k8s_bin = cache / f"k8s-{K8S_VERSION}" / "bin"
    sim_bin = cache / f"llm-d-inference-sim-{SIM_VERSION}" / "bin"
    helm_bin = cache / f"helm-{HELM_VERSION}" / "bin"
    dns_bin = cache / f"coredns-{COREDNS_VERSION}" / "bin"
    paths = [k8s_bin / c for c in (*COMPONENTS, *NODE_COMPONENTS)]
    paths += [sim_bin / "llm-d-inference-sim", helm_bin / "helm", dns_bin / "coredns"]
    for p in paths:
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("#!/bin/sh\nexit 0\n")
        p.chmod(0o755)
    return paths


def _build_env(cache: Path, **extra: str) -> dict[str, str]:
    return dict(os.environ, LLMBENCH_CACHE=str(cache), LLMBENCH_SIM_VERSION=SIM_VERSION, **extra)


def _read_until(p: subprocess.Popen, needle: bytes, timeout: float) -> bytes:
    """What p wrote to stdout until it printed needle, exited, or timeout passed."""
    assert p.stdout is not None
    fd, buf = p.stdout.fileno(), b""
    deadline = time.monotonic() + timeout
    while needle not in buf:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        buf += chunk
    return buf


def test_build_is_cached_after_first_run():
    require_prebuilt()
    r = run(["bash", str(BUILD), K8S_VERSION], timeout=30)
    assert r.returncode == 0, r.stderr
    assert "warm, nothing to build" in r.stdout, r.stdout + r.stderr


def test_second_build_waits_for_the_lock_then_finds_the_binaries(tmp_path):
    """A run that finds the lock held says whom it waits for, waits, then re-checks: the
    holder built everything meanwhile, so it exits warm without building (GO points nowhere,
    so building would fail)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    env = _build_env(cache, GO=str(tmp_path / "no-go"))
    with open(cache / ".build.lock", "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lock.truncate(0)
        lock.write(f"{os.getpid()}\n")
        lock.flush()
        with subprocess.Popen(
            ["bash", str(BUILD), K8S_VERSION],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=env,
            start_new_session=True,
        ) as p:
            try:
                first = _read_until(p, b"\n", timeout=10).decode()
                assert f"waiting for another build (pid {os.getpid()})" in first, first
                assert p.poll() is None, "exited while the lock was still held"
                fakes = _fake_binaries(cache)  # the holder's build completes...
                fcntl.flock(lock, fcntl.LOCK_UN)  # ...and it lets go
                out, err = p.communicate(timeout=10)
            except BaseException:
                if p.returncode is None:  # not reaped yet: its pid is still its group's id
                    _kill_group(p)
                raise
    assert p.returncode == 0, first + out.decode() + err.decode()
    assert "warm, nothing to build" in out.decode(), first + out.decode()
    assert "step" not in out.decode() and not err, out.decode() + err.decode()
    assert all(f.read_text() == "#!/bin/sh\nexit 0\n" for f in fakes)
    assert not list(cache.glob(".tmp-*"))


def test_build_without_go_says_which_step_and_fix(tmp_path):
    env = dict(os.environ, LLMBENCH_CACHE=str(tmp_path), GO=str(tmp_path / "no-go"))
    r = run(["bash", str(BUILD), "v1.35.4"], env=env)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "step go-toolchain" in lines[0] and "install Go" in lines[0]


def test_build_download_failure_says_which_step_and_fix(tmp_path):
    env = dict(
        os.environ,
        LLMBENCH_CACHE=str(tmp_path),
        GOPROXY="off",
        GOMODCACHE=str(tmp_path / "mod"),
        GOFLAGS="-modcacherw",
    )
    r = run(["bash", str(BUILD), "v1.35.4"], env=env)
    assert r.returncode != 0
    err = [ln for ln in r.stderr.strip().splitlines() if ln]
    assert len(err) == 1, r.stderr
    assert "step download" in err[0] and "GOPROXY" in err[0]


def test_failed_build_leaves_no_temp_dir_and_no_partial_bin(tmp_path):
    """The build works in a private .tmp-* directory (a stale one from a killed run is
    removed under the lock) and renames a bin/ into place only when it is complete."""
    cache = tmp_path / "cache"
    (cache / ".tmp-stale" / "k8s-src").mkdir(parents=True)
    env = _build_env(cache, GOPROXY="off", GOMODCACHE=str(tmp_path / "mod"))
    r = run(["bash", str(BUILD), K8S_VERSION], timeout=60, env=env)
    assert r.returncode != 0
    assert "step download" in r.stderr, r.stdout + r.stderr
    assert not list(cache.glob(".tmp-*")), sorted(p.name for p in cache.iterdir())
    assert not (cache / f"k8s-{K8S_VERSION}" / "bin").exists()
    assert not (cache / f"llm-d-inference-sim-{SIM_VERSION}" / "bin").exists()


def test_build_rejects_bad_version(tmp_path):
    r = run(["bash", str(BUILD), "latest"], env=dict(os.environ, LLMBENCH_CACHE=str(tmp_path)))
    assert r.returncode != 0 and "step args" in r.stderr and "v1.35.4" in r.stderr


def test_missing_binaries_name_the_build_command(tmp_path):
    with pytest.raises(ClusterError, match=r"step binaries: .*hack/cluster/build.sh v1.0.0"):
        Cluster(workdir=tmp_path / "c", version="v1.0.0").start()


def claimed(workdir: Path) -> list[str]:
    """The cluster numbers claimed for ``workdir`` (network.py's claim files)."""
    return [p.name for p in network.RUN_DIR.glob("*.json") if str(workdir) in p.read_text()]


def test_port_in_use_is_one_clear_line_and_starts_nothing(tmp_path):
    require_prebuilt()
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))  # every address of this machine, the cluster's among them
        s.listen()
        port = s.getsockname()[1]
        c = Cluster(workdir=tmp_path / "c", apiserver_port=port)
        with pytest.raises(ClusterError) as ei:
            c.start()
    msg = str(ei.value)
    assert "\n" not in msg
    assert f":{port} (kube-apiserver) is already in use" in msg, msg
    assert not c.pids
    assert not claimed(tmp_path / "c"), "the cluster number stayed claimed"


def test_half_started_cluster_is_torn_down(tmp_path, monkeypatch):
    """A kubelet that refuses its configuration fails the start half-way, after the control
    plane, containerd and kube-proxy started: everything is stopped and the cluster's
    network, namespaces and number are released."""
    require_prebuilt()
    good = node_mod.kubelet_config
    monkeypatch.setattr(node_mod, "kubelet_config",
                        lambda *a: {**good(*a), "kind": "NoSuchConfiguration"})
    c = Cluster(workdir=tmp_path / "c", tie_to_parent=True)
    started: dict[str, int] = {}
    orig = c._spawn

    index: list[int] = []

    def spy(name, argv, cwd=None):
        orig(name, argv, cwd)
        started[name] = c.pids[name]
        index[:] = [c.net_index]

    c._spawn = spy  # type: ignore[method-assign]
    with pytest.raises(ClusterError, match=r"step start-kubelet-[a-z-]+: exited with code"):
        c.start(timeout=90)
    assert {"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "coredns",
            "containerd-gpu-node-a", "kube-proxy-gpu-node-a"} <= set(started), started
    left = {n: p for n, p in started.items() if alive(p)}
    assert not left, f"left running after a failed start: {left}"
    assert not claimed(tmp_path / "c"), "the cluster number stayed claimed"
    assert not network_of(index[0]) or claimed_by_another(index[0], tmp_path / "c")


def network_of(index: int) -> list[str]:
    """The namespaces and host link of cluster number ``index`` that exist now."""
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    found = [ln.split()[0] for ln in names.splitlines()
             if ln.split()[0] == f"llmbench-{index}" or ln.startswith(f"llmbench-{index}-")]
    link = subprocess.run(["ip", "link", "show", f"llmb{index}"], capture_output=True)
    return found + ([f"llmb{index}"] if link.returncode == 0 else [])


def claimed_by_another(index: int, workdir: Path) -> bool:
    """A concurrent session may take a released number at once: then its names are its."""
    claim = network.RUN_DIR / f"{index}.json"
    return claim.exists() and str(workdir) not in claim.read_text()


def test_shell_scripts_print_start_time_and_rss_and_stop_everything(tmp_path):
    require_prebuilt()
    d = tmp_path / "cli"
    scripts = ROOT / "hack" / "cluster"
    env = dict(os.environ, PYTHON=sys.executable)
    up = run(["bash", str(scripts / "up.sh"), "--dir", str(d)], env=env)
    try:
        assert up.returncode == 0, up.stderr
        m = re.search(r"cluster up in ([\d.]+) s \(warm start time\)", up.stdout)
        assert m, up.stdout
        rss = re.search(r"total RSS (\d+) MiB", up.stdout)
        assert rss and int(rss.group(1)) > 50, up.stdout
        assert f"export KUBECONFIG={d / 'admin.kubeconfig'}" in up.stdout
        kc = run(["kubectl", "--kubeconfig", str(d / "admin.kubeconfig"), "get", "nodes"])
        assert kc.returncode == 0 and "Ready" in kc.stdout, kc.stderr
        st = run(["bash", str(scripts / "status.sh"), "--dir", str(d)], env=env)
        assert "kube-apiserver" in st.stdout and "total RSS" in st.stdout, st.stdout + st.stderr
        print(up.stdout)
    finally:
        pids = Cluster.from_state(d).pids if (d / "state.json").exists() else {}
        down = run(["bash", str(scripts / "down.sh"), "--dir", str(d)], env=env)
    assert down.returncode == 0, down.stderr
    assert pids and not [p for p in pids.values() if alive(p)]


def test_a_missing_debian_package_is_named_with_its_fix(tmp_path):
    """build.sh checks the node packages by the commands they provide; with apt-get off
    (LLMBENCH_NO_APT=1) a PATH that lacks some of them fails naming each package and the
    apt-get line that installs them."""
    bin_dir_ = tmp_path / "bin"
    bin_dir_.mkdir()
    for tool in ("tr", "id", "nproc"):  # what build.sh runs before that step
        (bin_dir_ / tool).symlink_to(subprocess.run(
            ["sh", "-c", f"command -v {tool}"], capture_output=True, text=True).stdout.strip())
    env = dict(os.environ, PATH=str(bin_dir_), LLMBENCH_NO_APT="1",
               LLMBENCH_CACHE=str(tmp_path / "cache"))
    r = run(["/bin/bash", str(BUILD), K8S_VERSION], env=env)
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "step packages: missing Debian package(s): containerd buildah util-linux" in lines[0]
    assert "apt-get install -y --no-install-recommends containerd buildah util-linux" in lines[0]


def test_images_are_not_rebuilt_when_the_tree_is_unchanged():
    """hack/image/build.sh keys each image by its inputs: a second run builds nothing and
    lists the same archives; --list names them without building."""
    first = run(["bash", str(ROOT / "hack" / "image" / "build.sh")], timeout=1800)
    assert first.returncode == 0, first.stderr
    archives = [Path(line.split()[2]) for line in first.stdout.splitlines()]
    assert sorted(line.split()[0] for line in first.stdout.splitlines()) == [
        "dcgm", "llmbench", "pause", "sim"]
    mtimes = [a.stat().st_mtime_ns for a in archives]
    again = run(["bash", str(ROOT / "hack" / "image" / "build.sh")], timeout=60)
    assert again.returncode == 0 and again.stdout == first.stdout, again.stderr
    assert "step" not in again.stderr, again.stderr
    assert [a.stat().st_mtime_ns for a in archives] == mtimes
    listed = run(["bash", str(ROOT / "hack" / "image" / "build.sh"), "--list"], timeout=60)
    assert listed.stdout == first.stdout


def _echo(k8s_kubeconfig: Path, namespace: str, model: str) -> str:
    """llmbench sim (the built image) as Deployment+Service ``echo`` serving ``model``; the
    Service's ClusterIP once its pod is Ready."""
    def kubectl(*args: str) -> str:
        r = run(["kubectl", "--kubeconfig", str(k8s_kubeconfig), *args], timeout=120)
        assert r.returncode == 0, r.stderr
        return r.stdout

    kubectl("create", "namespace", namespace)
    kubectl("create", "deployment", "echo", "-n", namespace, "--image=localhost/llmbench:dev",
            "--port=8000", "--", "llmbench", "sim", "--host", "0.0.0.0", "--port", "8000",
            "--model", model)
    kubectl("expose", "deployment", "echo", "-n", namespace, "--port=8000")
    kubectl("rollout", "status", "deployment/echo", "-n", namespace, "--timeout=120s")
    return kubectl("get", "service", "echo", "-n", namespace, "-o",
                   "jsonpath={.spec.clusterIP}")


def _served_model(cluster_ip: str) -> str:
    import json
    import urllib.request

    deadline = time.monotonic() + 30  # kube-proxy programs a new Service within a second
    while True:
        try:
            with urllib.request.urlopen(f"http://{cluster_ip}:8000/v1/models", timeout=5) as r:
                return str(json.loads(r.read())["data"][0]["id"])
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def test_two_clusters_on_one_machine_do_not_meet(k8s, tmp_path):
    """The session's cluster and a second one at the same time: the same Service name in the
    same namespace routes, in each, to that cluster's own pod (each cluster's kube-proxy
    rules live in its nodes' namespaces, none in the host's), their pod and Service ranges
    differ, and stopping the second leaves the first serving."""
    require_prebuilt()
    if not k8s.local:
        pytest.fail("needs the project's own cluster (LLMBENCH_E2E_KUBECONFIG is set)")
    ns = f"isolation-{os.getpid()}"
    second = Cluster(workdir=tmp_path / "second", tie_to_parent=True).start()
    try:
        assert second.net_index != k8s.cluster.net_index
        assert second.net.cluster_cidr != k8s.cluster.net.cluster_cidr
        assert second.net.service_cidr != k8s.cluster.net.service_cidr
        ip_a = _echo(k8s.kubeconfig, ns, "cluster-a")
        ip_b = _echo(second.kubeconfig, ns, "cluster-b")
        assert _served_model(ip_a) == "cluster-a"
        assert _served_model(ip_b) == "cluster-b"
        host_rules = subprocess.run(["iptables-save"], capture_output=True, text=True).stdout
        assert "KUBE-SERVICES" not in host_rules, "kube-proxy wrote into the host's tables"
    finally:
        index = second.net_index
        second.stop()
    assert not network_of(index) or claimed_by_another(index, tmp_path / "second")
    assert _served_model(ip_a) == "cluster-a"
    run(["kubectl", "--kubeconfig", str(k8s.kubeconfig), "delete", "namespace", ns,
         "--wait=false"])
