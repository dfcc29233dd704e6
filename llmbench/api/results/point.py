"""One load point: ``profile_export_genai_perf.json`` as :class:`PointResult` and its parts."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator

from .files import ResultModel
from .telemetry import TelemetrySummary

__all__ = [
    "GENAI_PERF_METRICS",
    "OURS",
    "OUR_FIELDS",
    "ClientHealth",
    "ConcurrencyRamp",
    "Connects",
    "Count",
    "Dispatch",
    "ErrorKind",
    "Errors",
    "Figure",
    "Goodput",
    "LoopStall",
    "MeasurementWindow",
    "PointResult",
    "ShardLoad",
    "Shards",
    "Stability",
    "Stat",
    "TokenCounts",
    "Window",
]

class Stat(ResultModel):
    """GenAI-Perf's statistics of one per-request metric, in its key order; ``unit`` is absent
    for internal figures (dispatch and event-loop lag)."""

    unit: str | None = None
    avg: float
    p1: float
    p5: float
    p10: float
    p25: float
    p50: float
    p75: float
    p90: float
    p95: float
    p99: float
    min: float
    max: float
    std: float


class Figure(ResultModel):
    """A single-valued metric (throughput); ``avg`` is ``None`` when the window was empty."""

    unit: str
    avg: float | None


class Count(ResultModel):
    """GenAI-Perf's ``request_count``: a whole number in the ``avg`` slot."""

    unit: str
    avg: int


class Goodput(Figure):
    """Requests per second meeting every SLO, the limits used and how many requests met them.

    ``latency_from`` says where TTFT and request latency were judged from: ``schedule`` (the
    scheduled send, open loop: what a user waits, queueing in the client included) or
    ``send`` (the actual send; closed loop, where the two are the same).
    """

    slo: dict[str, float]
    good_requests: int
    latency_from: Literal["schedule", "send"] | None = None


class ErrorKind(ResultModel):
    """How often one error type happened and one sample message.

    ``unrecorded``: how many of ``count`` have no per-request record (beyond the records kept
    per type), so a dead or failing target cannot fill memory and disk while the count stays
    exact.
    """

    count: int
    sample: str
    unrecorded: int | None = None


class Errors(ResultModel):
    """Errors by type; never dropped silently."""

    total: int
    by_type: dict[str, ErrorKind]


class TokenCounts(ResultModel):
    """Where ISL/OSL came from (``server``, ``tokenizer``, ...) and client/server mismatches."""

    output_tokens_source: dict[str, int]
    input_tokens_source: dict[str, int]
    output_tokens_mismatch: int
    input_tokens_mismatch: int


class InterArrival(ResultModel):
    """The gaps between consecutive sends of the measured requests: their mean and their
    coefficient of variation (std / mean: 0 evenly spaced, 1 Poisson, 1/sqrt(K) gamma K)."""

    gaps: int
    mean_ms: float
    cv: float


class Dispatch(ResultModel):
    """Open-loop runs: how late sends left against their schedule, and the rate achieved.

    ``scheduled_gaps`` are the schedule's inter-arrival gaps, ``achieved_gaps`` those of the
    actual sends (optional keys): a client that bunched or smoothed the arrivals shows there.
    """

    lag_ms: Stat
    achieved_request_rate: float | None
    scheduled_gaps: InterArrival | None = None
    achieved_gaps: InterArrival | None = None


class Connects(ResultModel):
    """Measured requests that had to open their connection before sending (the server closed
    the slot's keep-alive connection, or an open-loop send found none idle), and how long the
    connects took. Present only when there were any: a closed loop opens and verifies every
    slot's connection before the clock starts, so TTFT and e2e never hold a connect."""

    requests: int
    ms: Stat


class ConcurrencyRamp(ResultModel):
    """A closed-loop ramp (``--ramp-up`` with ``--concurrency``): the slots started one at a
    time, from 1 to ``slots`` in flight over ``seconds``, slot ``i`` planned at
    ``seconds * i / (slots - 1)`` (``step_s`` apart); the requests started inside the ramp are
    warm-up. Achieved: ``started_slots`` sent at least once, the last of them sent its first
    request ``last_slot_s`` after the load's start, the latest one ``max_lag_ms`` behind its
    plan (None when no slot sent)."""

    seconds: float
    slots: int
    step_s: float
    started_slots: int
    last_slot_s: float | None
    max_lag_ms: float | None


class Window(ResultModel):
    """The measurement window (T_x, T_y) and the requests in it."""

    start_ns: int | None
    end_ns: int | None
    duration_s: float
    measured_requests: int
    completed_requests: int
    warmup_requests: int
    #: epoch ns - perf_counter ns, taken once when the point started: ``start_ns + offset`` is
    #: the wall-clock time ``profile_export.json`` shows (an optional key).
    epoch_offset_ns: int | None = None


class MeasurementWindow(ResultModel):
    """One window of a ``--measurement-interval`` run: the requests sent and completed inside
    it (perf_analyzer's rule), their rate and mean latency (``None`` when none completed)."""

    start_ns: int
    end_ns: int
    completed_requests: int
    request_throughput: float
    avg_request_latency_ms: float | None


class Stability(ResultModel):
    """``--measurement-interval`` / ``--stability-percentage``: the windows measured, in order,
    and whether the last three agreed (max / min of both their request throughput and their
    mean latency within ``1 + stability_percentage / 100``). The point's statistics are those
    of the requests in the last three windows (all windows when fewer ran); the others are
    recorded like warm-up requests."""

    measurement_interval_ms: float
    stability_percentage: float
    max_windows: int
    stable: bool
    windows: list[MeasurementWindow]
    reported_windows: int
    throughput_spread_pct: float | None = None
    latency_spread_pct: float | None = None


class LoopStall(ResultModel):
    """The longest event-loop stall: while it lasted no read was stamped, so the requests in
    flight across it (``overlapped_requests``, marked ``loop_stall_ms`` in their records) have
    timestamps late by up to ``ms``. ``at_s`` is its start, in seconds after the first send;
    ``cpu_ms`` the CPU the loop's thread used across it (near ``ms``: the runner was busy;
    far below: the process was not scheduled)."""

    ms: float
    at_s: float | None
    worker: int
    overlapped_requests: int
    cpu_ms: float | None = None


class ShardLoad(ResultModel):
    """What one runner pod of a several-pod point sent and achieved, so an overloaded shard is
    visible: fewer requests in flight than its slots, a lower rate than its share, or a
    dispatch/loop lag the others do not have."""

    shard: int
    node: str | None = None
    #: its share: slots (closed loop) or requests per second (open loop)
    target: float
    #: measured requests it sent, completed, failed
    requests: int
    completed: int
    errors: int
    #: its first send (warm-up included), ms after the earliest first send of all shards
    first_send_ms: float | None = None
    #: mean requests in flight over the merged window (closed loop: about its slots)
    mean_in_flight: float | None = None
    #: completed requests per second over the merged window
    achieved_rps: float | None = None
    dispatch_lag_p99_ms: float | None = None
    loop_lag_p99_ms: float | None = None
    #: its chunk arrivals were trimmed to fit the store (inter-chunk gaps lost)
    chunks_trimmed: bool = False


class Shards(ResultModel):
    """A point driven by several runner pods (``spec.runner.replicas``) and merged exactly:
    its statistics come from the union of the pods' records. Present only then."""

    replicas: int
    #: attempts run; more than one means the point was repeated (a shard died or its data
    #: never came), each reason in ``repeated``
    attempts: int = 1
    repeated: list[str] = []
    #: max - min of the shards' first sends (ms): how together they started
    start_spread_ms: float | None = None
    #: estimated realtime-clock offset of the shards on other nodes than the leader (max
    #: absolute, ms) and the estimate's uncertainty (half the barrier round trip); 0 when all
    #: shards share the leader's node (one monotonic clock)
    clock_skew_ms: float | None = None
    clock_skew_uncertainty_ms: float | None = None
    #: the bound the spread and skew are held to (1 % of the window, see the digest's warning)
    skew_bound_ms: float | None = None
    #: ms from the last shard's ready (its own clock) to the start instant: the published
    #: lead plus the barrier's polling cost
    barrier_wait_ms: float | None = None
    #: ms the leader waited after its own load for the other shards' records
    merge_wait_ms: float | None = None
    #: store API calls for this point, all shards (reads + writes)
    api_calls: int | None = None
    #: bytes of packed records that went through the store
    record_bytes: int | None = None
    chunks_trimmed: bool = False
    shards: list[ShardLoad] = []
    warnings: list[str] = []


class ClientHealth(ResultModel):
    """How busy the measuring event loop was; warnings when its stamps may run late.

    Optional: ``event_loop`` (``uvloop`` or ``asyncio``), ``longest_stall``,
    ``retry_after_waits`` and ``retry_after_wait_s`` (slot-seconds held back by the target's
    ``Retry-After``), ``spilled_requests`` (responses parked in a file, undecoded, because the
    memory budget was spent).
    """

    workers: int
    loop_lag_ms: Stat | None
    warnings: list[str]
    event_loop: str | None = None
    longest_stall: LoopStall | None = None
    retry_after_waits: int | None = None
    retry_after_wait_s: float | None = None
    spilled_requests: int | None = None


#: The one top-level key of ``profile_export_genai_perf.json`` that is ours, not GenAI-Perf's.
OURS = "llmbench"

#: GenAI-Perf's metric keys in the order its JSON lists them (a metric without data is absent).
GENAI_PERF_METRICS = (
    "request_throughput",
    "request_latency",
    "request_goodput",
    "request_count",
    "time_to_first_token",
    "time_to_second_token",
    "inter_token_latency",
    "output_token_throughput",
    "output_token_throughput_per_user",
    "output_sequence_length",
    "input_sequence_length",
)

#: PointResult fields with a place of their own in GenAI-Perf's layout; every other field is
#: written under :data:`OURS`, in field order (``goodput``'s SLO and count go there too, as
#: ``goodput``; its rate is GenAI-Perf's ``request_goodput``).
_GENAI_PERF_FIELDS = frozenset({*GENAI_PERF_METRICS, "goodput", "genai_perf_config"})

#: Goodput's keys written under ``llmbench.goodput`` (its rate is ``request_goodput``).
_GOODPUT_OURS = ("slo", "good_requests", "latency_from")

#: PointResult fields written under :data:`OURS` (when set), in this order.
OUR_FIELDS = (
    "inter_chunk_gap",
    "errors",
    "token_counts",
    "dispatch",
    "time_to_first_token_from_schedule",
    "request_latency_from_schedule",
    "time_to_first_reasoning_token",
    "time_to_first_answer_token",
    "answer_inter_token_latency",
    "reasoning_token_count",
    "answer_token_count",
    "connects",
    "window",
    "interrupted",
    "stop_reason",
    "client",
    "input_config",
    "telemetry",
    "stability",
    "shards",
)


class PointResult(ResultModel):
    """Everything one load point measured: ``profile_export_genai_perf.json``.

    The file is GenAI-Perf's: its metric keys with its stat names (a metric without data is
    absent, never ``null``), ``request_goodput``, ``telemetry_stats`` (derived from
    ``telemetry``), ``input_config`` in GenAI-Perf's nested schema (:attr:`genai_perf_config`),
    and everything of ours under the one key :data:`OURS` (``"llmbench"``): the goodput SLOs
    and count, inter-chunk gaps, errors, token provenance, dispatch, window, client health, our
    own settings (:attr:`input_config`) and the telemetry with its validity signals. So a loop
    over the metric dicts meets only ``{unit, avg, …}`` dicts, ``telemetry_stats``,
    ``input_config`` and ``llmbench``.

    In Python the fields stay flat (``summary.errors``, ``summary.goodput.slo``), so the
    readers do not care where the file keeps them. Files written before this layout (all keys
    at the top, ``goodput``) still read.

    Optional keys: ``goodput`` (with SLOs), ``inter_chunk_gap`` (streaming runs), ``dispatch``
    (open loop), ``connects`` (requests that had to connect), the reasoning metrics (when some
    answer reasoned: ``time_to_first_reasoning_token``, ``time_to_first_answer_token``,
    ``answer_inter_token_latency``, ``reasoning_token_count``, ``answer_token_count``),
    ``client``, ``input_config`` and ``genai_perf_config`` (set by the profile runner),
    ``telemetry`` (when scraped).
    """

    request_throughput: Figure
    request_latency: Stat | None = None
    time_to_first_token: Stat | None = None
    time_to_second_token: Stat | None = None
    inter_token_latency: Stat | None = None
    output_token_throughput_per_user: Stat | None = None
    output_sequence_length: Stat | None = None
    input_sequence_length: Stat | None = None
    output_token_throughput: Figure
    request_count: Count
    goodput: Goodput | None = None
    inter_chunk_gap: Stat | None = None
    errors: Errors
    token_counts: TokenCounts
    dispatch: Dispatch | None = None
    #: open loop: TTFT and request latency from the *scheduled* send (dispatch lag included),
    #: beside the service-time figures above, which start at the actual send
    time_to_first_token_from_schedule: Stat | None = None
    request_latency_from_schedule: Stat | None = None
    #: reasoning (present only when some answer carried ``reasoning_content`` / ``reasoning``
    #: deltas; ``time_to_first_token`` is the first token of either kind): the time to the
    #: first reasoning token (over the requests that reasoned) and to the first answer
    #: (``content``) token, the answer's inter-token latency, and the per-request reasoning
    #: and answer token counts (a request that did not reason: TTFT, ITL, 0 and its OSL)
    time_to_first_reasoning_token: Stat | None = None
    time_to_first_answer_token: Stat | None = None
    answer_inter_token_latency: Stat | None = None
    reasoning_token_count: Stat | None = None
    answer_token_count: Stat | None = None
    #: measured requests that opened a connection first, and the connect times
    connects: Connects | None = None
    window: Window
    interrupted: bool = False
    #: why the point ended before its budget, e.g. ``target unreachable since T: <error>``;
    #: such a point failed even though the records it measured are kept.
    stop_reason: str | None = None
    client: ClientHealth | None = None
    #: the point's arguments as run (never the API key), in our settings' shape: they stay a
    #: mapping. Written as ``llmbench.input_config``.
    input_config: dict[str, Any] | None = None
    #: the same arguments in GenAI-Perf's nested ``input_config`` schema (``model_names``,
    #: ``endpoint``, ``perf_analyzer``, ``input``, ``output``, ``tokenizer``, …), so its
    #: ``process-export-files`` reads them. Written as the top-level ``input_config``.
    genai_perf_config: dict[str, Any] | None = None
    telemetry: TelemetrySummary | None = None
    #: ``--measurement-interval`` runs: the windows and whether they agreed.
    stability: Stability | None = None
    #: closed-loop ramps (``--ramp-up`` with ``--concurrency``): when the slots started.
    ramp: ConcurrencyRamp | None = None
    #: several runner pods drove the point (``spec.runner.replicas`` > 1): how they did.
    shards: Shards | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_file(cls, data: Any) -> Any:
        """The file's layout to the flat fields (a legacy file or keyword arguments pass)."""
        if not isinstance(data, dict) or OURS not in data or not isinstance(data[OURS], dict):
            return data
        flat = {k: v for k, v in data.items() if k not in (OURS, "telemetry_stats")}
        if "input_config" in flat:
            flat["genai_perf_config"] = flat.pop("input_config")
        ours = dict(data[OURS])
        rate, detail = flat.pop("request_goodput", None), ours.pop("goodput", None)
        if rate is not None or detail is not None:
            both = [d for d in (rate, detail) if isinstance(d, dict)]
            flat["goodput"] = {k: v for d in both for k, v in d.items()} if both else rate
        fields = cls.model_fields
        for key, value in ours.items():
            # a key of ours that is no field (or clashes with a top-level one) stays named as
            # in the file, so the error says where it is
            ok = key in fields and key not in _GENAI_PERF_FIELDS and key not in flat
            flat[key if ok else f"{OURS}.{key}"] = value
        return flat

    def to_dict(self) -> dict[str, Any]:
        """The file's layout (see the class): GenAI-Perf's keys, then :data:`OURS`."""
        flat = super().to_dict()
        doc: dict[str, Any] = {}
        for key in GENAI_PERF_METRICS:
            if key == "request_goodput":
                if self.goodput is not None:
                    doc[key] = {"unit": self.goodput.unit, "avg": self.goodput.avg}
            elif flat.get(key) is not None:
                doc[key] = flat[key]
        stats = self.telemetry.genai_perf_stats() if self.telemetry is not None else {}
        if stats:
            doc["telemetry_stats"] = stats
        if self.genai_perf_config is not None:
            doc["input_config"] = flat["genai_perf_config"]
        ours: dict[str, Any] = {}
        if self.goodput is not None:
            ours["goodput"] = {k: v for k, v in flat["goodput"].items() if k in _GOODPUT_OURS}
        ours.update((k, v) for k, v in flat.items() if k not in _GENAI_PERF_FIELDS)
        doc[OURS] = ours
        return doc

    @classmethod
    def file_location(cls, loc: tuple[int | str, ...]) -> str:
        """Where a field's value sits in the file, for error messages."""
        path = ".".join(str(p) for p in loc)
        if not loc:
            return path
        head = loc[0]
        if head == "genai_perf_config":
            return "input_config" + path[len("genai_perf_config"):]
        if head in cls.model_fields and head not in _GENAI_PERF_FIELDS:
            return f"{OURS}.{path}"
        if head == "goodput" and len(loc) > 1 and loc[1] in _GOODPUT_OURS:
            return f"{OURS}.{path}"
        if head == "goodput":
            return "request_goodput" + path[len("goodput"):]
        return path

    def stat(self, name: str) -> Stat | None:
        """The distribution metric ``name`` (e.g. ``time_to_first_token``), for tables that walk
        a list of metric names; KeyError when ``name`` is not one."""
        value = getattr(self, name, None)
        if name not in type(self).model_fields or not (value is None or isinstance(value, Stat)):
            raise KeyError(name)
        return value

    def single(self, name: str) -> float | None:
        """The value of the single-valued metric ``name`` (throughput, count, goodput); ``None``
        when absent or not measured; KeyError when ``name`` is not one."""
        value = getattr(self, name, None)
        if name not in type(self).model_fields or isinstance(value, Stat):
            raise KeyError(name)
        if value is None:
            return None
        assert isinstance(value, Figure | Count)
        return value.avg

    def failure_reason(self) -> str | None:
        """Why the point failed: the reason it ended early, or (when nothing completed) its
        error counts; None for a point that measured what it was asked to."""
        if self.stop_reason:
            return self.stop_reason
        if self.window.completed_requests:
            return None
        if not self.errors.by_type:
            return "no request completed"
        parts = [f"{k} x{v.count}: {v.sample}".strip() for k, v in self.errors.by_type.items()]
        return "no request completed (" + "; ".join(parts) + ")"
