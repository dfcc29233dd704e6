"""Multi-turn sessions end to end against ``llmbench sim`` over loopback HTTP.

The sim's per-request records (``/sim/records``: prompt tokens as the sim counts them over
every message, arrival and last-token times on our monotonic clock) are the ground truth;
what each turn sent is read back from ``profile_export.json`` (perf_analyzer's format, the
exact bodies), the turns' identities from our per-request records.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from llmbench.runner.artifacts.read import load_records
from llmbench.runner.client.records import RequestRecord
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.sessions import session_plan
from llmbench.runner.report.console import notes
from tests.sim_process import profile_point, running_sim, sim_records

ISL_MEAN, OSL = 24, 4


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with running_sim(["--ttft-ms", "3", "--itl-ms", "1"]) as url:
        yield url


run = profile_point


truth = sim_records


def sent(point: Path) -> list[dict[str, Any]]:
    """perf_analyzer's requests of the run: the body each turn sent and what came back."""
    doc = json.loads((point / "profile_export.json").read_text())
    return list(doc["experiments"][0]["requests"])


def reply_text(request: dict[str, Any]) -> str:
    text = []
    for out in request["response_outputs"]:
        raw = out["response"].removeprefix("data:").strip()
        for choice in json.loads(raw).get("choices") or ():
            text.append((choice.get("delta") or {}).get("content") or "")
    return "".join(text)


def by_session(records: list[RequestRecord]) -> dict[int, list[RequestRecord]]:
    out: dict[int, list[RequestRecord]] = defaultdict(list)
    for r in sorted(records, key=lambda r: (r.session_id or 0, r.turn or 0)):
        assert r.session_id is not None
        out[r.session_id].append(r)
    return dict(out)


FLAGS = (
    "--num-sessions", "5", "--session-concurrency", "2",
    "--session-turns-mean", "3", "--session-turns-stddev", "1",
    "--session-turn-delay-mean", "40", "--session-turn-delay-stddev", "15",
    "--synthetic-input-tokens-mean", str(ISL_MEAN), "--synthetic-input-tokens-stddev", "6",
    "--output-tokens-mean", str(OSL), "--extra-inputs", "ignore_eos:true",
    "--random-seed", "16",
)


def test_sessions_keep_history_order_delay_and_concurrency(
    sim_url: str, tmp_path: Path
) -> None:
    httpx.post(sim_url + "/sim/reset")
    code, s, point = run(tmp_path, sim_url, *FLAGS)
    assert code == 0
    plan = session_plan(
        LoadConfig(
            num_sessions=5, session_turns_mean=3, session_turns_stddev=1,
            session_turn_delay_mean_ms=40, session_turn_delay_stddev_ms=15, seed=16,
        )
    )
    assert len(set(plan.turns)) > 1  # the turns vary, as asked
    records = load_records(point)
    sessions = by_session(records)
    # Per-turn records: every turn of every session, once, with its session and turn index.
    assert sorted(sessions) == list(range(5))
    for sid, turns in sessions.items():
        assert [r.turn for r in turns] == list(range(plan.turns[sid]))
        assert [r.turn_delay_ms for r in turns] == [*map(float, plan.delays_ms[sid]), None]
        assert all(r.ok and not r.warmup for r in turns)
    assert s.request_count.avg == len(records) == plan.total
    assert s.errors.total == 0

    # The sim's records, each matched to its turn by its prompt tokens (unique in this run:
    # the seeded prompt lengths add up differently in every session).
    server = truth(sim_url)
    assert len(server) == plan.total
    tokens = [t["prompt_tokens"] for t in server]
    assert len(set(tokens)) == len(tokens)
    at = {t["prompt_tokens"]: t for t in server}
    for rec in records:
        assert rec.input_tokens in at  # the server's usage, as the sim counted it
        assert rec.input_tokens_client == rec.input_tokens  # our count of the whole history

    bodies = {(int(q["request_inputs"]["session_id"]), i): q for i, q in enumerate(sent(point))}
    assert len(bodies) == plan.total
    requests = {
        sid: sorted(
            (q for (k, _), q in bodies.items() if k == sid), key=lambda q: q["timestamp"]
        )
        for sid in sessions
    }
    for sid, turns in sessions.items():
        mine = requests[sid]
        prev_messages: list[dict[str, Any]] = []
        for t, rec in enumerate(turns):
            msgs = json.loads(mine[t]["request_inputs"]["payload"])["messages"]
            # The whole history: every earlier user turn and the reply it really got.
            assert len(msgs) == 2 * t + 1
            assert [m["role"] for m in msgs] == ["user", "assistant"] * t + ["user"]
            assert msgs[: 2 * t - 1] == prev_messages[: 2 * t - 1]
            if t:
                assert msgs[2 * t - 1] == {
                    "role": "assistant", "content": reply_text(mine[t - 1])
                }
                assert msgs[2 * t - 1]["content"]  # a real reply, not an empty one
            prev_messages = msgs
            # Server side: the prompt held the previous prompt, its answer and the new turn.
            here = at[rec.input_tokens or 0]
            if t:
                before = at[turns[t - 1].input_tokens or 0]
                assert here["prompt_tokens"] > before["prompt_tokens"] + before["output_tokens"]
                # In order, and each turn at least its delay after the previous answer ended
                # (as the sim wrote it, and as we received it).
                delay_ns = int((turns[t - 1].turn_delay_ms or 0) * 1e6)
                assert here["arrival_ns"] >= before["last_token_ns"] + delay_ns
                prev = turns[t - 1]
                assert prev.last_token_ns is not None
                assert rec.sent_ns >= prev.last_token_ns + delay_ns

    # Session concurrency: never more than 2 sessions in flight at the server (a session from
    # its first turn's arrival to its last turn's last token), and 2 were.
    spans = []
    for turns in sessions.values():
        first, last = at[turns[0].input_tokens or 0], at[turns[-1].input_tokens or 0]
        spans.append((first["arrival_ns"], last["last_token_ns"]))
    events = sorted([(a, 1) for a, _ in spans] + [(b, -1) for _, b in spans])
    flight = peak = 0
    for _, step in events:
        flight += step
        peak = max(peak, flight)
    assert peak == 2

    # GenAI-Perf's names for the run: its folder, stimulus and perf_analyzer's experiment.
    assert point.name.endswith("-session_concurrency2")
    doc = json.loads((point / "profile_export_genai_perf.json").read_text())
    config = doc["input_config"]
    assert config["perf_analyzer"]["stimulus"] == {"session_concurrency": 2}
    assert config["input"]["sessions"] == {
        "num": 5, "turns": {"mean": 3, "stddev": 1}, "turn_delay": {
            "mean": 40, "ratio": 1.0, "stddev": 15,
        },
    }
    export = json.loads((point / "profile_export.json").read_text())
    assert export["experiments"][0]["experiment"] == {"mode": "request_rate", "value": 0.0}
    assert f"sessions: 5 ({plan.total} turns), 2 in flight" in "\n".join(notes(s))


def test_first_turns_carry_the_prefix_and_later_turns_do_not(
    sim_url: str, tmp_path: Path
) -> None:
    httpx.post(sim_url + "/sim/reset")
    code, _, point = run(
        tmp_path, sim_url, "--num-sessions", "3", "--session-turns-mean", "2",
        "--synthetic-input-tokens-mean", "8", "--output-tokens-mean", "2",
        "--extra-inputs", "ignore_eos:true", "--num-prefix-prompts", "1",
        "--prefix-prompt-length", "30",
    )
    assert code == 0
    server = truth(sim_url)
    # One session in flight (the default), so the turns come first, second, first, ...: the
    # 30 prefix tokens are in the first turn, and in the second only as part of the history
    # (38 + the 2-token reply + 8 new tokens); a second turn with a prefix of its own would
    # be 30 tokens longer.
    assert [t["prompt_tokens"] for t in server] == [38, 38 + 2 + 8] * 3
    turns = [json.loads(q["request_inputs"]["payload"])["messages"] for q in sent(point)]
    firsts = [m[0]["content"] for m in turns[0::2]]
    head = os.path.commonprefix(firsts)
    assert len(head) > 60 and len(set(firsts)) == 3  # one shared prefix, three prompts
    assert all(not m[-1]["content"].startswith(head) for m in turns[1::2])
