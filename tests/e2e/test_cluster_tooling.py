"""The cluster scripts themselves: figures printed, bad input and faults give one clear line,
a half-started cluster is torn down, concurrent builds wait for each other. These start their
own throwaway control planes, so they need the cached binaries but not LLMBENCH_E2E_KUBECONFIG.

Nothing here starts a cold build (~11 min): the tests that need the real binaries fail at once
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
from tests.cluster import COMPONENTS, K8S_VERSION, Cluster, ClusterError, bin_dir, sim_binary
from tests.cluster.controlplane import _alive

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
    wanted = [bin_dir() / c for c in COMPONENTS] + [sim_binary()]
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
    paths = [k8s_bin / c for c in COMPONENTS] + [sim_bin / "llm-d-inference-sim", helm_bin / "helm"]
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


def test_port_in_use_is_one_clear_line_and_starts_nothing(tmp_path):
    require_prebuilt()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        c = Cluster(workdir=tmp_path / "c", apiserver_port=port)
        with pytest.raises(ClusterError) as ei:
            c.start()
    msg = str(ei.value)
    assert "\n" not in msg
    assert f"127.0.0.1:{port}" in msg and "already in use" in msg
    assert not c.pids


def test_half_started_cluster_is_torn_down(tmp_path):
    require_prebuilt()
    c = Cluster(workdir=tmp_path / "c", nodes="no-such-node-set", tie_to_parent=True)
    started: dict[str, int] = {}
    orig = c._spawn

    def spy(name, argv, cwd=None):
        orig(name, argv, cwd)
        started[name] = c.pids[name]

    c._spawn = spy  # type: ignore[method-assign]
    with pytest.raises(ClusterError, match="step start-kubelet: exited with code 2"):
        c.start(timeout=60)
    assert set(started) == {
        "etcd",
        "kube-apiserver",
        "kube-controller-manager",
        "kube-scheduler",
        "kubelet",
    }
    alive = {n: p for n, p in started.items() if _alive(p)}
    assert not alive, f"left running after a failed start: {alive}"


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
    assert pids and not [p for p in pids.values() if _alive(p)]
