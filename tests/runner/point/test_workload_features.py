"""GenAI-Perf's workload features end to end against ``llmbench sim`` over loopback HTTP.

The sim's per-request records (``/sim/records``: prompt tokens as the sim counts them,
arrival and last-token times on the same monotonic clock as ours) and its ``/tokenize`` are
the ground truth.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmbench.runner.artifacts.read import load_records
from llmbench.runner.point.stability import agree
from llmbench.runner.report.console import notes
from tests.sim_process import SimFactory, profile_point, sim_pool, sim_records

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "datasets"


@pytest.fixture(scope="module")
def sim() -> Iterator[SimFactory]:
    with sim_pool() as get:
        yield get


run = profile_point




def sent_prompts(point: Path) -> list[str]:
    doc = json.loads((point / "inputs.json").read_text())
    return [e["payload"][0]["messages"][0]["content"] for e in doc["data"]]


def shared_head(a: str, b: str) -> str:
    """The words two prompts share at the start (whole words only)."""
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n].rsplit(" ", 1)[0] if n < min(len(a), len(b)) else a[:n]


def test_prefix_prompts_have_exact_tokens_as_the_sim_counts_them(
    sim: SimFactory, tmp_path: Path
) -> None:
    url = sim("--ttft-ms", "1", "--itl-ms", "0")
    httpx.post(url + "/sim/reset")
    code, s, point = run(
        tmp_path, url, "--concurrency", "4", "--request-count", "40",
        "--synthetic-input-tokens-mean", "24", "--num-prefix-prompts", "3",
        "--prefix-prompt-length", "40", "--num-dataset-entries", "20",
        "--output-tokens-mean", "4", "--extra-inputs", "ignore_eos:true",
    )
    assert code == 0
    recs = sim_records(url)
    assert len(recs) == 40
    assert {r["prompt_tokens"] for r in recs} == {64}  # prefix + synthetic, exactly
    assert s.input_sequence_length is not None and s.input_sequence_length.min == 64
    prompts = sent_prompts(point)
    assert len(prompts) == 20
    # The pool, recovered from what was sent: three prefixes, each 40 tokens as the sim
    # tokenizes them, and each the first 40 of its prompts' tokens.
    heads = {max((shared_head(a, b) for b in prompts if b != a), key=len) for a in prompts}
    prefixes = {h for h in heads if not any(o != h and h.startswith(o) for o in heads)}
    assert len(prefixes) == 3
    for prefix in prefixes:
        got = httpx.post(url + "/tokenize", json={"model": "llmbench-sim", "prompt": prefix})
        assert got.json()["count"] == 40
        users = [p for p in prompts if p.startswith(prefix)]
        assert len(users) >= 2
        for p in users:
            toks = httpx.post(url + "/tokenize", json={"model": "llmbench-sim", "prompt": p})
            assert toks.json()["tokens"][:40] == got.json()["tokens"]
    assert sum(1 for p in prompts for pre in prefixes if p.startswith(pre)) == 20


def test_sharegpt_file_sends_first_human_turns_with_reply_lengths(
    sim: SimFactory, tmp_path: Path
) -> None:
    url = sim("--ttft-ms", "1", "--itl-ms", "0")
    httpx.post(url + "/sim/reset")
    f = EXAMPLES / "sharegpt-conversations.json"
    code, s, point = run(tmp_path, url, "--concurrency", "1", "--request-count", "3",
                         "--input-file", str(f), "--extra-inputs", "ignore_eos:true")
    assert code == 0
    tokenize = url + "/tokenize"
    expected = []
    for conv in json.loads(f.read_text()):
        turns = [(t.get("from", t.get("role")), t.get("value", t.get("content")))
                 for t in conv["conversations"]]
        k = next(i for i, (who, _) in enumerate(turns) if who in ("human", "user"))
        count = [httpx.post(tokenize, json={"model": "llmbench-sim", "prompt": turns[j][1]})
                 .json()["count"] for j in (k, k + 1)]
        expected.append((turns[k][1], count[0], count[1]))
    assert sent_prompts(point) == [e[0] for e in expected]
    recs = sim_records(url)
    assert [(r["prompt_tokens"], r["max_tokens"], r["output_tokens"]) for r in recs] == [
        (e[1], e[2], e[2]) for e in expected
    ]
    assert s.request_count.avg == 3


def test_stability_windows_are_reported_against_the_sim(
    sim: SimFactory, tmp_path: Path
) -> None:
    url = sim("--ttft-ms", "5", "--itl-ms", "1")
    httpx.post(url + "/sim/reset")
    code, s, point = run(
        tmp_path, url, "--concurrency", "2", "--measurement-interval", "200",
        "--stability-percentage", "60", "--warmup-request-count", "2",
        "--synthetic-input-tokens-mean", "16", "--output-tokens-mean", "20",
        "--extra-inputs", "ignore_eos:true",
    )
    assert code == 0
    st = s.stability
    assert st is not None
    assert st.measurement_interval_ms == 200 and st.stability_percentage == 60
    assert 3 <= len(st.windows) <= st.max_windows == 10
    assert st.reported_windows == 3
    for a, b in zip(st.windows, st.windows[1:], strict=False):
        assert b.start_ns == a.end_ns  # back to back
    for w in st.windows:
        assert w.end_ns - w.start_ns == 200_000_000
        assert w.request_throughput == pytest.approx(w.completed_requests / 0.2)
    figures = [(w.request_throughput, w.avg_request_latency_ms) for w in st.windows]
    assert st.stable == agree(figures, 60)
    if len(st.windows) < 10:  # the run ended because the last three agreed
        assert st.stable
    # Each window against the sim: the sim's span of a request lies inside ours, so the sim
    # sees at least the requests we count in a window, and at most one more per slot at
    # each edge.
    truth = sim_records(url)
    for w in st.windows:
        ours = w.completed_requests
        theirs = sum(1 for r in truth if r["status"] == "ok" and w.start_ns <= r["arrival_ns"]
                     and r["last_token_ns"] <= w.end_ns)
        assert ours <= theirs <= ours + 2 * 2
    # The point's statistics are those of the last three windows' requests, no others.
    last = st.windows[-3:]
    records = load_records(point)
    measured = [r for r in records if not r.warmup]
    assert s.request_count.avg == len(measured) >= sum(w.completed_requests for w in last)
    for r in measured:
        assert r.ok and r.last_token_ns is not None
        assert last[0].start_ns <= r.sent_ns and r.last_token_ns <= last[-1].end_ns
    theirs = sum(1 for r in truth if r["status"] == "ok" and last[0].start_ns <= r["arrival_ns"]
                 and r["last_token_ns"] <= last[-1].end_ns)
    assert len(measured) <= theirs <= len(measured) + 2 * 2
    assert s.errors.total == 0  # the requests cut off at the end are not errors
    assert s.window.warmup_requests == len(records) - len(measured)
    (line,) = [line for line in notes(s) if line.startswith("stability: ")]
    verdict = "stable" if st.stable else "[yellow]not stable[/yellow]"
    assert line.startswith(f"stability: {verdict} after {len(st.windows)} windows of 200 ms")
    assert line.endswith("statistics from the last 3")


def test_default_stays_request_count_mode(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "1", "--itl-ms", "0")
    code, s, _ = run(tmp_path, url, "--concurrency", "2", "--request-count", "6",
                     "--synthetic-input-tokens-mean", "8", "--output-tokens-mean", "2")
    assert code == 0
    assert s.stability is None and s.request_count.avg == 6


def test_fixed_schedule_sends_each_row_at_its_offset(sim: SimFactory, tmp_path: Path) -> None:
    url = sim("--ttft-ms", "2", "--itl-ms", "1")
    httpx.post(url + "/sim/reset")
    stamps = [1000, 1000, 1030, 1100, 1105, 1250, 1400]  # ms; the first row goes at once
    rows: list[dict[str, Any]] = [
        {"timestamp": t, "input_length": 16 + k, "output_length": 3}
        for k, t in enumerate(stamps)
    ]
    rows[2] = {"timestamp": stamps[2], "text": "a row with its own text", "output_length": 2}
    trace = tmp_path / "trace.jsonl"
    trace.write_text("".join(json.dumps(r) + "\n" for r in rows))
    code, s, point = run(tmp_path, url, "--input-file", str(trace), "--fixed-schedule",
                         "--extra-inputs", "ignore_eos:true")
    assert code == 0
    assert point.name == "llmbench-sim-openai-chat-fixed_schedule"
    assert s.request_count.avg == len(rows) and s.errors.total == 0
    records = sorted(load_records(point), key=lambda r: r.index)
    assert [r.index for r in records] == list(range(len(rows)))
    offsets = [(t - stamps[0]) * 1_000_000 for t in stamps]
    start = records[0].scheduled_ns
    assert start is not None
    lags = []
    for r, off in zip(records, offsets, strict=True):
        assert r.scheduled_ns == start + off  # the schedule is the trace's, exactly
        lags.append((r.sent_ns - r.scheduled_ns) / 1e6)
    # How late each send was is measured and reported, not asserted: on a shared machine it is
    # the scheduler's to decide (the dispatch lag line says how close the replay came).
    assert s.dispatch is not None and s.dispatch.lag_ms.max == pytest.approx(max(lags), abs=1e-3)
    # The sim (same monotonic clock) got each row in the trace's order, each no earlier than
    # our send stamp, with the trace's prompt lengths. (Its arrival stamps also carry its own
    # event loop's delay on a shared machine, so the 2 ms bound is checked on our stamps.)
    truth = sim_records(url)
    assert len(truth) == len(rows)
    arrivals = sorted(r["arrival_ns"] for r in truth)
    for got, r in zip(arrivals, records, strict=True):
        assert got >= r.sent_ns
    text_tokens = httpx.post(url + "/tokenize", json={
        "model": "llmbench-sim", "prompt": rows[2]["text"]}).json()["count"]
    in_order = [r["prompt_tokens"] for r in sorted(truth, key=lambda r: r["arrival_ns"])]
    assert in_order == [r.get("input_length", text_tokens) for r in rows]
    # GenAI-Perf's and perf_analyzer's names for a fixed-schedule run, and the console's.
    doc = json.loads((point / "profile_export_genai_perf.json").read_text())
    assert doc["input_config"]["perf_analyzer"]["stimulus"] == {"fixed_schedule": None}
    export = json.loads((point / "profile_export.json").read_text())
    assert export["experiments"][0]["experiment"] == {"mode": "request_rate", "value": 0.0}
    lines = notes(s)
    assert any(line.startswith("fixed schedule: 7 trace rows at their timestamps")
               for line in lines)
    assert not any("None" in line for line in lines)


def test_windows_shorter_than_a_request_fail_and_say_why(
    sim: SimFactory, tmp_path: Path
) -> None:
    url = sim("--ttft-ms", "5", "--itl-ms", "1")
    code, s, _ = run(tmp_path, url, "--concurrency", "1", "-p", "20",
                     "--synthetic-input-tokens-mean", "8", "--output-tokens-mean", "60",
                     "--extra-inputs", "ignore_eos:true")
    assert code == 1
    st = s.stability
    assert st is not None and not st.stable and len(st.windows) == st.max_windows
    assert all(w.completed_requests == 0 for w in st.windows)
    assert s.stop_reason is not None and "raise --measurement-interval" in s.stop_reason
