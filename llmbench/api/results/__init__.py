"""Typed results: one load point (``profile_export_genai_perf.json``), its telemetry section and
a sweep's analysis (``analyze_export_genai_perf.json``).

Why a model: these files are GenAI-Perf-compatible artefacts today and the operator's status and
ConfigMap API tomorrow, so every writer and every reader must agree on one declaration instead
of on string keys spread over a dozen modules. The field names are the JSON keys (all of them
are snake_case identifiers; ``populate_by_name`` lets an alias be added without breaking
callers should one ever not be).

Two rules keep the written JSON exactly what it was before the models existed:

* **required vs optional keys.** A field without a default is a key that is always written
  (``null`` when not measured). A field *with* a default is an optional key: it is written only
  when it was given (or assigned), never because of its default. :meth:`ResultModel.to_dict`
  dumps with ``exclude_unset``, so a file read back and written again is byte-identical, and a
  non-streaming point still has no ``inter_chunk_gap`` key while a streaming one without gaps
  has ``"inter_chunk_gap": null``.
* **text.** :meth:`ResultModel.to_json` formats with :func:`json.dumps` (floats as ``repr``), as
  the writers did.

Unknown keys are rejected (``extra="forbid"``): a key no model declares is either a writer that
forgot the model or a file from something else, and silently dropping it would lose data on the
way to the operator. :func:`read_result` turns every problem into a :class:`ResultFileError`
naming the file and the field.

This package imports nothing else of llmbench, so the runner, the CLI and the operator can all
use it. One module per document and part, every public name imported from here:

* :mod:`.files`: the base model and reading a file back (:func:`read_result`);
* :mod:`.point`: one load point (:class:`PointResult` and its parts);
* :mod:`.telemetry`: a point's telemetry section (:class:`TelemetrySummary`);
* :mod:`.sweep`: a sweep's analysis (:class:`SweepAnalysis`);
* :mod:`.timeseries`: a point's time series (:class:`TimeSeries`).
"""

from .files import (
    ResultFileError,
    ResultModel,
    read_result,
    validate_result,
)
from .point import (
    GENAI_PERF_METRICS,
    OUR_FIELDS,
    OURS,
    ClientHealth,
    ConcurrencyRamp,
    Connects,
    Count,
    Dispatch,
    ErrorKind,
    Errors,
    Figure,
    Goodput,
    InterArrival,
    LoopStall,
    MeasurementWindow,
    PointResult,
    ShardLoad,
    Shards,
    Stability,
    Stat,
    TokenCounts,
    Window,
)
from .sweep import (
    CostSummary,
    GpuRow,
    KneeSummary,
    ParetoPoint,
    ParetoSummary,
    PointMetrics,
    RunInfo,
    SearchProbe,
    SearchSummary,
    SloVerdict,
    Spread,
    SweepAnalysis,
    SweepPoint,
    WorkloadSummary,
)
from .telemetry import (
    GPU_SUMMARY_COLUMNS,
    TELEMETRY_STATS,
    Efficiency,
    Gauge,
    GpuFilterSettings,
    GpuSeries,
    GpuTelemetry,
    ServerSeries,
    ServerTelemetry,
    TelemetrySummary,
    ValiditySignal,
)
from .timeseries import TimeSeries, TimeSlice

__all__ = [
    "GENAI_PERF_METRICS",
    "GPU_SUMMARY_COLUMNS",
    "OURS",
    "OUR_FIELDS",
    "TELEMETRY_STATS",
    "ClientHealth",
    "ConcurrencyRamp",
    "Connects",
    "CostSummary",
    "Count",
    "Dispatch",
    "Efficiency",
    "ErrorKind",
    "Errors",
    "Figure",
    "Gauge",
    "Goodput",
    "GpuFilterSettings",
    "GpuRow",
    "GpuSeries",
    "GpuTelemetry",
    "InterArrival",
    "KneeSummary",
    "LoopStall",
    "MeasurementWindow",
    "ParetoPoint",
    "ParetoSummary",
    "PointMetrics",
    "PointResult",
    "ResultFileError",
    "ResultModel",
    "RunInfo",
    "SearchProbe",
    "SearchSummary",
    "ServerSeries",
    "ServerTelemetry",
    "ShardLoad",
    "Shards",
    "SloVerdict",
    "Spread",
    "Stability",
    "Stat",
    "SweepAnalysis",
    "SweepPoint",
    "TelemetrySummary",
    "TimeSeries",
    "TimeSlice",
    "TokenCounts",
    "ValiditySignal",
    "Window",
    "WorkloadSummary",
    "read_result",
    "validate_result",
]
