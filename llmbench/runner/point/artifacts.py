"""Artefact files in GenAI-Perf 0.0.16's names, layouts and formats, so its readers read ours.

One folder per point, ``<artifact-dir>/<model>-openai-<endpoint-type>-concurrency<N>`` (or
``-request_rate<R>``; :func:`point_dir_name`), holding (``<stem>`` is ``--profile-export-file``
without ``.json``, ``profile_export`` by default):

* ``inputs.json``: GenAI-Perf's ``{"data": [{"payload": [body]}, ...]}``, one entry per distinct
  request (``--num-dataset-entries`` of them), indented as GenAI-Perf writes it;
* ``<stem>.json``: perf_analyzer's profile export (:func:`perf_analyzer_export`): one experiment
  ``{mode, value}``, every measured request that completed with its send time, payload,
  response times and responses, the window boundaries, ``version``, ``service_kind`` and
  ``endpoint``; epoch nanoseconds (our ``perf_counter_ns`` stamps plus one offset taken when the
  point started), so GenAI-Perf's profile-data parser and ``process-export-files`` read it;
* ``<stem>_genai_perf.json``: :class:`~llmbench.api.results.PointResult` (GenAI-Perf's keys,
  ``telemetry_stats``, ``input_config`` in its nested schema, everything of ours under
  ``llmbench``), read back by :func:`load_summary`;
* ``<stem>_genai_perf.csv``: :func:`genai_perf_csv`, GenAI-Perf's tables, then one of ours;
* ``<stem>_llmbench_requests.jsonl``: our per-request records (every request, warm-up and
  failures included, monotonic stamps), one JSON object a line, read by :func:`load_records`;
  not a ``.json`` file, so GenAI-Perf's ``*.json`` folder scan never mistakes it for the export.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from llmbench import __version__
from llmbench.api.results import PointResult, read_result
from llmbench.runner.client.records import SOURCE_SERVER, RequestRecord
from llmbench.runner.labels import (
    GENAI_PERF_DISTRIBUTIONS,
    METRIC_LABELS,
    SINGLE_VALUES,
    genai_perf_stat,
)

__all__ = [
    "CSV_STATS",
    "GENAI_PERF_CSV",
    "GENAI_PERF_JSON",
    "INPUTS_JSON",
    "PROFILE_EXPORT",
    "REQUESTS_JSONL",
    "default_artifact_dir",
    "genai_perf_csv",
    "genai_perf_input_config",
    "load_records",
    "load_summary",
    "perf_analyzer_export",
    "point_dir_name",
    "write_atomic",
    "write_profile_artifacts",
]

DEFAULT_STEM = "profile_export"
PROFILE_EXPORT = f"{DEFAULT_STEM}.json"
GENAI_PERF_JSON = f"{DEFAULT_STEM}_genai_perf.json"
GENAI_PERF_CSV = f"{DEFAULT_STEM}_genai_perf.csv"
REQUESTS_JSONL = f"{DEFAULT_STEM}_llmbench_requests.jsonl"
INPUTS_JSON = "inputs.json"

#: Statistic columns of the CSV's first table, in GenAI-Perf's order.
CSV_STATS = ("avg", "min", "max", "p99", "p95", "p90", "p75", "p50", "p25", "p10", "p5", "p1")

#: GenAI-Perf's metrics that exist only when streaming (its CSV leaves them out otherwise).
STREAMING_ONLY = (
    "time_to_first_token",
    "time_to_second_token",
    "inter_token_latency",
    "output_token_throughput_per_user",
)

#: GenAI-Perf's GPU metrics with one value (``Metric,GPU,Value``); the others get statistics.
CONSTANT_GPU_METRICS = ("gpu_power_limit", "total_gpu_memory")


# ================================================================================================
# folders
# ================================================================================================


def _artifact_model_name(model: str, models: Sequence[str] = ()) -> str:
    """GenAI-Perf's model part: the first model (``_multi`` with several), ``/`` -> ``_``."""
    name = (models[0] + "_multi") if len(models) > 1 else model
    return "_".join(name.split("/")).replace("\\", "_").replace("\0", "_")


def _stimulus(mode: str, value: float) -> str:
    """``concurrency8`` or ``request_rate10.0`` (GenAI-Perf's rate is a float)."""
    if mode == "request_rate":
        return f"request_rate{float(value)}"
    shown = int(value) if float(value).is_integer() else value
    return f"{mode}{shown}"


def point_dir_name(
    model: str, endpoint_type: str, mode: str, value: float, models: Sequence[str] = ()
) -> str:
    """``<model>-openai-<endpoint-type>-<mode><value>``, GenAI-Perf 0.0.16's folder name."""
    return f"{_artifact_model_name(model, models)}-openai-{endpoint_type}-{_stimulus(mode, value)}"


def default_artifact_dir(
    model: str,
    endpoint_type: str,
    mode: str,
    value: float,
    root: Path | str = "artifacts",
    models: Sequence[str] = (),
) -> Path:
    """``<root>/<point_dir_name>``: where GenAI-Perf puts a profile under ``--artifact-dir``."""
    return Path(root) / point_dir_name(model, endpoint_type, mode, value, models)


def write_atomic(path: Path, text: str) -> None:
    """Write-then-rename, so an interrupted run never leaves a truncated file behind."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8", newline="")
    os.replace(tmp, path)


# ================================================================================================
# profile_export_genai_perf.csv
# ================================================================================================


def _gpu_metric_name(metric: str, unit: str) -> str:
    """GenAI-Perf's GPU row label: words capitalised, ``gpu`` upper case, then the unit."""
    words = [w.upper() if w == "gpu" else w.capitalize() for w in metric.split("_")]
    return f"{' '.join(words)} ({unit})"


def _streaming(summary: PointResult) -> bool:
    settings = summary.input_config or {}
    if "streaming" in settings:
        return bool(settings["streaming"]) and settings.get("endpoint_type") != "embeddings"
    return summary.time_to_first_token is not None


def genai_perf_csv(summary: PointResult) -> str:
    """``profile_export_genai_perf.csv`` as GenAI-Perf 0.0.16 writes it, then our table.

    CRLF line ends (Python's csv default, as GenAI-Perf). Tables, separated by an empty row:

    1. ``Metric,avg,min,max,p99,…,p1``: GenAI-Perf's per-request metrics in its order; the
       streaming-only ones are left out of a non-streaming run (as GenAI-Perf does), a metric
       without data reads ``N/A``;
    2. ``Metric,Value``: output token throughput, request throughput, goodput (with SLOs),
       request count;
    3. with GPU telemetry, ``Metric,GPU,avg,min,…,p1`` (one row per metric and GPU) and
       ``Metric,GPU,Value`` (power limit, total memory), from ``telemetry_stats``;
    4. ours, ``llmbench Metric,Value``: errors, inter-chunk gaps, dispatch lag, energy per
       output token.

    Numbers as GenAI-Perf formats them: two decimals with thousands separators (``1,234.50``,
    quoted by the csv module); the GPU ``Value`` column without separators. One exception:
    energy keeps six decimals, being one window's energy in MJ (100 J = 0.0001 MJ) where
    GenAI-Perf shows the counter's reading since the driver loaded.
    """
    buf = io.StringIO()
    w = csv.writer(buf)
    embeddings = (summary.input_config or {}).get("endpoint_type") == "embeddings"
    streaming = _streaming(summary)
    w.writerow(["Metric", *CSV_STATS])
    for key in ("request_latency",) if embeddings else GENAI_PERF_DISTRIBUTIONS:
        if key in STREAMING_ONLY and not streaming:
            continue
        stat = summary.stat(key)
        cells = [genai_perf_stat(None if stat is None else getattr(stat, s)) for s in CSV_STATS]
        w.writerow([METRIC_LABELS[key].genai_perf, *cells])
    w.writerow([])
    w.writerow(["Metric", "Value"])
    for key in SINGLE_VALUES:
        if key == "goodput" and summary.goodput is None:
            continue
        if key == "output_token_throughput" and embeddings:
            continue
        w.writerow([METRIC_LABELS[key].genai_perf, genai_perf_stat(summary.single(key))])
    _gpu_tables(w, summary)
    _our_table(w, summary)
    return buf.getvalue()


def _gpu_tables(w: Any, summary: PointResult) -> None:
    stats = summary.telemetry.genai_perf_stats() if summary.telemetry is not None else {}
    if not stats:
        return
    w.writerow([])
    w.writerow(["Metric", "GPU", *CSV_STATS])
    for metric, doc in stats.items():
        if metric in CONSTANT_GPU_METRICS:
            continue
        label = _gpu_metric_name(metric, doc["unit"])
        digits = 6 if doc["unit"] == "MJ" else 2
        for gpu, values in doc.items():
            if gpu != "unit":
                cells = (genai_perf_stat(values.get(s), digits) for s in CSV_STATS)
                w.writerow([label, gpu, *cells])
    w.writerow([])
    w.writerow(["Metric", "GPU", "Value"])
    for metric, doc in stats.items():
        if metric not in CONSTANT_GPU_METRICS:
            continue
        label = _gpu_metric_name(metric, doc["unit"])
        for gpu, values in doc.items():
            if gpu != "unit":
                w.writerow([label, gpu, f"{values['avg']:.2f}"])


def _our_table(w: Any, summary: PointResult) -> None:
    """Our rows, after GenAI-Perf's tables so its readers find theirs where they expect them."""
    rows: list[tuple[str, str]] = [("Error Count (count)", str(summary.errors.total))]
    rows += [(f"Errors: {k} (count)", str(v.count)) for k, v in summary.errors.by_type.items()]
    if summary.goodput is not None:
        rows.append(("Good Requests (count)", str(summary.goodput.good_requests)))
    gap = summary.inter_chunk_gap
    if gap is not None:
        rows += [("Inter Chunk Gap avg (ms)", genai_perf_stat(gap.avg)),
                 ("Inter Chunk Gap p99 (ms)", genai_perf_stat(gap.p99))]
    if summary.dispatch is not None:
        rows += [
            ("Dispatch Lag p99 (ms)", genai_perf_stat(summary.dispatch.lag_ms.p99)),
            ("Achieved Request Rate (per sec)",
             genai_perf_stat(summary.dispatch.achieved_request_rate)),
        ]
    tele = summary.telemetry
    if tele is not None and tele.efficiency is not None:
        rows.append(("Energy per Output Token (J)",
                     genai_perf_stat(tele.efficiency.joules_per_output_token)))
    w.writerow([])
    w.writerow(["llmbench Metric", "Value"])
    w.writerows(rows)


# ================================================================================================
# input_config in GenAI-Perf's schema
# ================================================================================================

#: Our SLO names -> GenAI-Perf's ``--goodput`` names.
GOODPUT_NAMES = {
    "ttft": "time_to_first_token",
    "itl": "inter_token_latency",
    "e2e": "request_latency",
    "ttst": "time_to_second_token",
    "otpu": "output_token_throughput_per_user",
}

_OUTPUT_FORMATS = {
    "chat": "openai_chat_completions",
    "completions": "openai_completions",
    "embeddings": "openai_embeddings",
}


def _or_empty(value: Any) -> Any:
    """GenAI-Perf writes an unset option (``None``) as ``""``."""
    return "" if value is None else value


def _whole_or_float(x: float) -> float | int:
    """GenAI-Perf's session knobs are integers: a whole float is written as one."""
    return int(x) if float(x).is_integer() else x


def _input_config_stimulus(s: Mapping[str, Any]) -> dict[str, Any]:
    """GenAI-Perf's ``perf_analyzer.stimulus``: ``{"concurrency": N}``, ``{"request_rate":
    R}``, ``{"session_concurrency": N}`` or ``{"fixed_schedule": null}``."""
    mode = s.get("mode")
    if mode == "request_rate":
        return {"request_rate": s.get("request_rate")}
    if mode == "fixed_schedule":
        return {"fixed_schedule": None}
    if mode == "session_concurrency":
        return {"session_concurrency": s.get("concurrency", 1)}
    return {"concurrency": s.get("concurrency", 1)}


def genai_perf_input_config(
    settings: Mapping[str, Any], *, stem: str = DEFAULT_STEM, artifact_dir: Path | str = ""
) -> dict[str, Any]:
    """GenAI-Perf's ``input_config`` (its ``ConfigCommand.to_json_dict()``: sections and keys
    in its order, enums lower case, unset values ``""``) from our flat settings
    (``ProfileConfig.public_dict()``), so ``process-export-files`` can rebuild the run's config.

    Options GenAI-Perf has and we do not use carry its defaults; the tokenizer is named as the
    model's when we used our embedded or the server's one (GenAI-Perf loads tokenizers by
    name); our own settings stay, unchanged, under ``llmbench.input_config``.
    """
    s = settings
    models = list(s.get("workload_models") or ([s["model"]] if s.get("model") else []))
    stimulus = _input_config_stimulus(s)
    duration = s.get("measurement_duration_s")
    measurement = (
        {"mode": "interval", "num": int(duration * 1000)}
        if duration
        else {"mode": "request_count", "num": _or_empty(s.get("request_count"))}
    )
    goodput = {GOODPUT_NAMES.get(k, k): v for k, v in (s.get("goodput") or {}).items()}
    endpoint_type = s.get("endpoint_type", "chat")
    tokenizer = s.get("tokenizer") or "default"
    if tokenizer in ("default", "server"):
        tokenizer = models[0] if models else ""
    input_file = s.get("workload_input_file")
    return {
        "model_names": models,
        "subcommand": "profile",
        "verbose": False,
        "template_filename": "genai_perf_config.yaml",
        "analyze": {"sweep_parameters": {"concurrency": {"min": 1, "max": 1024}}},
        "endpoint": {
            "model_selection_strategy": s.get("workload_model_selection_strategy")
            or "round_robin",
            # unset (Triton-only): GenAI-Perf's config parser refuses a backend with openai
            "backend": "",
            "custom": str(s.get("endpoint") or "").lstrip(" /"),
            "type": endpoint_type,
            "streaming": bool(s.get("streaming", False)),
            "server_metrics_urls": list(s.get("server_metrics_urls") or []),
            "url": s.get("url", ""),
            "grpc_method": "",
            "service_kind": "openai",
            "output_format": _OUTPUT_FORMATS.get(endpoint_type, endpoint_type),
        },
        "perf_analyzer": {
            "path": "perf_analyzer",
            "verbose": False,
            "stimulus": stimulus,
            "stability_percentage": s.get("stability_percentage") or 999,
            "measurement": measurement,
            "warmup_request_count": s.get("warmup_request_count", 0),
        },
        "input": {
            "batch_size": 1,
            "extra": s.get("workload_extra_inputs") or "",
            "goodput": goodput or "",
            "header": "",
            "file": _or_empty(input_file),
            "num_dataset_entries": s.get("workload_num_prompts", 100),
            "random_seed": s.get("workload_random_seed", 0),
            "audio": {
                "batch_size": 1,
                "length": {"mean": 0, "stddev": 0},
                "format": "wav",
                "depths": [16],
                "sample_rates": [16],
                "num_channels": 1,
            },
            "image": {
                "width": {"mean": 0, "stddev": 0},
                "height": {"mean": 0, "stddev": 0},
                "batch_size": 1,
                "format": "png",
            },
            "output_tokens": {
                "mean": _or_empty(s.get("workload_output_tokens_mean")),
                "deterministic": bool(s.get("workload_output_tokens_mean_deterministic")),
                "stddev": s.get("workload_output_tokens_stddev") or 0,
            },
            "synthetic_tokens": {
                "mean": s.get("workload_synthetic_input_tokens_mean", 550),
                "stddev": s.get("workload_synthetic_input_tokens_stddev") or 0,
            },
            "prefix_prompt": {
                "num": s.get("workload_num_prefix_prompts") or 0,
                "length": s.get("workload_prefix_prompt_length") or 100,
            },
            "sessions": {
                "num": s.get("num_sessions") or 0,
                "turns": {
                    "mean": s.get("session_turns_mean") or 1,
                    "stddev": _whole_or_float(s.get("session_turns_stddev") or 0),
                },
                "turn_delay": {
                    "mean": _whole_or_float(s.get("session_turn_delay_mean_ms") or 0),
                    "ratio": 1.0,
                    "stddev": _whole_or_float(s.get("session_turn_delay_stddev_ms") or 0),
                },
            },
            "prompt_source": "file" if input_file else "synthetic",
            "synthetic_files": [],
            "payload_file": "",
        },
        "output": {
            "artifact_directory": str(artifact_dir),
            "checkpoint_directory": "./checkpoint",
            "profile_export_file": f"{stem}.json",
            "generate_plots": False,
            "enable_checkpointing": False,
        },
        "tokenizer": {
            "name": tokenizer,
            "revision": s.get("tokenizer_revision") or "main",
            "trust_remote_code": False,
        },
        "process": {"input_path": "aggregated"},
    }


# ================================================================================================
# profile_export.json in perf_analyzer's format
# ================================================================================================


def _split(text: str, n: int) -> list[str]:
    """``text`` cut into ``n`` consecutive pieces of near-equal length."""
    if n <= 1:
        return [text]
    size = len(text)
    return [text[i * size // n:(i + 1) * size // n] for i in range(n)]


def _usage(rec: RequestRecord) -> dict[str, int] | None:
    if rec.output_tokens_source != SOURCE_SERVER or rec.output_tokens is None:
        return None
    prompt = rec.input_tokens if rec.input_tokens_source == SOURCE_SERVER else None
    usage = {"completion_tokens": rec.output_tokens}
    if prompt is not None:
        usage = {"prompt_tokens": prompt, **usage, "total_tokens": prompt + rec.output_tokens}
    return usage


def _responses(rec: RequestRecord, n: int, endpoint_type: str, streaming: bool,
               model: str) -> list[str]:
    """The response bodies of one request in OpenAI's shapes, one per response timestamp.

    The client keeps the arrival time of every chunk that carried content and the whole
    text, not each chunk's text: the text is cut into as many pieces as chunks arrived, so
    every response holds content (GenAI-Perf drops empty ones with their timestamps) and the
    pieces join to the exact output text. Token counts per chunk are approximate for that
    reason; TTFT, request latency, ITL, OSL, ISL and throughput read from the file are exact.
    """
    ident = f"llmbench-{rec.index}"
    text = rec.output_text or ""
    usage = _usage(rec)
    if endpoint_type == "embeddings":
        doc: dict[str, Any] = {"object": "list", "model": model,
                               "data": [{"object": "embedding", "index": 0, "embedding": []}]}
        return [json.dumps(doc)]
    chat = endpoint_type == "chat"
    if not streaming:
        choice: dict[str, Any] = (
            {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": None}
            if chat
            else {"index": 0, "text": text, "finish_reason": None}
        )
        doc = {"id": ident, "object": "chat.completion" if chat else "text_completion",
               "model": model, "choices": [choice]}
        if usage is not None:
            doc["usage"] = usage
        return [json.dumps(doc)]
    # One SSE event per chunk; only the content differs, so the JSON around it is built once.
    head = json.dumps({"id": ident, "object": "chat.completion.chunk" if chat else
                       "text_completion", "model": model})[:-1]
    before = head + (', "choices": [{"index": 0, "delta": {"content": ' if chat
                     else ', "choices": [{"index": 0, "text": ')
    after = "}}]}\n\n" if chat else "}]}\n\n"
    pieces = _split(text, n)
    out = [f"data: {before}{json.dumps(piece)}{after}" for piece in pieces]
    if usage is not None:
        last = after.rstrip("\n").removesuffix("}")
        out[-1] = (f"data: {before}{json.dumps(pieces[-1])}{last}, "
                   f'"usage": {json.dumps(usage)}}}\n\n')
    return out


def _export_parts(
    records: Sequence[RequestRecord],
    summary: PointResult,
    bodies: Sequence[bytes | str],
    epoch_offset_ns: int,
) -> tuple[dict[str, Any], Iterator[dict[str, Any]], list[int], dict[str, Any]]:
    """The experiment, its requests (lazily, one at a time), its window boundaries and the
    document's top-level keys of :func:`perf_analyzer_export`."""
    s = summary.input_config or {}
    mode = s.get("mode")
    if mode == "request_rate":
        experiment: dict[str, Any] = {
            "mode": "request_rate", "value": float(s.get("request_rate") or 0.0)
        }
    elif mode in ("fixed_schedule", "session_concurrency"):
        # perf_analyzer's id of these experiments: neither a concurrency nor a rate
        # ({0, 0.0}), which its exporter writes as request_rate 0.0.
        experiment = {"mode": "request_rate", "value": 0.0}
    else:
        experiment = {"mode": "concurrency", "value": int(s.get("concurrency") or 1)}
    endpoint_type = str(s.get("endpoint_type", "chat"))
    streaming = _streaming(summary)
    model = str(s.get("model") or "")
    off = epoch_offset_ns
    payloads = [b.decode("utf-8", "replace") if isinstance(b, bytes) else b for b in bodies]

    def requests() -> Iterator[dict[str, Any]]:
        measured = sorted((r for r in records if not r.warmup and r.ok), key=lambda r: r.sent_ns)
        for rec in measured:
            stamps = list(rec.chunk_ns) or [rec.last_token_ns or rec.sent_ns]
            inputs: dict[str, Any] = {
                "payload": payloads[rec.index % len(payloads)] if payloads else "{}"
            }
            if rec.session_id is not None:  # as perf_analyzer records a session's turns
                inputs["session_id"] = str(rec.session_id)
                if rec.turn_delay_ms is not None:
                    inputs["delay"] = int(rec.turn_delay_ms)
            yield {
                "timestamp": rec.sent_ns + off,
                "request_inputs": inputs,
                "response_timestamps": [t + off for t in stamps],
                "response_outputs": [
                    {"response": r}
                    for r in _responses(rec, len(stamps), endpoint_type, streaming, model)
                ],
            }

    win = summary.window
    bounds = [] if win.start_ns is None or win.end_ns is None else [win.start_ns + off,
                                                                     win.end_ns + off]
    top = {
        "version": f"llmbench {__version__}",
        "service_kind": "openai",
        "endpoint": str(s.get("endpoint") or "").lstrip("/"),
    }
    return experiment, requests(), bounds, top


def perf_analyzer_export(
    records: Sequence[RequestRecord],
    summary: PointResult,
    bodies: Sequence[bytes | str],
    epoch_offset_ns: int,
) -> dict[str, Any]:
    """``profile_export.json`` as perf_analyzer writes it (see the module docstring).

    Every measured request that completed is one entry of ``requests`` in send order (warm-up
    requests and failures are counted in ``profile_export_genai_perf.json`` and kept in our
    records file); ``payload`` is the exact body sent, as a JSON string (perf_analyzer's
    ``request_inputs``); timestamps are epoch ns: ``perf_counter_ns + epoch_offset_ns``.
    ``window_boundaries`` is the measurement window ``[T_x, T_y]``.
    """
    experiment, requests, bounds, top = _export_parts(records, summary, bodies, epoch_offset_ns)
    entry = {"experiment": experiment, "requests": list(requests), "window_boundaries": bounds}
    return {"experiments": [entry], **top}


def _write_export(path: Path, records: Sequence[RequestRecord], summary: PointResult,
                  bodies: Sequence[bytes | str], epoch_offset_ns: int) -> None:
    """:func:`perf_analyzer_export` written one request at a time (compact, UTF-8, as
    perf_analyzer's rapidjson writer), so a long run's export never sits whole in memory."""
    experiment, requests, bounds, top = _export_parts(records, summary, bodies, epoch_offset_ns)

    def dump(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))

    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8", newline="") as f:
        f.write('{"experiments":[{"experiment":' + dump(experiment) + ',"requests":[')
        for i, request in enumerate(requests):
            f.write(("," if i else "") + dump(request))
        f.write('],"window_boundaries":' + dump(bounds) + "}]," + dump(top)[1:])
    os.replace(tmp, path)


# ================================================================================================
# writing and reading
# ================================================================================================


def write_profile_artifacts(
    directory: Path,
    records: Sequence[RequestRecord],
    summary: PointResult,
    inputs: dict[str, Any] | None = None,
    stem: str = DEFAULT_STEM,
    bodies: Sequence[bytes | str] | None = None,
) -> list[Path]:
    """Writes the profile's files and returns their paths.

    ``stem`` is GenAI-Perf's ``--profile-export-file`` without ``.json``: every export file is
    named after it (``<stem>.json``, ``<stem>_genai_perf.json``, ``<stem>_genai_perf.csv``,
    ``<stem>_llmbench_requests.jsonl``). ``bodies`` are the distinct request bodies as sent
    (record ``i`` sent ``bodies[i % len(bodies)]``); without them the payloads come from
    ``inputs``. ``summary.window.epoch_offset_ns`` (set when the point started) turns our
    monotonic stamps into epoch time; without it the offset is taken now. The summary's
    GenAI-Perf ``input_config`` is filled from its settings when it has none.
    """
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    if inputs is not None:
        p = directory / INPUTS_JSON
        write_atomic(p, json.dumps(inputs, indent=2))
        written.append(p)
    if bodies is None:
        entries = (inputs or {}).get("data", [])
        bodies = [json.dumps(e["payload"][0]) for e in entries if e.get("payload")]
    if summary.window.epoch_offset_ns is None:
        summary.window.epoch_offset_ns = time.time_ns() - time.perf_counter_ns()
    if summary.genai_perf_config is None and summary.input_config is not None:
        summary.genai_perf_config = genai_perf_input_config(
            summary.input_config, stem=stem, artifact_dir=directory.parent
        )
    p = directory / f"{stem}.json"
    _write_export(p, records, summary, bodies, summary.window.epoch_offset_ns)
    written.append(p)
    p = directory / f"{stem}_llmbench_requests.jsonl"
    write_atomic(p, "".join(json.dumps(r.to_json()) + "\n" for r in records))
    written.append(p)
    p = directory / f"{stem}_genai_perf.json"
    write_atomic(p, summary.to_json(indent=2))
    written.append(p)
    p = directory / f"{stem}_genai_perf.csv"
    write_atomic(p, genai_perf_csv(summary))
    written.append(p)
    return written


def _find(directory: Path, name: str, pattern: str) -> Path:
    """``directory/name``, else the one file matching ``pattern`` (a custom export stem) in
    ``directory`` or, given the ``--artifact-dir`` of one profile, in its one point folder."""
    path = directory / name
    if path.is_file():
        return path
    for glob in (pattern, f"*/{pattern}"):
        found = sorted(directory.glob(glob))
        if len(found) == 1:
            return found[0]
    return path


def load_records(directory: Path) -> list[RequestRecord]:
    """Our per-request records of a saved profile (also from a folder written before they
    moved out of ``profile_export.json``)."""
    path = _find(directory, REQUESTS_JSONL, "*_llmbench_requests.jsonl")
    if path.is_file():
        lines = path.read_text(encoding="utf-8").splitlines()
        return [RequestRecord.from_json(json.loads(line)) for line in lines if line.strip()]
    data = json.loads((directory / PROFILE_EXPORT).read_text(encoding="utf-8"))
    if "experiments" in data:
        raise ValueError(f"{path}: not found (the per-request records of {directory})")
    return [RequestRecord.from_json(d) for d in data["requests"]]


def load_summary(directory: Path) -> PointResult:
    """The result of a saved profile; :class:`~llmbench.api.results.ResultFileError` (a
    ValueError) naming the file and the field when it is missing or malformed."""
    return read_result(PointResult, _find(directory, GENAI_PERF_JSON, "*_genai_perf.json"))
