"""Recorded scrapes in, one window's summary and the point's ``"telemetry"`` section out.

Why this module exists: it is the pure layer between the scraper and the artefacts. It works
on already-scraped ``(t_ns, text)`` samples, so tests and offline analysis feed recorded data
and get the same figures as a live run:

* dcgm-exporter (``:9400/metrics``): per GPU power, energy, utilisation, memory and (when the
  exporter collects them) the profiling ratios, kept only for the GPUs that serve the target
  (``pod``/``namespace`` or ``exported_pod``/``exported_namespace`` labels, or GPU UUIDs);
  counters become deltas over the window, and an exporter that collects slower than we scrape
  is flagged stale;
* the inference server's own ``/metrics`` (vLLM old and new names, SGLang, TGI): gauges as
  avg/max, counters as deltas over the window, server-side TTFT/ITL means from histogram deltas.

:func:`telemetry_section` assembles ``profile_export_genai_perf.json["telemetry"]`` as its model
(:class:`~llmbench.api.results.TelemetrySummary`): the summary
(:func:`telemetry_json`), the validity signals (:mod:`llmbench.runner.telemetry.validity`) fed
with :func:`client_facts`, and :func:`energy_efficiency`. Problems become warnings, never
exceptions.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from llmbench.api.results import Efficiency, TelemetrySummary, ValiditySignal
from llmbench.runner.telemetry.model import (
    DRAM_ACTIVE,
    ENERGY,
    ENFORCED_POWER_LIMIT,
    ENGINE_PREFIXES,
    FB_FREE,
    FB_RESERVED,
    FB_USED,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    POWER,
    POWER_LIMIT,
    SERVER_COUNTERS,
    SERVER_GAUGES,
    SERVER_HISTOGRAMS,
    TENSOR_ACTIVE,
    GpuFilter,
    GpuSummary,
    Scrape,
    ServerSummary,
    Stat,
    TelemetryResult,
    first_label,
    gpu_id,
    workload_namespace,
    workload_pod,
)
from llmbench.runner.telemetry.parse import is_blank, parse_exposition
from llmbench.runner.telemetry.validity import sum_or_none, validity_signals

__all__ = [
    "ServerProgress",
    "client_facts",
    "energy_efficiency",
    "server_progress",
    "summarize_scrapes",
    "telemetry_json",
    "telemetry_section",
]

_MIB = 1024 * 1024


def summarize_scrapes(
    scrapes: Mapping[str, Sequence[Scrape]],
    *,
    gpu_filter: GpuFilter | None = None,
    window_ns: tuple[int, int] | None = None,
    interval_s: float | None = None,
    counters_until_ns: int | None = None,
) -> TelemetryResult:
    """Summarise recorded scrapes per URL over a window.

    Args:
        scrapes: URL -> ``(t_ns, exposition text)`` in time order. A URL may hold DCGM series,
            inference-server series or both.
        gpu_filter: which GPUs serve the target; ``None`` keeps all.
        window_ns: ``(start, end)`` on the same clock as the samples; samples outside are
            ignored. Defaults to the first and last sample.
        interval_s: the scrape interval that was asked for, used for staleness detection;
            defaults to the median spacing of the samples.
        counters_until_ns: server samples after the window end up to this time (the
            collector's settle scrapes) still count for the server's counters and histograms,
            because a server may count the window's last requests after answering them; they
            are left out of gauges, GPU figures and the scrape counts.

    Returns:
        A :class:`TelemetryResult`. Problems become ``warnings`` (one per URL and kind), never
        exceptions: a URL whose text does not parse simply contributes no table.
    """
    gpu_filter = gpu_filter or GpuFilter()
    all_t = [t for seq in scrapes.values() for t, _ in seq]
    if window_ns is None:
        window_ns = (min(all_t), max(all_t)) if all_t else (0, 0)
    w0, w1 = window_ns
    result = TelemetryResult(window_start_ns=w0, window_end_ns=w1, gpu_filter=gpu_filter)

    until = max(w1, counters_until_ns or w1)
    for url, seq in scrapes.items():
        parsed: list[tuple[int, list[tuple[str, dict[str, str], float]]]] = []
        late: list[tuple[int, list[tuple[str, dict[str, str], float]]]] = []
        bad: list[str] = []
        for t, text in seq:
            if not w0 <= t <= until:
                continue
            try:
                (parsed if t <= w1 else late).append((t, parse_exposition(text)))
            except ValueError as exc:
                bad.append(str(exc))
        if bad:
            result.warnings.append(
                f"telemetry {url}: {len(bad)} of {len(bad) + len(parsed)} scrapes were not "
                f"Prometheus text ({bad[0][:120]}); "
                + ("continuing without this source" if not parsed else "those were skipped")
            )
        result.scrape_counts[url] = len(parsed)
        if not parsed:
            continue
        iv = interval_s if interval_s else _median_spacing([t for t, _ in parsed])
        found_gpu = _summarize_dcgm(url, parsed, gpu_filter, w0, iv, result)
        found_server = _summarize_server(url, parsed, w0, result, late=late)
        if not found_gpu and not found_server:
            result.warnings.append(
                f"telemetry {url}: no DCGM_FI_* or vllm:/sglang:/tgi_ metrics in "
                f"{len(parsed)} scrapes; continuing without this source"
            )
    return result


def _median_spacing(ts: Sequence[int]) -> float | None:
    if len(ts) < 2:
        return None
    return float(np.median(np.diff(np.asarray(sorted(ts), dtype=np.float64)))) / 1e9


def _counter_increase(values: Sequence[float]) -> tuple[float, int]:
    """Increase of a counter over consecutive samples, Prometheus ``increase()`` style.

    A drop means the counter restarted from zero (driver reload, server restart): the new value
    is all increase since the restart. Returns ``(increase, resets)``.
    """
    total = 0.0
    resets = 0
    for prev, cur in zip(values, values[1:], strict=False):
        if cur >= prev:
            total += cur - prev
        else:
            total += cur
            resets += 1
    return total, resets


def _summarize_dcgm(
    url: str,
    parsed: Sequence[tuple[int, list[tuple[str, dict[str, str], float]]]],
    gpu_filter: GpuFilter,
    w0: int,
    interval_s: float | None,
    result: TelemetryResult,
) -> bool:
    """Fill ``result.gpus`` from one URL; returns whether any DCGM series was seen."""
    # gpu_id -> list of (t, {metric: value}) ; meta from the latest labels
    per_gpu: dict[str, list[tuple[int, dict[str, float]]]] = {}
    meta: dict[str, dict[str, str]] = {}
    seen: dict[str, dict[str, str]] = {}
    for t, samples in parsed:
        row: dict[str, dict[str, float]] = {}
        for name, labels, value in samples:
            if not name.startswith("DCGM_FI_"):
                continue
            # the parser appends "_total" to counter samples (the energy counter)
            name = name.removesuffix("_total")
            gid = gpu_id(labels)
            if gid is None:
                continue
            seen[gid] = labels
            if not gpu_filter.matches(labels):
                continue
            meta[gid] = labels
            if is_blank(name, value):
                continue
            # exporters fed through Prometheus may emit one series per scrape target; keep last
            row.setdefault(gid, {})[name] = value
        for gid in meta:
            per_gpu.setdefault(gid, []).append((t, row.get(gid, {})))
    if not seen:
        return False
    if not per_gpu:
        pods = sorted({p for lb in seen.values() if (p := workload_pod(lb))})
        result.warnings.append(
            f"telemetry {url}: none of the {len(seen)} GPUs matched the GPU filter "
            f"({gpu_filter.describe()}); pods seen: {', '.join(pods) or 'none'}; "
            "no GPU table for this source"
        )
        return True

    stale_notes: list[str] = []
    for gid, rows in sorted(per_gpu.items()):
        labels = meta[gid]
        key = gid if gid not in result.gpus else f"{gid}@{url}"
        g = GpuSummary(
            gpu_id=key,
            source_url=url,
            index=labels.get("gpu"),
            uuid=first_label(labels, "UUID", "uuid"),
            hostname=first_label(labels, "Hostname", "hostname"),
            model_name=labels.get("modelName"),
            pci_bus_id=labels.get("pci_bus_id"),
            pod=workload_pod(labels),
            namespace=workload_namespace(labels),
            container=labels.get("exported_container") or labels.get("container"),
        )

        def col(
            metric: str, scale: float = 1.0, _rows: list[tuple[int, dict[str, float]]] = rows
        ) -> list[float | None]:
            return [None if metric not in r else r[metric] * scale for _, r in _rows]

        g.power_w = Stat.of(col(POWER))
        g.utilization_pct = Stat.of(col(GPU_UTIL))
        g.memory_used_gb = Stat.of(col(FB_USED, _MIB / 1e9))
        g.gr_engine_active = Stat.of(col(GR_ENGINE_ACTIVE))
        g.tensor_active = Stat.of(col(TENSOR_ACTIVE))
        g.dram_active = Stat.of(col(DRAM_ACTIVE))
        energy = [v for v in col(ENERGY) if v is not None]
        if len(energy) >= 2:
            inc_mj, g.energy_counter_resets = _counter_increase(energy)
            g.energy_j = inc_mj / 1000.0
        # static-ish figures from the latest scrape that has them (a GPU may miss one scrape)
        last = next((r for _, r in reversed(rows) if POWER in r or FB_USED in r), rows[-1][1])
        g.power_limit_w = last.get(ENFORCED_POWER_LIMIT, last.get(POWER_LIMIT))
        if FB_USED in last and FB_FREE in last:
            total_mib = last[FB_USED] + last[FB_FREE] + last.get(FB_RESERVED, 0.0)
            g.memory_total_gb = total_mib * _MIB / 1e9
        g.series = [((t - w0) / 1e9, r.get(POWER), r.get(GPU_UTIL)) for t, r in rows]
        _staleness(g, rows, interval_s)
        if g.stale:
            res = (
                f"≈ {g.effective_resolution_s:.1f} s"
                if g.effective_resolution_s is not None
                else "coarser than the window"
            )
            stale_notes.append(
                f"{key} changed {g.distinct_samples - 1} times in {g.scrapes} scrapes "
                f"(effective resolution {res})"
            )
        result.gpus[key] = g
    if stale_notes:
        iv = f"{interval_s:.2f} s" if interval_s else "?"
        result.warnings.append(
            f"telemetry {url}: stale DCGM samples, the exporter collects slower than the "
            f"{iv} scrape interval (dcgm-exporter -c/--collect-interval defaults to 30000 ms): "
            + "; ".join(stale_notes)
            + "; averages and p99 rest on those few distinct readings"
        )
    return True


def _staleness(
    g: GpuSummary, rows: Sequence[tuple[int, dict[str, float]]], interval_s: float | None
) -> None:
    """Detect an exporter that updates slower than we scrape.

    dcgm-exporter re-reads DCGM every collect interval (30 s by default) and serves the same
    text in between, so consecutive identical readings of *all* of a GPU's fields mean "no new
    sample", not "the GPU was steady" (power and the energy counter move every real update).
    The effective resolution is the median time between changes; a GPU is stale when it is
    clearly coarser than the scrape interval.
    """
    g.scrapes = len(rows)
    changes = [t for (_, prev), (t, cur) in zip(rows, rows[1:], strict=False) if cur != prev]
    g.distinct_samples = 1 + len(changes) if rows else 0
    span_s = (rows[-1][0] - rows[0][0]) / 1e9 if rows else 0.0
    # Fewer than two observed updates: only a lower bound (the span) is known -> None.
    g.effective_resolution_s = (
        float(np.median(np.diff(np.asarray(changes)))) / 1e9 if len(changes) >= 2 else None
    )
    if len(rows) < 3 or not interval_s:
        return  # two boundary scrapes cannot tell an idle GPU from a stale exporter
    coarsest = g.effective_resolution_s if g.effective_resolution_s is not None else span_s
    g.stale = coarsest > 1.5 * interval_s


def _summarize_server(
    url: str,
    parsed: Sequence[tuple[int, list[tuple[str, dict[str, str], float]]]],
    w0: int,
    result: TelemetryResult,
    *,
    late: Sequence[tuple[int, list[tuple[str, dict[str, str], float]]]] = (),
) -> bool:
    """Fill ``result.servers[url]``; returns whether any known server metric was seen.

    ``late`` are the settle scrapes after the window end: they extend counter and histogram
    deltas only (see :func:`summarize_scrapes`).
    """
    # name -> per scrape: {labels-key: value}
    by_name: dict[str, list[dict[tuple[tuple[str, str], ...], float]]] = {}
    engine: str | None = None
    n_window = len(parsed)
    every = [*parsed, *late]
    n = len(every)
    #: per scrape: whether it showed this server's metrics at all
    served = [False] * n
    for i, (_, samples) in enumerate(every):
        for name, labels, value in samples:
            for prefix, eng in ENGINE_PREFIXES:
                if name.startswith(prefix):
                    engine = engine or eng
                    served[i] = True
                    break
            else:
                continue
            if math.isnan(value):
                continue
            lst = by_name.setdefault(name, [{} for _ in range(n)])
            lst[i][tuple(sorted(labels.items()))] = value
    if engine is None or not any(served[:n_window]):
        return False

    s = ServerSummary(url=url, engine=engine, scrapes=n_window)

    def pick(candidates: Sequence[str], suffix: str = "") -> str | None:
        for c in candidates:
            if c + suffix in by_name:
                return c
        return None

    gauge_series: dict[str, list[float | None]] = {}
    for canon, (cands, how) in SERVER_GAUGES.items():
        gauge = pick(cands)
        if gauge is None:
            continue
        s.names[canon] = gauge
        vals: list[float | None] = []
        for snap in by_name[gauge][:n_window]:
            if not snap:
                vals.append(None)
            elif how == "mean":
                vals.append(sum(snap.values()) / len(snap))
            else:
                vals.append(sum(snap.values()))
        gauge_series[canon] = vals
        setattr(s, canon, Stat.of(vals))

    def delta(name: str) -> float | None:
        snaps = by_name[name]
        keys = {k for snap in snaps for k in snap}
        total = 0.0
        seen_any = False
        for k in keys:
            vals = [snap[k] for snap in snaps if k in snap]
            first = next(i for i, snap in enumerate(snaps) if k in snap)
            if first > 0 and served[0]:
                # Client libraries export a labelled series only once it is first incremented
                # (vLLM's request_success_total{finish_reason=...} on a fresh server): absent
                # from a scrape that showed the server means 0, so all of it is in the window.
                vals.insert(0, 0.0)
            if len(vals) >= 2:
                seen_any = True
                total += _counter_increase(vals)[0]
        return total if seen_any else None

    for canon, cands in SERVER_COUNTERS.items():
        counter = pick(cands)
        if counter is not None:
            s.names[canon] = counter
            setattr(s, canon, delta(counter))
    for canon, cands in SERVER_HISTOGRAMS.items():
        base = pick(cands, "_sum")
        if base is None or base + "_count" not in by_name:
            continue
        s.names[canon] = base
        dsum, dcount = delta(base + "_sum"), delta(base + "_count")
        mean = dsum / dcount if dsum is not None and dcount else None
        setattr(s, f"{canon}_mean_s", mean)

    def at(canon: str, i: int) -> float | None:
        vals = gauge_series.get(canon)
        return vals[i] if vals else None

    s.series = [
        (
            (t - w0) / 1e9,
            at("kv_cache_usage", i),
            at("requests_running", i),
            at("requests_waiting", i),
        )
        for i, (t, _) in enumerate(parsed)
    ]
    result.servers[url] = s
    return True


class ServerProgress(NamedTuple):
    """What says whether a server has finished reporting a load: its completed-request and
    generated-token counters and its running-requests gauge, each summed over label sets
    (``None`` when not exposed)."""

    completed: float | None
    generated: float | None
    running: float | None


def server_progress(text: str) -> ServerProgress | None:
    """The :class:`ServerProgress` in one scrape, or ``None`` when the text has none of it (a
    DCGM exporter) or is not Prometheus text.

    The collector compares consecutive scrapes with it to know when a server's counters have
    caught up with the requests it already answered.
    """
    try:
        samples = parse_exposition(text)
    except ValueError:
        return None
    sums: dict[str, float] = {}
    for name, _, value in samples:
        if not math.isnan(value):
            sums[name] = sums.get(name, 0.0) + value

    def first(candidates: Sequence[str]) -> float | None:
        return next((sums[c] for c in candidates if c in sums), None)

    progress = ServerProgress(
        completed=first(SERVER_COUNTERS["requests_completed"]),
        generated=first(SERVER_COUNTERS["generation_tokens"]),
        running=first(SERVER_GAUGES["requests_running"][0]),
    )
    return None if progress == (None, None, None) else progress


def energy_efficiency(
    result: TelemetryResult, output_tokens: float, window_s: float
) -> Efficiency:
    """Energy per output token and throughput per watt over the kept GPUs.

    ``window_s`` is the client's measurement window (T_y − T_x) and ``output_tokens`` its Σ OSL,
    so the figures line up with OTT; ``energy_j`` stays the counter's increase over the whole
    telemetry window, the per-token figure uses its share of the measurement window. Any
    missing input gives ``None``, not 0.
    """
    gpus = list(result.gpus.values())
    energy = sum_or_none(g.energy_j for g in gpus) if gpus else None
    if gpus and any(g.energy_j is None for g in gpus):
        energy = None  # a partial sum would flatter the point
    power = sum_or_none(g.power_w.avg for g in gpus) if gpus else None
    if gpus and any(g.power_w.avg is None for g in gpus):
        power = None
    # The counter's increase covers the telemetry window, which opens before the warm-up
    # requests; the tokens are the measured requests' only. Scale the energy to the client's
    # measurement window (mean power x its length) so J/token is not inflated by the warm-up.
    measured = energy
    if energy is not None and 0 < window_s < result.window_s:
        measured = energy * window_s / result.window_s
    j_per_tok = measured / output_tokens if measured is not None and output_tokens > 0 else None
    tps_per_w = (
        output_tokens / window_s / power
        if power is not None and power > 0 and window_s > 0
        else None
    )
    return Efficiency(
        energy_j=energy,
        avg_power_w=power,
        joules_per_output_token=j_per_tok,
        output_tokens_per_s_per_watt=tps_per_w,
    )


def telemetry_json(
    result: TelemetryResult, validity: Sequence[ValiditySignal] | None = None
) -> TelemetrySummary:
    """The ``"telemetry"`` section of ``profile_export_genai_perf.json``, without efficiency.

    Its GPU table rows are :meth:`TelemetrySummary.gpu_rows`, the same for a live run and a
    saved one.
    """
    return TelemetrySummary(
        window_s=result.window_s,
        gpu_filter=result.gpu_filter.to_model(),
        gpus={k: g.to_model() for k, g in result.gpus.items()},
        server={k: s.to_model() for k, s in result.servers.items()},
        scrape_counts=dict(result.scrape_counts),
        warnings=list(result.warnings),
        validity=list(validity or []),
    )


def client_facts(records: Iterable[Any], *, window_includes_warmup: bool = True) -> dict[str, Any]:
    """The client-side inputs of :func:`validity_signals`, from the point's request records.

    Duck-typed on ``llmbench.runner.client.records.RequestRecord`` (``warmup``, ``error_type``,
    ``last_token_ns``, ``output_tokens``, ``output_tokens_source``, ``output_tokens_client``,
    ``scheduled_ns``, ``sent_ns``). ``window_includes_warmup`` says whether the telemetry window
    also covered the warm-up requests (it does when ``on_window("start")`` fires before warm-up):
    the server counts every request it finished, so the client must too.

    Errored requests may or may not reach the server's success counter (vLLM counts aborts), so
    their number becomes ``foreign_tolerance`` instead of being guessed either way.
    """
    recs = [r for r in records if window_includes_warmup or not getattr(r, "warmup", False)]
    ok = [
        r
        for r in recs
        if getattr(r, "error_type", None) is None and getattr(r, "last_token_ns", None) is not None
    ]
    errors = len(recs) - len(ok)
    out_tokens = [getattr(r, "output_tokens", None) for r in ok]
    mismatch = sum(
        1
        for r in ok
        if getattr(r, "output_tokens_source", None) == "server"
        and getattr(r, "output_tokens_client", None) is not None
        and r.output_tokens_client != r.output_tokens
    )
    lag = [
        (r.sent_ns - r.scheduled_ns) / 1e6
        for r in recs
        if not getattr(r, "warmup", False) and getattr(r, "scheduled_ns", None) is not None
    ]
    return {
        "client_completed": len(ok),
        "client_output_tokens": (
            sum(int(t) for t in out_tokens if t is not None)
            if out_tokens and all(t is not None for t in out_tokens)
            else None
        ),
        "token_mismatch_count": mismatch,
        "dispatch_lag_p99_ms": float(np.percentile(lag, 99)) if lag else None,
        "foreign_tolerance": errors,
    }


def telemetry_section(
    result: TelemetryResult,
    records: Iterable[Any] = (),
    *,
    output_tokens: float | None = None,
    window_s: float | None = None,
    window_includes_warmup: bool = True,
) -> TelemetrySummary:
    """Everything for ``profile_export_genai_perf.json["telemetry"]`` in one call.

    ``output_tokens`` (Σ OSL of measured requests) and ``window_s`` (T_y − T_x) are the client's
    figures behind OTT, so ``efficiency`` lines up with the throughput table; either missing
    gives ``None`` efficiency figures. Validity signals use :func:`client_facts` of ``records``.
    """
    facts = client_facts(records, window_includes_warmup=window_includes_warmup)
    validity = validity_signals(result, **facts)
    doc = telemetry_json(result, validity)
    if output_tokens is not None and window_s is not None:
        doc.efficiency = energy_efficiency(result, output_tokens, window_s)
    else:
        doc.efficiency = energy_efficiency(result, 0.0, 0.0)
    return doc
