"""The cluster scripts themselves: figures printed, bad input and faults give one clear line,
a half-started cluster is torn down. These start their own throwaway control planes, so they
need the cached binaries but not LLMBENCH_E2E_KUBECONFIG."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cluster import Cluster, ClusterError
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


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=120, **kw)


def test_build_is_cached_after_first_run():
    r = run(["bash", str(BUILD)])
    assert r.returncode == 0, r.stderr
    assert "warm, nothing to build" in r.stdout, r.stdout + r.stderr


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


def test_build_rejects_bad_version(tmp_path):
    r = run(["bash", str(BUILD), "latest"], env=dict(os.environ, LLMBENCH_CACHE=str(tmp_path)))
    assert r.returncode != 0 and "step args" in r.stderr and "v1.35.4" in r.stderr


def test_missing_binaries_name_the_build_command(tmp_path):
    with pytest.raises(ClusterError, match=r"step binaries: .*hack/cluster/build.sh v1.0.0"):
        Cluster(workdir=tmp_path / "c", version="v1.0.0").start()


def test_port_in_use_is_one_clear_line_and_starts_nothing(tmp_path):
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
