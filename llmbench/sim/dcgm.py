"""A simulated dcgm-exporter: Prometheus text in dcgm-exporter's format, driven by a load signal.

Why: the GPU telemetry path (scrape, filter by pod, difference the energy counter, detect stale
samples, render the GPU table) must be demonstrable and testable on a laptop or in CI with no
GPU. ``llmbench sim --dcgm`` serves :meth:`DcgmSimulator.metrics_text` next to the simulated
OpenAI endpoint, and the power and utilisation follow how busy the simulator is.

Nothing here pretends to be real: every series carries ``modelName="llmbench-simulated-GPU"``
and every HELP line says SIMULATED, so a simulated table can never be mistaken for a measured one.

The format (metric names, label set and order) follows dcgm-exporter's output::

    DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-...",pci_bus_id="00000000:00:00.0",
        device="nvidia0",modelName="llmbench-simulated-GPU",Hostname="llmbench-sim",
        DCGM_FI_DRIVER_VERSION="0.0.0-sim",container="...",namespace="...",pod="..."} 312.5

Example::

    sim = DcgmSimulator(DcgmSimState(n_gpus=2, pod="vllm-0", namespace="llm"),
                        load=lambda: running / max_running)
    text = sim.metrics_text()   # serve with content type text/plain; version=0.0.4
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid as uuid_mod
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "CONTENT_TYPE",
    "SIMULATED_MODEL_NAME",
    "DcgmSimState",
    "DcgmSimulator",
    "render",
    "serve_dcgm",
]

#: The ``modelName`` label of every simulated series.
SIMULATED_MODEL_NAME = "llmbench-simulated-GPU"
#: Content type dcgm-exporter (and Prometheus' text format 0.0.4) uses.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

_MIB_PER_GB = 1e9 / (1024 * 1024)

# (name, type, help) in dcgm-exporter's default-counters order.
_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    (
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "counter",
        "Total energy consumption since boot (in mJ).",
    ),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB)."),
    ("DCGM_FI_DEV_POWER_MGMT_LIMIT", "gauge", "Power management limit (in W)."),
    ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active."),
    (
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "gauge",
        "Ratio of cycles the tensor (HMMA) pipe is active.",
    ),
    (
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "gauge",
        "Ratio of cycles the device memory interface is active sending or receiving data.",
    ),
)


@dataclass
class DcgmSimState:
    """The simulated node: N identical GPUs, all serving one pod, and their energy counters.

    Power is ``idle_power_w + (max_power_w - idle_power_w) * load`` (plus a small fixed offset per
    GPU so the GPUs are distinguishable); the energy counter integrates the power actually in
    force between updates (left Riemann sum), so differencing it over a window gives exactly the
    mean power times the window. ``collect_interval_s`` emulates dcgm-exporter's ``-c``: values
    only change that often (0 = on every read), which exercises stale-sample detection.
    """

    n_gpus: int = 1
    hostname: str = "llmbench-sim"
    pod: str | None = None
    namespace: str | None = None
    container: str | None = None
    idle_power_w: float = 70.0
    max_power_w: float = 650.0
    power_limit_w: float = 700.0
    memory_total_gb: float = 80.0
    #: fraction of memory in use (vLLM pre-allocates ``gpu_memory_utilization``, default 0.9)
    memory_used_fraction: float = 0.9
    collect_interval_s: float = 0.0
    uuids: list[str] = field(default_factory=list)
    load: float = 0.0
    energy_mj: list[float] = field(default_factory=list)
    last_update_s: float | None = None
    last_collect_s: float | None = None
    #: values frozen at the last collect, per GPU (what the exporter would serve)
    snapshot: list[dict[str, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.uuids:
            self.uuids = [
                str(uuid_mod.uuid5(uuid_mod.NAMESPACE_DNS, f"{self.hostname}/gpu{i}"))
                for i in range(self.n_gpus)
            ]
            self.uuids = [f"GPU-{u}" for u in self.uuids]
        if not self.energy_mj:
            # a GPU that has been up a while: counters do not start at 0
            self.energy_mj = [1.0e9 + 1.0e7 * i for i in range(self.n_gpus)]

    def power_w(self, gpu: int, load: float | None = None) -> float:
        """Instantaneous power of ``gpu`` at ``load`` (default: the current load)."""
        ld = self.load if load is None else load
        return self.idle_power_w + (self.max_power_w - self.idle_power_w) * ld + 1.5 * gpu

    def update(self, load: float, now_s: float | None = None) -> None:
        """Advance the clock to ``now_s`` at the old load, then switch to ``load`` (0..1)."""
        now = time.monotonic() if now_s is None else now_s
        if self.last_update_s is not None and now > self.last_update_s:
            dt = now - self.last_update_s
            for i in range(self.n_gpus):
                self.energy_mj[i] += self.power_w(i) * dt * 1000.0
        self.last_update_s = now
        self.load = min(1.0, max(0.0, float(load)))
        if (
            self.last_collect_s is None
            or self.collect_interval_s <= 0
            or now - self.last_collect_s >= self.collect_interval_s
        ):
            self.last_collect_s = now
            self.snapshot = [self._values(i) for i in range(self.n_gpus)]

    def _values(self, i: int) -> dict[str, float]:
        ld = self.load
        total_mib = self.memory_total_gb * _MIB_PER_GB
        reserved = round(total_mib * 0.006)
        used = round(total_mib * self.memory_used_fraction)
        return {
            "DCGM_FI_DEV_SM_CLOCK": 1980.0 if ld > 0 else 345.0,
            "DCGM_FI_DEV_GPU_TEMP": round(32 + 40 * ld),
            "DCGM_FI_DEV_POWER_USAGE": round(self.power_w(i), 3),
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": float(round(self.energy_mj[i])),
            # GPU_UTIL saturates as soon as any kernel runs, as on real GPUs
            "DCGM_FI_DEV_GPU_UTIL": 0.0 if ld <= 0 else float(min(100, round(60 + 40 * ld))),
            "DCGM_FI_DEV_MEM_COPY_UTIL": float(round(70 * ld)),
            "DCGM_FI_DEV_FB_FREE": float(round(total_mib) - used - reserved),
            "DCGM_FI_DEV_FB_USED": float(used),
            "DCGM_FI_DEV_FB_RESERVED": float(reserved),
            "DCGM_FI_DEV_POWER_MGMT_LIMIT": self.power_limit_w,
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": round(0.95 * ld, 6),
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": round(0.45 * ld, 6),
            "DCGM_FI_PROF_DRAM_ACTIVE": round(0.6 * ld, 6),
        }


def _labels(state: DcgmSimState, i: int) -> str:
    pairs = [
        ("gpu", str(i)),
        ("UUID", state.uuids[i]),
        ("pci_bus_id", f"00000000:{0x18 + i:02X}:00.0"),
        ("device", f"nvidia{i}"),
        ("modelName", SIMULATED_MODEL_NAME),
        ("Hostname", state.hostname),
        ("DCGM_FI_DRIVER_VERSION", "0.0.0-sim"),
    ]
    if state.pod:
        pairs += [
            ("container", state.container or "server"),
            ("namespace", state.namespace or "default"),
            ("pod", state.pod),
        ]
    return ",".join(f'{k}="{v}"' for k, v in pairs)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else repr(float(v))


def render(state: DcgmSimState) -> str:
    """dcgm-exporter text for ``state``'s last collected values (collects once if never)."""
    if not state.snapshot:  # never updated: show the current load without moving the clock
        state.snapshot = [state._values(i) for i in range(state.n_gpus)]
    lines: list[str] = []
    for name, typ, help_ in _FIELDS:
        lines.append(f"# HELP {name} {help_} SIMULATED by llmbench, not a real GPU.")
        lines.append(f"# TYPE {name} {typ}")
        for i in range(state.n_gpus):
            lines.append(f"{name}{{{_labels(state, i)}}} {_num(state.snapshot[i][name])}")
    return "\n".join(lines) + "\n"


class DcgmSimulator:
    """Binds a :class:`DcgmSimState` to a load source; what ``llmbench sim --dcgm`` serves.

    ``load`` is called on every read and must return the busy fraction 0..1, e.g.
    ``running_sequences / max_concurrent_sequences`` of the simulated server.
    """

    def __init__(
        self,
        state: DcgmSimState | None = None,
        load: Callable[[], float] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Create; ``load`` defaults to always idle, ``clock`` to ``time.monotonic``."""
        self.state = state or DcgmSimState()
        self._load = load or (lambda: 0.0)
        self._clock = clock

    def metrics_text(self) -> str:
        """Advance the energy counters to now at the current load and render the exposition."""
        try:
            load = float(self._load())
        except Exception:  # a broken hook must not break the endpoint
            load = 0.0
        self.state.update(load, self._clock())
        return render(self.state)


async def serve_dcgm(
    sim: DcgmSimulator, host: str = "127.0.0.1", port: int = 9400, path: str = "/metrics"
) -> asyncio.Server:
    """Serve ``sim`` like dcgm-exporter does (``GET /metrics`` on its own port).

    A listener of its own, the way the real exporter runs beside the inference server, so a
    test can point ``--server-metrics-url http://host:PORT/metrics`` at it (``llmbench sim
    --dcgm`` instead serves the same text at ``/dcgm/metrics`` on the sim's own port). Minimal
    HTTP/1.1 (one request per connection); close it with ``server.close()``.
    """

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=10)
            method, target = (head.split(b"\r\n", 1)[0].split(b" ") + [b"", b""])[:2]
            if method == b"GET" and target.split(b"?", 1)[0] == path.encode():
                status, body, ctype = b"200 OK", sim.metrics_text().encode(), CONTENT_TYPE
            else:
                status, body, ctype = b"404 Not Found", b"not found\n", "text/plain"
            writer.write(
                b"HTTP/1.1 " + status + b"\r\ncontent-type: " + ctype.encode()
                + b"\r\ncontent-length: " + str(len(body)).encode()
                + b"\r\nconnection: close\r\n\r\n" + body
            )  # fmt: skip
            await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    return await asyncio.start_server(handle, host, port)
