"""Cold and warm wall times of the test cluster and of the demo, step by step.

Each step is timed the way a user runs it:

* ``build``: ``bash hack/cluster/build.sh`` (packages, then kubelet, kube-proxy, the control
  plane, etcd, llm-d-inference-sim, helm, CoreDNS);
* ``images``: ``bash hack/image/build.sh`` (base, the Dockerfile, sim, dcgm, pause);
* ``up``: ``bash hack/cluster/up.sh`` with its phases (images imported into the nodes'
  containerd on the first start of a cluster number, then warm);
* ``demo``: ``bash hack/demo.sh --quick`` end to end, and ``--down``.

Warm (the default) runs everything twice in the machine's cache and reports the second run.
``--cold`` first points ``LLMBENCH_CACHE`` and ``GOCACHE`` at a fresh temporary folder (the Go
module download cache stays: the proxy's bytes are not what is measured), so build, images
and the first ``up`` (the image import) are cold; the Debian packages are the machine's.

    python benchmarks/cluster_times.py            # warm, ~2 min
    python benchmarks/cluster_times.py --cold     # ~40 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(cmd: list[str], env: dict[str, str], timeout: float = 7200) -> tuple[float, str]:
    t0 = time.monotonic()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    dt = time.monotonic() - t0
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout[-2000:]}\n"
                           f"{r.stderr[-2000:]}")
    return dt, r.stdout + r.stderr


def up_down(env: dict[str, str], where: Path) -> tuple[float, dict[str, float]]:
    dt, _ = timed(["bash", "hack/cluster/up.sh", "--dir", str(where)], env)
    phases = json.loads((where / "state.json").read_text()).get("phases", {})
    timed(["bash", "hack/cluster/down.sh", "--dir", str(where)], env)
    return dt, phases


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cold", action="store_true", help="fresh LLMBENCH_CACHE and GOCACHE")
    p.add_argument("--no-demo", action="store_true")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="llmbench-times-") as tmp:
        env = dict(os.environ)
        if a.cold:
            env.update(LLMBENCH_CACHE=f"{tmp}/cache", GOCACHE=f"{tmp}/gocache")
        rows: list[tuple[str, float, str]] = []
        for rnd in ("first", "second") if not a.cold else ("cold", "warm"):
            dt, _ = timed(["bash", "hack/cluster/build.sh"], env)
            rows.append((f"build ({rnd})", dt, ""))
            dt, out = timed(["bash", "hack/image/build.sh"], env)
            built = re.search(r"images: built in (\d+) s", out)
            rows.append((f"images ({rnd})", dt, "rebuilt" if built else "nothing to build"))
            dt, phases = up_down(env, Path(tmp) / f"cluster-{rnd}")
            rows.append((f"up ({rnd})", dt, ", ".join(f"{k} {v}" for k, v in phases.items())))
            if not a.no_demo:
                dt, _ = timed(["bash", "hack/demo.sh", "--quick", "--dir", f"{tmp}/demo-{rnd}"],
                              env)
                rows.append((f"demo --quick ({rnd})", dt, ""))
                timed(["bash", "hack/demo.sh", "--down", "--dir", f"{tmp}/demo-{rnd}"], env)
        for name, dt, note in rows:
            print(f"{name:<22}{dt:>9.1f} s  {note}")


if __name__ == "__main__":
    main()
