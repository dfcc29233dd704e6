"""How a load point issues its requests: the load generator's settings.

Filled from the CLI flags or the spec (``point/config.py``), which validate them first; the
load generator trusts what it gets.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    rate_mode: str = "constant"  # constant | poisson
    max_concurrency: int | None = None
    request_count: int | None = 100
    measurement_duration_s: float | None = None
    warmup_request_count: int = 0
    seed: int = 0
    request_timeout_s: float | None = 600.0
    workers: int = 1
    endpoint_type: str = "chat"
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
    num_sessions: int = 0
    session_turns_mean: int = 1
    session_turns_stddev: float = 0.0
    session_turn_delay_mean_ms: float = 0.0
    session_turn_delay_stddev_ms: float = 0.0
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
    """Requests the run will send, for the progress bar; None when bounded by time."""
    if cfg.request_count is None:
        return None
    return cfg.warmup_request_count + cfg.request_count
