"""The user documentation names what the code writes: a metric, column or signal added to the
output without a line in ``docs/`` fails here, and so does a broken image or link.

``docs/metrics.md`` must define every metric key a measured point writes and every figure of
a sweep point; ``docs/results.md`` must explain every column the summary CSV can have and every
validity signal; the images it shows must exist and stay small; the README must link both.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

from llmbench.api.results import (
    GENAI_PERF_METRICS,
    Efficiency,
    PointMetrics,
    SloVerdict,
    Spread,
    SweepPoint,
)
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.point.metrics import SLO_KEYS, summarize
from llmbench.runner.sweep.analysis import TABLE1_COLUMNS, TABLE2_COLUMNS, table1_columns
from llmbench.runner.sweep.knee import OTT_MIN_GROWTH, RULE_OTT, RULE_TTFT, TTFT_FACTOR
from llmbench.runner.telemetry.validity import validity_signals
from tests.results_factory import sweep_analysis

ROOT = Path(__file__).resolve().parents[1]


def _defined(name: str, text: str) -> bool:
    """Whether ``name`` appears as a word inside a `code` span of ``text``."""
    return re.search(rf"`[^`\n]*\b{re.escape(name)}\b[^`\n]*`", text) is not None


METRICS_MD = (ROOT / "docs" / "metrics.md").read_text(encoding="utf-8")
RESULTS_MD = (ROOT / "docs" / "results.md").read_text(encoding="utf-8")


def _record(i: int, *, warmup: bool = False) -> RequestRecord:
    """A streamed, open-loop request: 4 content events, 8 output tokens, counted by the server."""
    sent = 1_000_000_000 + i * 10_000_000
    chunks = [sent + 30_000_000 + k * 5_000_000 for k in range(4)]
    return RequestRecord(
        index=i, warmup=warmup, scheduled_ns=sent - 100_000, sent_ns=sent,
        first_token_ns=chunks[0], last_token_ns=chunks[-1], chunk_ns=chunks,
        input_tokens=16, input_tokens_source="server", input_tokens_client=16,
        output_tokens=8, output_tokens_source="server", output_tokens_client=9,
    )


def test_every_metric_key_of_a_measured_point_is_defined_in_metrics_md() -> None:
    records = [_record(0, warmup=True)] + [_record(i) for i in range(1, 6)]
    doc = summarize(records, streaming=True, slo={"ttft": 100.0, "itl": 10.0}).to_dict()
    written = [k for k in doc if k != "llmbench"]
    assert set(written) == set(GENAI_PERF_METRICS), "the point did not write every metric"
    ours = doc["llmbench"]
    assert {"goodput", "inter_chunk_gap", "dispatch", "window", "errors", "token_counts"} <= set(
        ours
    )
    keys = written + [
        "inter_chunk_gap", "errors", "token_counts", "dispatch.lag_ms",
        "dispatch.achieved_request_rate", "window.duration_s",
        *(f"token_counts.{k}" for k in ours["token_counts"]),
    ]
    missing = [k for k in keys if not _defined(k.split(".")[-1], METRICS_MD)]
    assert not missing, f"docs/metrics.md does not define {missing}"
    for key in SLO_KEYS:
        assert _defined(key, METRICS_MD), f"goodput SLO {key} undocumented"
    # a point whose answers reasoned (2 of 8 tokens) writes the reasoning keys too
    reasoned = [_record(i) for i in range(1, 6)]
    for r in reasoned:
        r.first_reasoning_ns, r.first_answer_ns = r.chunk_ns[0], r.chunk_ns[1]
        r.reasoning_tokens, r.reasoning_tokens_source = 2, "server"
    extra = set(summarize(reasoned, streaming=True).to_dict()["llmbench"]) - set(ours)
    assert len(extra) == 5, extra
    missing = [k for k in [*extra, *(k for k in reasoned[0].to_json() if "reason" in k)]
               if not _defined(k, METRICS_MD)]
    assert not missing, f"docs/metrics.md does not define {missing}"


def test_every_gpu_and_sweep_figure_is_defined_in_metrics_md() -> None:
    figures = [
        *Efficiency.model_fields,
        *PointMetrics.model_fields, "goodput_ratio",
        "cost_per_million_output_tokens", "joules_per_output_token", "isl_p99", "osl_p99",
        "achieved_request_rate", "spread_pct", "unstable", "best", "first_failure",
    ]
    assert set(Spread.model_fields) >= {"spread_pct"}
    assert set(SweepPoint.model_fields) >= {"cost_per_million_output_tokens", "isl_p99"}
    assert set(SloVerdict.model_fields) >= {"best", "first_failure"}
    missing = [f for f in figures if f not in ("value", "failed") and not _defined(f, METRICS_MD)]
    assert not missing, f"docs/metrics.md does not define {missing}"


def test_the_knee_rules_are_documented_with_the_codes_thresholds() -> None:
    for rule in (RULE_OTT, RULE_TTFT):
        assert f"`{rule}`" in METRICS_MD
    growth = f"{OTT_MIN_GROWTH * 100:g} %"
    factor = f"{TTFT_FACTOR:g} ×"
    for text in (METRICS_MD, RESULTS_MD):
        assert growth in text and factor in text


def test_results_md_explains_every_summary_csv_column() -> None:
    data = sweep_analysis([(1, 100.0, 30.0), (2, 190.0, 31.0)], max_ott=190.0)
    points = [
        p.model_copy(update={"joules_per_output_token": 0.5, "metrics": p.metrics.model_copy(
            update={"ttfa_p99_ms": 40.0, "reasoning_tokens_avg": 6.0})})
        for p in data.points
    ]
    full = data.model_copy(update={
        "points": points, "repetitions": 3, "cost": data.cost.model_copy(
            update={"price_per_hour": 4.0})
    })
    columns = [*table1_columns(full), *TABLE1_COLUMNS, "Request Rate", "Achieved Rate (req/s)",
               "OSL", *TABLE2_COLUMNS]
    text = RESULTS_MD.replace("(<currency>)", f"({data.cost.currency})")
    missing = [c for c in columns if f"`{c}`" not in text and f"{c}," not in text]
    assert not missing, f"docs/results.md does not explain {missing}"


def test_results_md_explains_every_validity_signal() -> None:
    signals = set(re.findall(r'_signal\(\s*"([a-z_]+)"', inspect.getsource(validity_signals)))
    assert len(signals) >= 7
    missing = sorted(s for s in signals if f"`{s}`" not in RESULTS_MD)
    assert not missing, f"docs/results.md does not explain {missing}"


def test_the_images_in_the_docs_exist_and_stay_small() -> None:
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", RESULTS_MD)
    assert images
    for rel in images:
        path = ROOT / "docs" / rel
        assert path.is_file(), rel
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", rel
        assert path.stat().st_size < 150_000, f"{rel}: keep docs images under 150 KB"


def test_the_readme_links_the_docs_and_the_links_resolve() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in ("docs/metrics.md", "docs/results.md"):
        assert f"]({page})" in readme
    for name, text in (("metrics.md", METRICS_MD), ("results.md", RESULTS_MD)):
        for target in re.findall(r"\]\(([^)#]+\.md)\)", text):
            assert (ROOT / "docs" / target).is_file(), f"{name} links a missing {target}"
