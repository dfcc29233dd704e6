"""Reasoning-aware metrics, checked against ``llmbench sim --reasoning-tokens N``'s own records.

The sim sends the first N tokens of every chat answer as reasoning deltas (``reasoning_content``
as vLLM's and SGLang's reasoning parsers do, or OpenAI-style ``reasoning``), then the answer as
``content``, and records when it wrote the first of each and how many reasoned. TTFT stays the
first token of either kind; the time to the first reasoning and answer token, the reasoning and
answer token counts and the answer's ITL are reported beside it, in every result surface, and
only where some answer reasoned.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rich.console import Console

from llmbench.cli import main
from llmbench.runner.report.console import results_table
from tests.sim_process import SimFactory, profile_point, sim_pool, sim_records

REASONING_KEYS = (
    "time_to_first_reasoning_token",
    "time_to_first_answer_token",
    "answer_inter_token_latency",
    "reasoning_token_count",
    "answer_token_count",
)
RECORD_KEYS = ("first_reasoning_ns", "first_answer_ns", "reasoning_tokens",
               "reasoning_tokens_source")
#: ISL 8, OSL exactly 10, two streams at a time
LOAD = ("--concurrency", "2", "--request-count", "12", "--synthetic-input-tokens-mean", "8",
        "--output-tokens-mean", "10", "--extra-inputs", "ignore_eos:true")


@pytest.fixture(scope="module")
def sims() -> Iterator[SimFactory]:
    with sim_pool() as get:
        yield get


def measured_records(point: Path) -> list[dict[str, Any]]:
    lines = (point / "profile_export_llmbench_requests.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if not r.get("warmup")]


def csv_rows(point: Path) -> dict[str, str]:
    """``Metric -> first value`` of every row of the CSV, and which table each came from."""
    text = (point / "profile_export_genai_perf.csv").read_text()
    rows = list(csv.reader(io.StringIO(text)))
    ours_at = rows.index(["llmbench Metric", "Value"])
    return {("ours:" if i > ours_at else "") + r[0]: r[1] for i, r in enumerate(rows) if r}


def test_reasoning_content_split_matches_the_sims_records(sims: SimFactory,
                                                           tmp_path: Path) -> None:
    url = sims("--ttft-ms", "20", "--itl-ms", "3", "--reasoning-tokens", "6")
    code, result, point = profile_point(tmp_path, url, *LOAD)
    assert code == 0
    recs = measured_records(point)
    assert len(recs) == 12
    server = [r for r in sim_records(url) if r["status"] == "ok"][-12:]
    assert all((s["reasoning_tokens"], s["output_tokens"]) == (6, 10) for s in server)
    # per request: the split as the server's usage counted it; TTFT is the first reasoning token
    for r in recs:
        assert (r["reasoning_tokens"], r["reasoning_tokens_source"]) == (6, "server")
        assert r["first_token_ns"] == r["first_reasoning_ns"] < r["first_answer_ns"]
    ttfr = [(r["first_reasoning_ns"] - r["sent_ns"]) / 1e6 for r in recs]
    ttfa = [(r["first_answer_ns"] - r["sent_ns"]) / 1e6 for r in recs]
    answer_itl = [(r["last_token_ns"] - r["first_answer_ns"]) / 1e6 / 3 for r in recs]
    stats = {k: result.stat(k) for k in REASONING_KEYS}
    assert all(s is not None for s in stats.values())
    assert stats["time_to_first_reasoning_token"].avg == pytest.approx(np.mean(ttfr))  # type: ignore[union-attr]
    assert stats["time_to_first_answer_token"].p50 == pytest.approx(np.median(ttfa))  # type: ignore[union-attr]
    assert stats["answer_inter_token_latency"].avg == pytest.approx(np.mean(answer_itl))  # type: ignore[union-attr]
    assert (stats["reasoning_token_count"].min, stats["reasoning_token_count"].max) == (6, 6)  # type: ignore[union-attr]
    assert (stats["answer_token_count"].min, stats["answer_token_count"].max) == (4, 4)  # type: ignore[union-attr]
    assert result.time_to_first_token is not None
    assert result.time_to_first_token.avg == pytest.approx(np.mean(ttfr))
    # against the server's own clock: the first answer token left 6 decode steps after the
    # first reasoning token, and the client saw the same
    sim_ttfa = np.median([(s["first_answer_ns"] - s["arrival_ns"]) / 1e6 for s in server])
    sim_gap = np.median([(s["first_answer_ns"] - s["first_reasoning_ns"]) / 1e6 for s in server])
    sim_answer_itl = np.median([(s["last_token_ns"] - s["first_answer_ns"]) / 1e6 / 3
                                for s in server])
    assert sim_gap >= 6 * 3
    assert np.median(ttfa) == pytest.approx(sim_ttfa, abs=10)
    assert np.median(np.subtract(ttfa, ttfr)) == pytest.approx(sim_gap, abs=5)
    assert np.median(answer_itl) == pytest.approx(sim_answer_itl, abs=2)
    # the JSON: ours, under our key; GenAI-Perf's metric keys untouched
    doc = json.loads((point / "profile_export_genai_perf.json").read_text())
    for key in REASONING_KEYS:
        assert key not in doc and doc["llmbench"][key] == stats[key].to_dict()  # type: ignore[union-attr]
    # the CSV: rows in our table only, none in GenAI-Perf's
    rows = csv_rows(point)
    assert float(rows["ours:Time To First Answer Token p99 (ms)"].replace(",", "")) == \
        pytest.approx(stats["time_to_first_answer_token"].p99, abs=0.005)  # type: ignore[union-attr]
    assert rows["ours:Reasoning Token Count avg (tokens)"] == "6.00"
    assert rows["ours:Answer Token Count avg (tokens)"] == "4.00"
    assert not any("Answer" in k or "Reasoning" in k for k in rows if not k.startswith("ours:"))
    # the console table and the HTML report
    console = Console(record=True, width=200)
    console.print(results_table(result))
    shown = console.export_text()
    assert "Time To First Answer Token (ms)" in shown and "Reasoning Token Count" in shown
    assert main(["report", str(point)]) == 0
    page = (point / "report.html").read_text()
    assert "Time To First Reasoning Token (ms)" in page and "Answer Inter Token Latency" in page


def test_openai_style_reasoning_without_usage_is_counted_by_the_tokenizer(
    sims: SimFactory, tmp_path: Path
) -> None:
    url = sims("--ttft-ms", "5", "--itl-ms", "1", "--reasoning-tokens", "4",
               "--reasoning-field", "reasoning", "--no-reasoning-usage")
    code, result, point = profile_point(tmp_path, url, *LOAD)
    assert code == 0
    recs = measured_records(point)
    assert all(r["reasoning_tokens"] == 4 and r["reasoning_tokens_source"] == "tokenizer"
               for r in recs)
    server = [r for r in sim_records(url) if r["status"] == "ok"][-12:]
    assert all(s["reasoning_tokens"] == 4 for s in server)
    ttfa = result.time_to_first_answer_token
    assert ttfa is not None and result.time_to_first_token is not None
    assert ttfa.min > result.time_to_first_token.min  # the answer starts after the reasoning
    count = result.reasoning_token_count
    answer = result.answer_token_count
    assert count is not None and (count.min, count.max) == (4, 4)
    assert answer is not None and (answer.min, answer.max) == (6, 6)


def test_reasoning_that_uses_up_the_length_has_no_answer(sims: SimFactory,
                                                         tmp_path: Path) -> None:
    url = sims("--ttft-ms", "5", "--itl-ms", "1", "--reasoning-tokens", "50")
    code, result, point = profile_point(tmp_path, url, *LOAD)
    assert code == 0
    assert all(r["first_answer_ns"] is None for r in measured_records(point))
    assert result.time_to_first_reasoning_token is not None
    assert result.time_to_first_answer_token is None  # no answer token came
    assert result.answer_inter_token_latency is None
    answer = result.answer_token_count
    assert answer is not None and answer.max == 0
    doc = json.loads((point / "profile_export_genai_perf.json").read_text())
    assert doc["llmbench"]["time_to_first_answer_token"] is None


def test_a_run_without_reasoning_has_none_of_the_keys(sims: SimFactory,
                                                      tmp_path: Path) -> None:
    url = sims("--ttft-ms", "5", "--itl-ms", "1")
    code, result, point = profile_point(tmp_path, url, *LOAD)
    assert code == 0
    assert all(getattr(result, k) is None for k in REASONING_KEYS)
    doc = json.loads((point / "profile_export_genai_perf.json").read_text())
    assert not set(REASONING_KEYS) & set(doc["llmbench"])
    assert not any(set(RECORD_KEYS) & set(r) for r in measured_records(point))
    assert not any("Answer" in k or "Reasoning" in k for k in csv_rows(point))


def test_a_sweep_reports_the_answer_s_start_and_the_reasoning_per_point(
    sims: SimFactory, tmp_path: Path
) -> None:
    url = sims("--ttft-ms", "5", "--itl-ms", "2", "--reasoning-tokens", "6")
    out = tmp_path / "run"
    load = [a for a in LOAD if a not in ("--concurrency", "2")]
    assert main(["analyze", "-u", url, "--sweep-list", "1,2", "--repetitions", "2", *load,
                 "--artifact-dir", str(out), "--no-plots"]) == 0
    doc = json.loads((out / "analyze_export_genai_perf.json").read_text())
    table = list(csv.reader(io.StringIO((out / "analyze_export_genai_perf.csv").read_text())))
    head, *body = table[: table.index([])]  # table 1 ends at the empty row
    rows = [dict(zip(head, r, strict=True)) for r in body]
    assert len(rows) == len(doc["points"]) == 2
    for row, p in zip(rows, doc["points"], strict=True):
        metrics = p["metrics"]
        # the mean over the repetitions of each one's p99 TTFA, read from its own file
        p99s = []
        for run in p["runs"]:
            point = json.loads((out / run["name"] / "profile_export_genai_perf.json").read_text())
            p99s.append(point["llmbench"]["time_to_first_answer_token"]["p99"])
            assert point["llmbench"]["reasoning_token_count"]["avg"] == 6
        assert metrics["ttfa_p99_ms"] == pytest.approx(np.mean(p99s))
        assert metrics["reasoning_tokens_avg"] == 6
        assert metrics["ttfa_p99_ms"] > metrics["ttft_p99_ms"]  # 6 decode steps later
        assert row["p99 Time To First Answer Token (ms)"] == f"{metrics['ttfa_p99_ms']:.2f}"
        assert row["Avg. Reasoning Token Count (tokens)"] == "6.00"


def test_a_point_with_some_answers_reasoning_counts_the_others_as_answer_only() -> None:
    from llmbench.runner.client.records import RequestRecord
    from llmbench.runner.point.metrics import summarize

    ms = 1_000_000

    def rec(i: int, reasoning: int) -> RequestRecord:
        chunks = [(20 + 2 * k) * ms for k in range(10)]  # TTFT 20 ms, 10 tokens, 2 ms apart
        r = RequestRecord(index=i, sent_ns=0, first_token_ns=chunks[0], last_token_ns=chunks[-1],
                          chunk_ns=chunks, output_tokens=10, output_tokens_source="server")
        if reasoning:
            r.first_reasoning_ns, r.first_answer_ns = chunks[0], chunks[reasoning]
            r.reasoning_tokens, r.reasoning_tokens_source = reasoning, "server"
        return r

    result = summarize([rec(0, 4), rec(1, 0)], streaming=True)
    ttfr, ttfa = result.time_to_first_reasoning_token, result.time_to_first_answer_token
    itl, count = result.answer_inter_token_latency, result.reasoning_token_count
    answer = result.answer_token_count
    assert ttfr is not None and (ttfr.min, ttfr.max) == (20, 20)  # the one that reasoned
    assert ttfa is not None and (ttfa.min, ttfa.max) == (20, 28)  # the other: its TTFT
    assert itl is not None and (itl.min, itl.max) == (2, 2)  # (38 - 28) / 5 and its ITL
    assert count is not None and (count.min, count.max) == (0, 4)
    assert answer is not None and (answer.min, answer.max) == (6, 10)
    plain = summarize([rec(0, 0)], streaming=True)
    assert "time_to_first_answer_token" not in plain.to_dict()["llmbench"]
    unstreamed = summarize([rec(0, 4)], streaming=False)
    assert unstreamed.time_to_first_answer_token is None
    assert "time_to_first_answer_token" not in unstreamed.to_dict()["llmbench"]
    assert unstreamed.reasoning_token_count is not None


def test_shard_records_carry_the_reasoning_split_to_the_leader() -> None:
    from llmbench.runner.client.records import RequestRecord
    from llmbench.runner.load.shards import pack_records, shift_records, unpack_records

    rec = RequestRecord(index=3, sent_ns=1_000, first_token_ns=2_000, last_token_ns=9_000,
                        chunk_ns=[2_000, 5_000, 9_000], output_tokens=3,
                        output_tokens_source="server", first_reasoning_ns=2_000,
                        first_answer_ns=5_000, reasoning_tokens=1,
                        reasoning_tokens_source="server")
    text, trimmed = pack_records([rec])
    (back,) = unpack_records(text)
    assert not trimmed and back.to_json() == rec.to_json()
    shift_records([back], 500)  # onto the leader's clock: every stamp moves
    assert (back.first_reasoning_ns, back.first_answer_ns) == (2_500, 5_500)
