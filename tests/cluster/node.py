"""A real node: containerd, the kubelet and kube-proxy (v1.35.4), in the node's own network
namespace (see network.py).

Everything here was measured to work on the project's machines (``REAL-NODE.md``):

* containerd 1.6 (Debian) with its own config: root, state and socket per node, the CRI
  plugin with a locally built ``sandbox_image``, CNI plugins from ``/usr/lib/cni``,
  ``restrict_oom_score_adj = true`` (no CAP_SYS_RESOURCE here: without it every sandbox fails
  with ``can't get final child's PID from pipe: EOF``), netns mounts under its state dir;
* CNI: ``bridge`` (``cni0`` inside the node's namespace, hairpin on, the node's pod subnet) +
  ``host-local`` (its own data dir) + ``portmap``;
* the kubelet: cgroup v1 allowed (``failCgroupV1: false``), ``cgroupfs`` driver, its own
  ``cgroupRoot`` per node, swap and node-allocatable enforcement off, no image GC (the images
  are imported, never pulled), the API server's client certificate trusted for ``logs``;
* kube-proxy in iptables mode with the cluster's pod range, conntrack sysctls untouched
  (those are the host's).

containerd runs in a mount namespace of its own (``unshare --mount``, slave propagation): its
pod netns mounts and the kubelet's volume mounts (the kubelet joins it with ``nsenter``) never
appear on the host, and vanish with the last process of the node. containerd's *root* (images
and their unpacked layers) is kept per cluster number and node under
``$LLMBENCH_CACHE/nodes/``, so the images are imported once, not at every start.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .network import ClusterNet, in_netns


@dataclass(frozen=True)
class NodeSpec:
    """One node of the test cluster: its name, zone and (advertised) GPUs."""

    name: str
    zone: str
    gpus: int = 0
    gpu_product: str = ""

    @property
    def labels(self) -> dict[str, str]:
        labels = {
            "topology.kubernetes.io/zone": self.zone,
            "topology.kubernetes.io/region": "local",
        }
        if self.gpus:
            labels.update({
                "nvidia.com/gpu.present": "true",
                "nvidia.com/gpu.product": self.gpu_product,
                "nvidia.com/gpu.count": str(self.gpus),
            })
        return labels

    @property
    def taints(self) -> list[str]:
        return ["nvidia.com/gpu=:NoSchedule"] if self.gpus else []


#: The test cluster's nodes (hack/cluster/README.md): the GPU node the demo and the operator
#: tests use, a second GPU node in another zone, a CPU node in the first zone.
NODE_SETS: dict[str, tuple[NodeSpec, ...]] = {
    "default": (
        NodeSpec("gpu-node-a", "zone-a", 8, "NVIDIA-H100-80GB-HBM3"),
        NodeSpec("gpu-node-b", "zone-b", 4, "NVIDIA-A100-SXM4-80GB"),
        NodeSpec("cpu-node-a", "zone-a"),
    ),
}


@dataclass(frozen=True)
class NodePaths:
    """Where one node keeps its files: runtime state under the cluster's run dir (short
    paths for unix sockets), the image store in the cache, logs in the cluster's workdir."""

    run: Path
    store: Path
    logs: Path

    @property
    def containerd_sock(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def kubelet_dir(self) -> Path:
        return self.run / "kubelet"

    @property
    def pods_dir(self) -> Path:
        return self.kubelet_dir / "pods"


def node_paths(net: ClusterNet, node: str, cache: Path, workdir: Path) -> NodePaths:
    return NodePaths(
        run=net.run_dir / node,
        store=cache / "nodes" / f"{net.index}-{node}",
        logs=workdir / "logs",
    )


def _toml(value: object) -> str:
    return json.dumps(value)  # strings, numbers, booleans and lists are the same in TOML


def containerd_config(paths: NodePaths, pause_image: str) -> str:
    """containerd 1.6's config for one node (version 2 schema)."""
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = {_toml(str(paths.store / "containerd"))}
state = {_toml(str(paths.run / "containerd-state"))}
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = {_toml(str(paths.containerd_sock))}

[ttrpc]
  address = {_toml(str(paths.run / "containerd.sock.ttrpc"))}

[{cri}]
  sandbox_image = {_toml(pause_image)}
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  enable_selinux = false
  stream_server_address = "127.0.0.1"
  max_container_log_line_size = 65536

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false

[{cri}.cni]
  bin_dir = "/usr/lib/cni"
  conf_dir = {_toml(str(paths.run / "cni"))}
  max_conf_num = 1

[{cri}.registry]
  config_path = ""
"""


def cni_config(net: ClusterNet, node: str, paths: NodePaths) -> dict[str, object]:
    """The node's pod network: a bridge inside its namespace, its own subnet and IPAM dir."""
    return {
        "cniVersion": "1.0.0",
        "name": "llmbench",
        "plugins": [
            {
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": True,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": net.pod_cidr(node)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(paths.run / "ipam"),
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }


def kubelet_config(net: ClusterNet, node: str, paths: NodePaths, ca: Path) -> dict[str, object]:
    """KubeletConfiguration of one node (REAL-NODE.md's settings plus the cluster's)."""
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": net.cgroup_root(node),
        "cgroupsPerQOS": True,
        "containerRuntimeEndpoint": f"unix://{paths.containerd_sock}",
        "address": net.node_ip(node),
        "port": 10250,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(ca)},
        },
        "authorization": {"mode": "Webhook"},
        "clusterDNS": [net.host_ip],
        "clusterDomain": "cluster.local",
        "resolvConf": "/etc/resolv.conf",
        "failSwapOn": False,
        "enforceNodeAllocatable": [],
        "localStorageCapacityIsolation": False,
        "protectKernelDefaults": False,
        "serializeImagePulls": False,
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "50Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%"},
        "volumeStatsAggPeriod": "0s",
        "registerWithTaints": [
            {"key": t.split("=")[0], "effect": t.split(":")[-1]}
            for t in NODE_BY_NAME[node].taints
        ],
        "nodeStatusReportFrequency": "20s",
        "nodeStatusUpdateFrequency": "5s",
        "rotateCertificates": False,
        "serverTLSBootstrap": False,
        "podPidsLimit": -1,
        "maxPods": 110,
        # the pods' logs with the node's other files (not the host's /var/log/pods)
        "podLogsDir": str(paths.run / "pod-logs"),
    }


def kube_proxy_config(net: ClusterNet, node: str, kubeconfig: Path) -> dict[str, object]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "mode": "iptables",
        "clusterCIDR": net.cluster_cidr,
        "hostnameOverride": node,
        "bindAddress": net.node_ip(node),
        "healthzBindAddress": "127.0.0.1:10256",
        "metricsBindAddress": "127.0.0.1:10249",
        # 0: leave the conntrack sysctls alone (the table size is the host's, not the node's)
        "conntrack": {"maxPerCore": 0, "min": 0, "tcpEstablishedTimeout": "0s",
                      "tcpCloseWaitTimeout": "0s"},
        "iptables": {"minSyncPeriod": "0s", "syncPeriod": "30s"},
    }


NODE_BY_NAME: dict[str, NodeSpec] = {n.name: n for s in NODE_SETS.values() for n in s}


#: Where every kubelet puts its device-plugin socket, whatever ``--root-dir`` says.
DEVICE_PLUGINS_DIR = "/var/lib/kubelet/device-plugins"


def containerd_argv(net: ClusterNet, node: str, config: Path) -> list[str]:
    """containerd in the node's netns and in a mount namespace of its own (slave: it still
    sees the host's mounts; its own never leave it).

    The namespace also gets a small tmpfs of its own on :data:`DEVICE_PLUGINS_DIR` (the
    kubelet joins this namespace): that path is fixed in the kubelet, so the kubelets of
    several nodes (and of two clusters on the machine) otherwise share one socket file, and
    two starting at once race on it ("bind: address already in use"; a demo start failed so).
    ``exec`` keeps the pid the kubelet's ``nsenter`` targets.
    """
    return in_netns(net.node_ns(node), [
        "unshare", "--mount", "--propagation", "slave", "--",
        "sh", "-c", 'mkdir -p "$1" && mount -t tmpfs -o size=1m,mode=0750 tmpfs "$1" && '
        'shift && exec "$@"',
        "llmbench-node", DEVICE_PLUGINS_DIR, "containerd", "--config", str(config),
    ])


def kubelet_argv(
    kubelet: Path, net: ClusterNet, node: str, containerd_pid: int, paths: NodePaths,
    config: Path, kubeconfig: Path,
) -> list[str]:
    """The kubelet in containerd's network and mount namespaces (volume mounts must be seen
    by containerd to reach the containers)."""
    spec = NODE_BY_NAME[node]
    labels = ",".join(f"{k}={v}" for k, v in spec.labels.items())
    return [
        "nsenter", f"--target={containerd_pid}", "--net", "--mount", "--",
        str(kubelet),
        f"--config={config}",
        f"--kubeconfig={kubeconfig}",
        f"--root-dir={paths.kubelet_dir}",
        f"--cert-dir={paths.run / 'kubelet-pki'}",
        f"--hostname-override={node}",
        f"--node-ip={net.node_ip(node)}",
        f"--node-labels={labels}",
        "--v=1",
    ]


def kube_proxy_argv(kube_proxy: Path, net: ClusterNet, node: str, config: Path) -> list[str]:
    return in_netns(net.node_ns(node), [str(kube_proxy), f"--config={config}", "--v=1"])
