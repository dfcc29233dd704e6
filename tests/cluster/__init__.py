"""llmbench test cluster: a real Kubernetes control plane and real nodes on this machine.

Shell: ``hack/cluster/build.sh``, ``hack/cluster/up.sh``, ``hack/cluster/down.sh``.
Python: ``Cluster(workdir).start()`` / ``.stop()`` (see controlplane.py).
"""

from .controlplane import (
    COMPONENTS,
    K8S_VERSION,
    Cluster,
    ClusterError,
    bin_dir,
    sim_binary,
)

__all__ = ["COMPONENTS", "K8S_VERSION", "Cluster", "ClusterError", "bin_dir", "sim_binary"]
