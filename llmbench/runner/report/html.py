"""``llmbench report DIR``: plots and one self-contained HTML page, rebuilt from saved artefacts.

Works on a sweep folder (``analyze_export_genai_perf.json`` + ``checkpoint.json`` + point
folders: the CSV/JSON exports are refreshed too) and on a single ``profile`` folder. The HTML
embeds its PNGs as base64 so it can be mailed, attached to a CI run or stored in a ConfigMap
without its folder.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
from datetime import UTC, datetime
from pathlib import Path

from llmbench.runner.artifacts.layout import GENAI_PERF_JSON, TELEMETRY_PNG
from llmbench.runner.artifacts.read import load_records, load_summary
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.labels import DISTRIBUTIONS, METRIC_LABELS
from llmbench.runner.sweep.analysis import (
    ANALYZE_CSV,
    ANALYZE_JSON,
    analysis,
    analyze_csv,
    findings,
    write_exports,
)
from llmbench.runner.sweep.saved import load_sweep

DONE = "done"

__all__ = ["PLOTS_DIR", "REPORT_HTML", "build_report"]

REPORT_HTML = "report.html"
PLOTS_DIR = "plots"

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


def _point_records(run_dir: Path, names: list[str]) -> list[RequestRecord]:
    recs: list[RequestRecord] = []
    for n in names:
        try:
            recs.extend(load_records(run_dir / n))
        except (OSError, ValueError, KeyError):
            continue
    return recs


def _sweep_report(run_dir: Path, out: Path) -> Path:
    from llmbench.runner.report.plots import (
        itl_position_plot,
        latency_distribution_plot,
        latency_throughput_plot,
        ttft_vs_isl_plot,
    )

    result = load_sweep(run_dir)
    data = analysis(result)
    write_exports(run_dir, data)
    streaming = result.spec.target.streaming
    plots_dir = run_dir / PLOTS_DIR
    per_point = [
        (p.label, _point_records(run_dir, [r.name for r in p.runs if r.status == DONE]))
        for p in data.points
        if p.status == "ok"
    ]
    pngs = [
        latency_throughput_plot(data, "ttft", plots_dir / "ott_vs_ttft_p99.png"),
        latency_throughput_plot(data, "itl", plots_dir / "ott_vs_itl_p99.png"),
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
    text = analyze_csv(data, result)
    tables = text.split("\n\n", 1)
    body = [
        f"<p class=\"note\">model <b>{html.escape(data.model)}</b>, "
        f"{html.escape(data.sweep_type)} sweep over "
        f"{html.escape(', '.join(f'{v:g}' for v in data.values))}, "
        f"{data.repetitions} repetition(s) per point</p>",
        "<h2>Findings</h2>",
    ]
    css = {"info": "note", "warn": "note warn", "error": "note err"}
    body += [f"<p class=\"{css[sev]}\">{html.escape(line)}</p>" for sev, line in findings(data)]
    body += ["<h2>Summary (analyze_export_genai_perf.csv)</h2>", _csv_table(tables[0], classes)]
    if len(tables) > 1 and tables[1].strip():
        body += ["<h2>GPU telemetry</h2>", _csv_table(tables[1])]
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
    body += [
        "<h2>Benchmark spec</h2>",
        f"<pre>{html.escape(json.dumps(data.spec, indent=2))}</pre>",
        f"<p class=\"note\">files: {html.escape(str(run_dir / ANALYZE_CSV))}</p>",
    ]
    out.write_text(_page(f"llmbench analyze: {data.model}", body), encoding="utf-8")
    return out


def _profile_report(run_dir: Path, out: Path) -> Path:
    from llmbench.runner.report.plots import (
        itl_position_plot,
        latency_distribution_plot,
        ttft_vs_isl_plot,
    )

    summary = load_summary(run_dir)
    cfg = summary.input_config or {}
    streaming = bool(cfg.get("streaming", True))
    records = _point_records(run_dir, ["."])
    label = f"{cfg.get('model', 'model')} {run_dir.name}"
    points = [(run_dir.name, records)]
    plots_dir = run_dir / PLOTS_DIR
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
    if (run_dir / TELEMETRY_PNG).is_file():
        body.append(_img(run_dir / TELEMETRY_PNG))
    body += ["<h2>Arguments</h2>", f"<pre>{html.escape(json.dumps(cfg, indent=2))}</pre>"]
    out.write_text(_page(f"llmbench profile: {label}", body), encoding="utf-8")
    return out


def build_report(run_dir: Path, output: Path | None = None) -> Path:
    """Draws the plots into ``run_dir/plots`` and writes the HTML; returns its path.

    Raises ValueError when ``run_dir`` holds neither a sweep nor a profile.
    """

    out = output or run_dir / REPORT_HTML
    if (run_dir / ANALYZE_JSON).exists():
        return _sweep_report(run_dir, out)
    if (run_dir / GENAI_PERF_JSON).exists():
        return _profile_report(run_dir, out)
    raise ValueError(
        f"{run_dir}: neither an analyze folder ({ANALYZE_JSON}) nor a profile folder "
        f"({GENAI_PERF_JSON})"
    )
