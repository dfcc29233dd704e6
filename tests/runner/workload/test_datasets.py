"""Workload features of GenAI-Perf: shared-prefix prompts and local dataset files.

Dataset shapes: GenAI-Perf's JSONL rows (with the Mooncake trace fields) and ShareGPT
conversations, as JSONL or one JSON array; the files shipped in ``examples/datasets`` are read
as they are. Every bad row is an error naming the file and its line.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from workload_factory import body, cfg

from llmbench.runner.workload.datasets import (
    HASH_BLOCK_TOKENS,
    read_input_file,
    read_input_rows,
    trace_schedule_ns,
)
from llmbench.runner.workload.requests import PreparedRequest, build_requests
from llmbench.tokenizer import default_tokenizer

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "datasets"


def content(r: PreparedRequest) -> str:
    msgs = json.loads(r.body)["messages"]
    assert len(msgs) == 1
    text = msgs[0]["content"]
    assert isinstance(text, str)
    return text


# -- shared-prefix prompts -------------------------------------------------------------------


def test_prefix_prompts_exact_and_shared() -> None:
    tok = default_tokenizer()
    c = cfg(synthetic_input_tokens_mean=30, synthetic_input_tokens_stddev=6,
            num_prefix_prompts=3, prefix_prompt_length=25, random_seed=7)
    reqs = build_requests(c, tok, 60)
    texts = [content(r) for r in reqs]
    suffix_lengths = [r.input_tokens - 25 for r in reqs]
    assert len(set(suffix_lengths)) > 1  # the stddev spreads the synthetic part only
    for r, text in zip(reqs, texts, strict=True):
        assert tok.count(text) == r.input_tokens  # exact, prefix included
    # Exactly three distinct prefixes of exactly 25 tokens, each the start of its prompts.
    ids = [tok.encode(t) for t in texts]
    heads = {tuple(i[:25]) for i in ids}
    assert len(heads) == 3
    for head in heads:
        prefix = tok.decode(list(head))
        assert tok.count(prefix) == 25
        users = [t for t in texts if t.startswith(prefix)]
        assert len(users) > 1
        assert len({t[len(prefix):] for t in users}) == len(users)  # suffixes differ
    # Prompt i is the same whatever the number of prompts (seeded per index).
    assert [content(r) for r in build_requests(c, tok, 10)] == texts[:10]


def test_prefix_prompts_other_seed_other_pool() -> None:
    tok = default_tokenizer()
    a = build_requests(cfg(num_prefix_prompts=1, prefix_prompt_length=10), tok, 2)
    b = build_requests(cfg(num_prefix_prompts=1, prefix_prompt_length=10, random_seed=1), tok, 2)
    assert tok.encode(content(a[0]))[:10] == tok.encode(content(a[1]))[:10]
    assert tok.encode(content(a[0]))[:10] != tok.encode(content(b[0]))[:10]


@pytest.mark.parametrize(
    ("kw", "flag"),
    [
        ({"num_prefix_prompts": -1}, "--num-prefix-prompts"),
        ({"num_prefix_prompts": 2, "prefix_prompt_length": 0}, "--prefix-prompt-length"),
        ({"num_prefix_prompts": 2, "input_file": "x.jsonl"}, "--num-prefix-prompts"),
    ],
)
def test_prefix_config_errors_name_the_flag(kw: dict[str, Any], flag: str) -> None:
    with pytest.raises(ValueError, match=flag):
        build_requests(cfg(**kw), default_tokenizer(), 1)


# -- the example files -----------------------------------------------------------------------


def test_example_genai_perf_jsonl() -> None:
    tok = default_tokenizer()
    f = EXAMPLES / "genai-perf-prompts.jsonl"
    reqs = build_requests(cfg(input_file=f, output_tokens_mean=50), tok, 100)
    rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    assert len(reqs) == len(rows)
    for r, row in zip(reqs, rows, strict=True):
        body = json.loads(r.body)
        if "messages" in row:
            assert body["messages"] == row["messages"]
        else:
            assert body["messages"] == [
                {"role": "user", "content": row.get("text", row.get("text_input"))}
            ]
        assert body["max_tokens"] == row.get("output_length", row.get("max_tokens", 50))


def test_example_sharegpt_json_array() -> None:
    tok = default_tokenizer()
    f = EXAMPLES / "sharegpt-conversations.json"
    convs = json.loads(f.read_text())
    reqs = build_requests(cfg(input_file=f), tok, 100)
    assert len(reqs) == len(convs)
    for r, conv in zip(reqs, convs, strict=True):
        turns = [(t.get("from", t.get("role")), t.get("value", t.get("content")))
                 for t in conv["conversations"]]
        k = next(i for i, (who, _) in enumerate(turns) if who in ("human", "user"))
        assert content(r) == turns[k][1]  # the first human turn is the prompt
        assert r.input_tokens == tok.count(turns[k][1])
        assert r.requested_output_tokens == tok.count(turns[k + 1][1])  # the reply's length
    # --output-tokens-mean wins over the reply's length; a row's own output_length over both.
    assert {r.requested_output_tokens for r in build_requests(
        cfg(input_file=f, output_tokens_mean=9), tok, 100)} == {9}


def test_sharegpt_jsonl_and_skipped_conversations(tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    rows = [
        {"conversations": [{"from": "gpt", "value": "only an answer"}]},
        {"conversations": []},
        {"conversations": [{"from": "human", "value": "Hi"}], "output_length": 5},
        {"conversations": [{"from": "human", "value": "Yo"}, {"from": "human", "value": "?"}]},
    ]
    f.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    reqs = build_requests(cfg(input_file=f), default_tokenizer(), 100)
    assert [content(r) for r in reqs] == ["Hi", "Yo"]
    assert [r.requested_output_tokens for r in reqs] == [5, None]
    only_answers = tmp_path / "none.jsonl"
    only_answers.write_text(json.dumps(rows[0]) + "\n")
    with pytest.raises(ValueError, match=r"none.jsonl: no prompts \(none of its 1 conversations"):
        read_input_file(only_answers)


def test_example_mooncake_trace_blocks_are_shared() -> None:
    tok = default_tokenizer()
    f = EXAMPLES / "mooncake-trace.jsonl"
    rows = [json.loads(line) for line in f.read_text().splitlines() if line.strip()]
    reqs = build_requests(cfg(input_file=f), tok, 100)
    assert [r.requested_output_tokens for r in reqs] == [r["output_length"] for r in rows]
    ids = [tok.encode(content(r)) for r in reqs]
    for r, row, toks in zip(reqs, rows, ids, strict=True):
        if "text" in row:
            assert content(r) == row["text"]
            continue
        assert len(toks) == r.input_tokens == row["input_length"]  # exact
    block = {}  # hash id -> its tokens, the same in every row that names it
    for row, toks in zip(rows, ids, strict=True):
        for k, h in enumerate(row.get("hash_ids", [])):
            part = toks[k * HASH_BLOCK_TOKENS:(k + 1) * HASH_BLOCK_TOKENS]
            if h in block:
                n = min(len(part), len(block[h]))
                assert part[:n] == block[h][:n], h
            else:
                block[h] = part
    assert ids[0][:HASH_BLOCK_TOKENS] == ids[1][:HASH_BLOCK_TOKENS] == ids[3][:HASH_BLOCK_TOKENS]
    assert ids[0][HASH_BLOCK_TOKENS:] != ids[1][HASH_BLOCK_TOKENS:]
    assert [r.timestamp_ms for r in read_input_rows(f)] == [r["timestamp"] for r in rows]


# -- bad rows: the file and the line ---------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "why"),
    [
        ('[\n  {"text": "a"},\n  {"conversations": 5}\n]', 3, "'conversations' must be a list"),
        ('[\n  {"text": "a"},\n\n  [1]\n]', 4, "expected a JSON object"),
        ('[\n  {"text": "a"}\n  {"text": "b"}\n]', 3, "expected ',' or ']'"),
        ('[\n  {"text": "a"},\n  {"text": }\n]', 3, "not valid JSON"),
        ('[{"text": "a"}] x', 1, "after the closing"),
        ('{"conversations": [{"from": "human"}]}', 1, "needs a string 'value'"),
        ('{"conversations": [{"value": "x"}]}', 1, "needs a string 'from'"),
        ('{"conversations": ["x"]}', 1, "conversations[0] must be an object"),
        ('{"text": "a"}\n{"text": "a", "text_input": "b"}', 2, "give only one of"),
        ('{"input_length": 600, "hash_ids": [1]}', 1, "does not fit 1 'hash_ids' blocks"),
        ('{"input_length": 10, "hash_ids": []}', 1, "'hash_ids' must be a non-empty list"),
        ('{"input_length": 10, "hash_ids": [-1]}', 1, "'hash_ids' must be a non-empty list"),
        ('{"input_length": 0}', 1, "'input_length' must be a positive integer"),
        ('{"text": "a", "timestamp": -5}', 1, "'timestamp' must be a number"),
        ('{"text": "a", "timestamp": "0"}', 1, "'timestamp' must be a number"),
        ('\n\n{"text": "a", "session_id": "s1"}', 3, "multi-turn sessions"),
        ('{"output_length": 5}', 1, "needs 'text'"),
    ],
)
def test_bad_rows_name_file_and_line(tmp_path: Path, text: str, line: int, why: str) -> None:
    f = tmp_path / "bad.json"
    f.write_text(text + "\n")
    with pytest.raises(ValueError) as info:
        build_requests(cfg(input_file=f), default_tokenizer(), 10)
    msg = str(info.value)
    assert f"--input-file {f} line {line}:" in msg
    assert why in msg


def test_empty_json_array(tmp_path: Path) -> None:
    f = tmp_path / "e.json"
    f.write_text(" [ ]\n")
    with pytest.raises(ValueError, match="no prompts"):
        read_input_file(f)


def test_trace_schedule_offsets_and_errors(tmp_path: Path) -> None:
    assert trace_schedule_ns(EXAMPLES / "mooncake-trace.jsonl") == [
        0, 150_000_000, 400_000_000, 420_000_000, 1_000_000_000
    ]
    f = tmp_path / "t.jsonl"
    f.write_text('{"timestamp": 5.5, "text": "a"}\n{"timestamp": 6, "text": "b"}\n')
    assert trace_schedule_ns(f) == [0, 500_000]
    f.write_text('{"timestamp": 5, "text": "a"}\n\n{"text": "b"}\n')
    with pytest.raises(ValueError, match=r"t.jsonl line 3: --fixed-schedule needs a 'timestamp'"):
        trace_schedule_ns(f)
    f.write_text('{"timestamp": 5, "text": "a"}\n{"timestamp": 4, "text": "b"}\n')
    with pytest.raises(ValueError, match=r"t.jsonl line 2: 'timestamp' 4 is earlier"):
        trace_schedule_ns(f)


# -- --input-file ----------------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[Any]) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def test_input_file_chat(tmp_path: Path) -> None:
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]
    f = write_jsonl(tmp_path / "in.jsonl", [
        {"text": "Hello world"}, "", {"prompt": "Second prompt", "output_length": 7},
        {"messages": msgs, "max_tokens": 3},
    ])
    tok = default_tokenizer()
    reqs = build_requests(cfg(input_file=f, output_tokens_mean=50, streaming=True), tok, 100)
    assert len(reqs) == 3  # one per row; the load generator cycles them
    assert body(reqs[0])["messages"] == [{"role": "user", "content": "Hello world"}]
    assert reqs[0].input_tokens == tok.count("Hello world")
    assert [r.requested_output_tokens for r in reqs] == [50, 7, 3]
    assert body(reqs[2])["messages"] == msgs
    assert reqs[2].prompt == msgs
    assert reqs[2].input_tokens == tok.count("Be brief.\nHi there")
    assert len(build_requests(cfg(input_file=f), tok, 2)) == 2


def test_input_file_completions(tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "in.jsonl", [{"text_input": "abc"}])
    r = build_requests(cfg(input_file=str(f), endpoint_type="completions"), default_tokenizer(), 5)
    assert body(r[0]) == {"model": "m", "prompt": "abc", "stream": False}


@pytest.mark.parametrize(
    ("rows", "line", "why"),
    [
        ([{"text": "a"}, "", "{not json"], 3, "not valid JSON"),
        ([{"text": "a"}, ["x"]], 2, "expected a JSON object"),
        ([{"txt": "a"}], 1, "needs 'text'"),
        ([{"text": ""}], 1, "non-empty string"),
        ([{"text": 5}], 1, "non-empty string"),
        ([{"text": "a", "output_length": 0}], 1, "positive integer"),
        ([{"text": "a", "max_tokens": "5"}], 1, "positive integer"),
        ([{"text": "a", "max_tokens": True}], 1, "positive integer"),
        ([{"messages": []}], 1, "non-empty list"),
        ([{"messages": [{"content": "x"}]}], 1, "'role'"),
        ([{"messages": [{"role": "user"}]}], 1, "'content'"),
    ],
)
def test_input_file_errors_name_file_and_line(
    tmp_path: Path, rows: list[Any], line: int, why: str
) -> None:
    f = write_jsonl(tmp_path / "bad.jsonl", rows)
    with pytest.raises(ValueError) as info:
        build_requests(cfg(input_file=f), default_tokenizer(), 10)
    msg = str(info.value)
    assert f"--input-file {f} line {line}:" in msg
    assert why in msg


def test_input_file_messages_need_chat(tmp_path: Path) -> None:
    f = write_jsonl(tmp_path / "m.jsonl", [{"messages": [{"role": "user", "content": "x"}]}])
    with pytest.raises(ValueError, match="line 1: 'messages' rows need --endpoint-type chat"):
        read_input_file(f, "completions")


def test_input_file_missing_or_empty(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--input-file .*nope.jsonl"):
        read_input_file(tmp_path / "nope.jsonl")
    (tmp_path / "e.jsonl").write_text("\n\n")
    with pytest.raises(ValueError, match="no prompts"):
        read_input_file(tmp_path / "e.jsonl")
    (tmp_path / "b.jsonl").write_bytes(b"\xff\xfe\n")
    with pytest.raises(ValueError, match="not UTF-8"):
        read_input_file(tmp_path / "b.jsonl")
