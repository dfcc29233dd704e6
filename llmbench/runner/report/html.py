"""The HTML report: plots and one self-contained page of a sweep or of one profile.

Two ways in, one renderer each, so a report made in the run and one made later are the same:

* in the run, from what it holds in memory: ``llmbench analyze`` and the runner pod call
  :func:`render_report` with the sweep, its analysis (the one the exports were written from)
  and its records; ``llmbench profile --generate-plots`` calls :func:`render_profile_report`;
* afterwards, ``llmbench report DIR`` (:func:`build_report`) loads the saved documents (a
  sweep: :func:`~llmbench.runner.sweep.saved.load_sweep`; a profile: its result and records)
  and calls the same renderers.

Per point it embeds ``telemetry.png`` and ``timeseries.png`` (drawn by the run; a point's
``timeseries.png`` is drawn from its ``<stem>_timeseries.jsonl`` when missing). A renderer
writes the plots (``plots/``) and the page, never an export: the CSV and JSON are
written by the run, from the same analysis. The HTML embeds its PNGs as base64 so it can be
mailed, attached to a CI run or stored in a ConfigMap without its folder.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from llmbench.api.results import PointResult, SearchSummary, SweepAnalysis
from llmbench.runner.artifacts.layout import GENAI_PERF_JSON, TELEMETRY_PNG, TIMESERIES_PNG
from llmbench.runner.artifacts.read import load_records, load_summary
from llmbench.runner.artifacts.timeseries import load_timeseries
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.labels import DISTRIBUTIONS, METRIC_LABELS
from llmbench.runner.sweep.analysis import ANALYZE_CSV, ANALYZE_JSON, findings, summary_csv
from llmbench.runner.sweep.run import DONE, SweepResult
from llmbench.runner.sweep.saved import load_sweep

__all__ = [
    "PLOTS_DIR",
    "REPORT_HTML",
    "RecordsOf",
    "build_report",
    "render_profile_report",
    "render_report",
    "saved_records",
]

REPORT_HTML = "report.html"
PLOTS_DIR = "plots"

#: The request records of one run, by its folder name (empty when there are none).
RecordsOf = Callable[[str], Sequence[RequestRecord]]

_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:2em;color:#222;
max-width:1200px}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.6em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85em;margin:.5em 0}
th,td{border:1px solid #ccc;padding:.25em .5em;text-align:right}
th{background:#f3f3f3}td:first-child,th:first-child{text-align:left}
tr.knee td{background:#fde2e2}tr.best td{background:#e0f5e0}tr.failed td{color:#a00}
.note{margin:.2em 0}.warn{color:#a60}.err{color:#a00}
img{max-width:100%;border:1px solid #eee;margin:.5em 0}
pre{background:#f7f7f7;padding:.8em;overflow:auto;font-size:.8em}
"""


def _img(path: Path) -> str:
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<img alt="{html.escape(path.stem)}" src="data:image/png;base64,{data}">'


def split_tables(text: str) -> tuple[str, str | None]:
    """The summary CSV's two tables: table 1, and the GPU table or None when it has no rows.

    They are separated by an empty row; the CSV's line ends are CRLF (Python's csv writer),
    and GenAI-Perf writes the GPU table's header even without GPUs, so a header alone is no
    table to show.
    """
    lines = text.splitlines(keepends=True)
    cut = next((i for i, line in enumerate(lines) if not line.strip()), len(lines))
    gpu = lines[cut + 1:]
    return "".join(lines[:cut]), ("".join(gpu) if len(gpu) > 1 else None)


def _csv_table(text: str, row_classes: dict[int, str] | None = None) -> str:
    """CSV text (one table) as an HTML table; ``row_classes`` by data-row index."""
    rows = list(csv.reader(io.StringIO(text)))
    if not rows:
        return ""
    out = ["<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in rows[0]) + "</tr>"]
    for i, r in enumerate(rows[1:]):
        cls = (row_classes or {}).get(i)
        attr = f' class="{cls}"' if cls else ""
        out.append(f"<tr{attr}>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _page(title: str, body: list[str]) -> str:
    stamp = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1><p class=\"note\">generated {stamp} by llmbench</p>\n"
        + "\n".join(body)
        + "\n</body></html>\n"
    )


def saved_records(run_dir: Path) -> RecordsOf:
    """The records of each run read from its folder under ``run_dir`` when a plot asks for
    them; a run whose records are missing or unreadable has none (its plots leave it out).

    For a saved run, and for the runner pod, whose memory holds one point's records at a time.
    """

    def of(name: str) -> list[RequestRecord]:
        try:
            return load_records(run_dir / name)
        except (OSError, ValueError, KeyError):
            return []

    return of


def _timeseries_png(folder: Path) -> Path | None:
    """The point's ``timeseries.png``; drawn from its saved ``<stem>_timeseries.jsonl`` when
    the run did not draw it (a report made later); None when the point has no time series."""
    png = folder / TIMESERIES_PNG
    if png.is_file():
        return png
    try:
        series = load_timeseries(folder)
    except (OSError, ValueError):
        return None
    if series is None:
        return None
    from llmbench.runner.report.timeseries_plot import plot_timeseries

    return plot_timeseries(series, png)


def _records(records: RecordsOf, names: Iterable[str]) -> list[RequestRecord]:
    return [rec for name in names for rec in records(name)]


def _search_table(search: SearchSummary) -> str:
    """The probes of an adaptive search in the order they ran, the answer's row marked."""
    rows = [
        "<table><tr><th>probe</th><th>phase</th><th>load</th><th>meets SLO</th>"
        "<th>violations</th></tr>"
    ]
    for k, p in enumerate(search.probes, 1):
        cls = ' class="best"' if p.value == search.answer else ""
        rows.append(
            f"<tr{cls}><td>{k}</td><td>{p.phase}</td><td>{html.escape(p.label)}</td>"
            f"<td>{'yes' if p.meets_slo else 'no'}</td>"
            f"<td>{html.escape('; '.join(p.violations))}</td></tr>"
        )
    rows.append("</table>")
    note = (
        f"<p class=\"note\">{len(search.probes)} probes at resolution "
        f"{html.escape(search.resolution_text)}; a grid of that resolution over "
        f"{search.low:g}..{search.high:g} needs {search.grid_points} points</p>"
    )
    return "".join(rows) + note


def render_report(
    result: SweepResult, data: SweepAnalysis, records: RecordsOf, out: Path
) -> Path:
    """Draws the sweep's plots into ``<run folder>/plots`` and writes the page to ``out``.

    ``data`` is the sweep's analysis (its summary table is the exports' CSV text, built from
    it again); ``records`` gives each run's request records for the per-request plots. The
    per-point ``telemetry.png`` files drawn after each point are embedded as they are.
    """
    from llmbench.runner.report.plots import (
        itl_position_plot,
        latency_distribution_plot,
        latency_throughput_plot,
        ttft_vs_isl_plot,
    )

    run_dir = result.run_dir
    streaming = result.spec.target.streaming
    plots_dir = run_dir / PLOTS_DIR
    per_point = [
        (f"{p.label} {p.workload}" if p.workload else p.label,
         _records(records, (r.name for r in p.runs if r.status == DONE)))
        for p in data.points
        if p.status == "ok"
    ]
    if data.pareto is None:
        pngs = [
            latency_throughput_plot(data, "ttft", plots_dir / "ott_vs_ttft_p99.png"),
            latency_throughput_plot(data, "itl", plots_dir / "ott_vs_itl_p99.png"),
        ]
    else:  # a two-axis sweep: the frontier, then the two curves per workload
        from llmbench.runner.report.pareto_plot import pareto_plot, workload_views

        pngs = [pareto_plot(data.pareto, plots_dir / "pareto.png")] + [
            latency_throughput_plot(view, m, plots_dir / f"ott_vs_{m}_p99-{label}.png")
            for m in ("ttft", "itl") for label, view in workload_views(data)
        ]
    pngs += [
        ttft_vs_isl_plot(per_point, plots_dir / "ttft_vs_isl.png", streaming),
        itl_position_plot(per_point, plots_dir / "itl_by_position.png"),
        latency_distribution_plot(per_point, plots_dir / "latency_distributions.png", streaming),
    ]
    classes: dict[int, str] = {}
    for i, p in enumerate(data.points):
        if p.status != "ok":
            classes[i] = "failed"
    if data.slo is not None and data.slo.best_index is not None:
        classes[data.slo.best_index] = "best"
    if data.knee is not None:
        classes[data.knee.index] = "knee"
    names = [p.name for p in data.points]
    for w in data.workloads or ():  # a two-axis sweep: each workload's knee
        if w.knee is not None and w.knee.name in names:
            classes[names.index(w.knee.name)] = "knee"
    summary, gpu = split_tables(summary_csv(data))
    body = [
        f"<p class=\"note\">model <b>{html.escape(data.model)}</b>, "
        f"{html.escape(data.sweep_type)} sweep over "
        f"{html.escape(', '.join(f'{v:g}' for v in data.values))}, "
        f"{data.repetitions} repetition(s) per point</p>",
        "<h2>Findings</h2>",
    ]
    css = {"info": "note", "warn": "note warn", "error": "note err"}
    body += [f"<p class=\"{css[sev]}\">{html.escape(line)}</p>" for sev, line in findings(data)]
    if data.search is not None:
        body += ["<h2>Max load under SLO: the search</h2>", _search_table(data.search)]
    body += ["<h2>Summary (analyze_export_genai_perf.csv)</h2>", _csv_table(summary, classes)]
    if gpu is not None:
        body += ["<h2>GPU telemetry</h2>", _csv_table(gpu)]
    body.append("<h2>Plots</h2>")
    body += [_img(p) for p in pngs if p is not None]
    telemetry_pngs = [
        (p.label, run_dir / r.name / TELEMETRY_PNG)
        for p in data.points
        for r in p.runs
        if (run_dir / r.name / TELEMETRY_PNG).is_file()
    ]
    if telemetry_pngs:
        body.append("<h2>GPU and server telemetry per point</h2>")
        for label, png in telemetry_pngs:
            body += [f"<h3>{html.escape(label)}</h3>", _img(png)]
    series_pngs = [
        (p.label, drawn)
        for p in data.points
        for r in p.runs
        if (run_dir / r.name).is_dir()
        and (drawn := _timeseries_png(run_dir / r.name)) is not None
    ]
    if series_pngs:
        body.append(
            "<h2>Time series per point: TTFT and OTT next to the server's queue, KV-cache use "
            "and GPU power</h2>"
        )
        for label, series_png in series_pngs:
            body += [f"<h3>{html.escape(label)}</h3>", _img(series_png)]
    body += [
        "<h2>Benchmark spec</h2>",
        f"<pre>{html.escape(json.dumps(data.spec, indent=2))}</pre>",
        f"<p class=\"note\">files: {html.escape(str(run_dir / ANALYZE_CSV))}</p>",
    ]
    out.write_text(_page(f"llmbench analyze: {data.model}", body), encoding="utf-8")
    return out


def render_profile_report(
    summary: PointResult, records: Sequence[RequestRecord], folder: Path, out: Path
) -> Path:
    """Draws one profile's plots into ``folder/plots`` and writes the page to ``out``
    (``folder``: the profile's own folder, whose ``telemetry.png`` is embedded if present)."""
    from llmbench.runner.report.plots import (
        itl_position_plot,
        latency_distribution_plot,
        ttft_vs_isl_plot,
    )

    cfg = summary.input_config or {}
    streaming = bool(cfg.get("streaming", True))
    label = f"{cfg.get('model', 'model')} {folder.name}"
    points = [(folder.name, records)]
    plots_dir = folder / PLOTS_DIR
    pngs = [
        ttft_vs_isl_plot(points, plots_dir / "ttft_vs_isl.png", streaming),
        itl_position_plot(points, plots_dir / "itl_by_position.png"),
        latency_distribution_plot(points, plots_dir / "latency_distributions.png", streaming),
    ]
    stats = ("avg", "min", "max", "p99", "p90", "p75", "p50")
    rows = ["Metric," + ",".join(stats)]
    for key in DISTRIBUTIONS:
        stat = summary.stat(key)
        if stat is not None:
            cells = ",".join(f"{getattr(stat, s):.2f}" for s in stats)
            rows.append(f"\"{METRIC_LABELS[key].genai_perf}\"," + cells)
    for key in ("output_token_throughput", "request_throughput", "goodput"):
        value = summary.single(key)
        if value is not None:
            name = METRIC_LABELS[key].genai_perf
            rows.append(f"\"{name}\",{value:.2f}" + ",N/A" * (len(stats) - 1))
    body = ["<h2>Metrics</h2>", _csv_table("\n".join(rows))]
    errors = summary.errors
    if errors.total:
        kinds = ", ".join(f"{k}: {v.count}" for k, v in errors.by_type.items())
        body.append(f"<p class=\"note err\">errors: {errors.total} ({html.escape(kinds)})</p>")
    body.append("<h2>Plots</h2>")
    body += [_img(p) for p in pngs if p is not None]
    if (folder / TELEMETRY_PNG).is_file():
        body.append(_img(folder / TELEMETRY_PNG))
    series_png = _timeseries_png(folder)
    if series_png is not None:
        body += ["<h2>Time series</h2>", _img(series_png)]
    body += ["<h2>Arguments</h2>", f"<pre>{html.escape(json.dumps(cfg, indent=2))}</pre>"]
    out.write_text(_page(f"llmbench profile: {label}", body), encoding="utf-8")
    return out


def build_report(run_dir: Path, output: Path | None = None) -> Path:
    """``llmbench report DIR``: loads the saved sweep or profile in ``run_dir`` and renders it
    (:func:`render_report`, :func:`render_profile_report`); returns the page's path
    (``output``, default ``run_dir/report.html``).

    Raises ValueError when ``run_dir`` holds neither a sweep nor a profile, or one of its
    files is not readable (naming the file).
    """
    out = output or run_dir / REPORT_HTML
    if (run_dir / ANALYZE_JSON).exists():
        result, data = load_sweep(run_dir)
        return render_report(result, data, saved_records(run_dir), out)
    if (run_dir / GENAI_PERF_JSON).exists():
        records = saved_records(run_dir)(".")
        return render_profile_report(load_summary(run_dir), records, run_dir, out)
    raise ValueError(
        f"{run_dir}: neither an analyze folder ({ANALYZE_JSON}) nor a profile folder "
        f"({GENAI_PERF_JSON})"
    )
