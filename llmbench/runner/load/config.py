"""How a load point issues its requests: the load generator's settings.

Filled from the spec (``point/config.py``; the CLI's flags become a spec first), which
validates them; the load generator trusts what it gets. A field that is a spec field under
its own name says so in its metadata (``{"spec": "load.workers"}``, a path from the ``Spec``
root) and ``point_config`` copies it; the fields without are computed for the point (the swept
quantity, the budget) or set at run time (shards). So a new setting is its spec field and its
field here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["LoadConfig", "expected_total"]


@dataclass(frozen=True, slots=True)
class LoadConfig:
    """How requests are issued; validated by the CLI and the spec model before it gets here.

    ``buffer_mb`` bounds the finished responses kept undecoded in memory (None: an eighth of
    the memory the runner may use, see
    :func:`~llmbench.runner.load.buffer.default_buffer_bytes`); beyond it they wait in a
    temporary file. ``unreachable_after_s`` ends the point when every connect has failed
    for that long; ``retry_after_max_s`` caps how long a slot honours a ``Retry-After``;
    ``error_records_kept`` caps the records kept per error type (the count stays exact).
    """

    mode: str = "concurrency"  # concurrency | request_rate | fixed_schedule | session_concurrency
    concurrency: int = 1
    request_rate: float | None = None
    rate_mode: str = field(default="constant", metadata={"spec": "load.request_rate_mode"})
    #: gamma gaps' shape and the linear ramp (s) of the rate (``arrivals.schedule_offsets``)
    #: or of the slots in flight (``arrivals.slot_start_offsets``)
    burstiness: float | None = field(default=None, metadata={"spec": "load.burstiness"})
    ramp_up_s: float | None = field(default=None, metadata={"spec": "load.ramp_up_seconds"})
    max_concurrency: int | None = field(default=None, metadata={"spec": "load.max_concurrency"})
    request_count: int | None = 100
    measurement_duration_s: float | None = field(
        default=None, metadata={"spec": "load.measurement_duration_seconds"}
    )
    warmup_request_count: int = field(default=0, metadata={"spec": "load.warmup_request_count"})
    seed: int = field(default=0, metadata={"spec": "workload.seed"})
    request_timeout_s: float | None = field(
        default=600.0, metadata={"spec": "target.request_timeout_seconds"}
    )
    workers: int = field(default=1, metadata={"spec": "load.workers"})
    endpoint_type: str = field(default="chat", metadata={"spec": "target.endpoint_type"})
    buffer_mb: float | None = None
    unreachable_after_s: float = 10.0
    retry_after_max_s: float = 30.0
    error_records_kept: int = 1000
    #: A fixed schedule (``--fixed-schedule`` trace replay): the send offsets (ns) of the
    #: requests, in order, sent open loop; None for a rate's schedule.
    schedule_ns: tuple[int, ...] | None = None
    #: Multi-turn sessions (mode ``session_concurrency``, ``concurrency`` sessions in
    #: flight): GenAI-Perf's ``--num-sessions``, ``--session-turns-mean/-stddev`` and
    #: ``--session-turn-delay-mean/-stddev`` (ms); see
    #: :func:`~llmbench.runner.load.sessions.session_plan`.
    num_sessions: int = field(default=0, metadata={"spec": "load.sessions.count"})
    session_turns_mean: int = field(default=1, metadata={"spec": "load.sessions.turns_mean"})
    session_turns_stddev: float = field(
        default=0.0, metadata={"spec": "load.sessions.turns_stddev"}
    )
    session_turn_delay_mean_ms: float = field(
        default=0.0, metadata={"spec": "load.sessions.turn_delay_mean_ms"}
    )
    session_turn_delay_stddev_ms: float = field(
        default=0.0, metadata={"spec": "load.sessions.turn_delay_stddev_ms"}
    )
    #: This runner pod's share of a point driven by several pods (``spec.runner.replicas``):
    #: it sends the request numbers ``shard, shard + shards, ...`` (so the union over the pods
    #: is exactly the single runner's numbering, warm-up first). Set by
    #: :func:`llmbench.runner.load.shards.shard_config`, which also splits slots and rate.
    shard: int = 0
    shards: int = 1
    #: Where a constant-rate schedule starts (ns after the load's start): several senders of
    #: one rate interleave their sends instead of sending together (see
    #: :func:`~llmbench.runner.load.workers.worker_configs`).
    phase_ns: int = 0


def expected_total(cfg: LoadConfig) -> int | None:
    """Requests the run will send, for the progress bar; None when bounded by time. A
    closed-loop ramp sends its warm-up on top of this (counted as it happens, see
    :class:`~llmbench.runner.load.slots.SlotRamp`), so there it is the least."""
    if cfg.request_count is None:
        return None
    return cfg.warmup_request_count + cfg.request_count
