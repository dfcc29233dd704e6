"""CLI: python -m tests.cluster up|down|status [--dir DIR] [--port N]."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from .controlplane import Cluster, ClusterError
from .processes import stop_pids

DEFAULT_DIR = os.environ.get("LLMBENCH_CLUSTER_DIR", "/tmp/llmbench-cluster")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.cluster")
    ap.add_argument("action", choices=["up", "down", "status"])
    ap.add_argument("--dir", default=DEFAULT_DIR, help=f"cluster directory ({DEFAULT_DIR})")
    ap.add_argument(
        "--port",
        type=int,
        default=int(os.environ.get("LLMBENCH_CLUSTER_PORT", 0)),
        help="kube-apiserver port (default: a free one)",
    )
    a = ap.parse_args(argv)
    workdir = Path(a.dir).resolve()
    if a.action == "up":
        t0 = time.monotonic()
        try:
            c = Cluster(workdir=workdir, apiserver_port=a.port).start()
        except ClusterError as exc:
            print(f"cluster up failed: {exc}", file=sys.stderr)
            return 1
        rss = c.rss_by_component()
        print(
            f"cluster up in {time.monotonic() - t0:.1f} s (warm start time), apiserver {c.server}"
        )
        print(
            f"total RSS {sum(rss.values()) / 2**20:.0f} MiB ("
            + ", ".join(f"{k} {v / 2**20:.0f}" for k, v in rss.items())
            + ")"
        )
        print(f"export KUBECONFIG={c.kubeconfig}")
        return 0
    if not (workdir / "state.json").exists():
        print(f"no cluster state in {workdir}", file=sys.stderr)
        return 0 if a.action == "down" else 1
    c = Cluster.from_state(workdir)
    if a.action == "status":
        rss = c.rss_by_component()
        print(
            f"apiserver {c.server}; running: {', '.join(rss) or 'nothing'}; "
            f"total RSS {sum(rss.values()) / 2**20:.0f} MiB; KUBECONFIG={c.kubeconfig}"
        )
        return 0
    stop_pids(c.pids)
    c.pids = {}
    c.release_network()
    c._save_state()
    print(f"cluster in {workdir} stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
