"""``llmbench sim`` over real HTTP on 127.0.0.1: response shapes, lengths, timing truth, faults.

The sim is the oracle for every runner test, so these tests pin what it promises: OpenAI/vLLM
wire shapes, exact token counts, TTFT/ITL as configured (checked against its own ground-truth
records), FIFO queueing beyond ``max_num_seqs``, vLLM metric names, and each injected fault.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import signal
import socket
import struct
import termios
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from llmbench.sim import (
    SimConfig,
    SimRecord,
    SimServer,
    output_words,
    run_sim_in_thread,
    sim_in_thread,
    spawn_sim,
)
from llmbench.sim.cli import add_arguments, run

MODEL = "llmbench-sim"
#: How late (ms) a timer may fire on a shared, loaded 2-core machine. Timing asserts check
#: "never early" strictly and "not much late" with this slack.
LATE_MS = 30


class Sim:
    """A running sim plus a client; ``records`` reads the ground truth in-process."""

    def __init__(self, **cfg: Any) -> None:
        self.url, self._stop = run_sim_in_thread(SimConfig(**cfg))
        self.server: SimServer = self._stop.server  # type: ignore[attr-defined]
        self.client = httpx.Client(base_url=self.url, timeout=10)

    @property
    def records(self) -> list[Any]:
        return self.server.records

    def close(self) -> None:
        self.client.close()
        self._stop()


@pytest.fixture(scope="module")
def fast() -> Iterator[Sim]:
    sim = Sim(ttft_ms=0, itl_ms=0)
    yield sim
    sim.close()


class ProcSim:
    """A sim in its own process, for timing tests: a sim thread would share the GIL with
    the test's client and wait up to the 5 ms switch interval for it."""

    def __init__(self, **cfg: Any) -> None:
        flags = [x for k, v in cfg.items() for x in (f"--{k.replace('_', '-')}", str(v))]
        self.url, self.proc = spawn_sim(flags)
        self.client = httpx.Client(base_url=self.url, timeout=10)

    @property
    def records(self) -> list[SimRecord]:
        return [SimRecord(**r) for r in self.client.get("/sim/records").json()["records"]]

    def close(self) -> None:
        self.client.close()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(10)


@contextlib.contextmanager
def proc_sim(**cfg: Any) -> Iterator[ProcSim]:
    sim = ProcSim(**cfg)
    try:
        yield sim
    finally:
        sim.close()


@contextlib.contextmanager
def sim_with(**cfg: Any) -> Iterator[Sim]:
    sim = Sim(**cfg)
    try:
        yield sim
    finally:
        sim.close()


def chat_body(n: int = 5, stream: bool = True, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"model": MODEL, "messages": [{"role": "user", "content": "hi there"}],
                            "max_tokens": n, "ignore_eos": True, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    body.update(extra)
    return body


def sse(client: httpx.Client, path: str, body: dict[str, Any]) -> list[str]:
    """The ``data:`` payloads of one streamed response, in order."""
    with client.stream("POST", path, json=body) as r:
        assert r.status_code == 200, r.read()
        assert r.headers["content-type"].startswith("text/event-stream")
        return [line[6:] for line in r.iter_lines() if line.startswith("data: ")]


def content_events(events: list[str]) -> list[str]:
    out = []
    for e in events[:-1]:
        obj = json.loads(e)
        if obj["choices"]:
            c = obj["choices"][0]
            text = c.get("delta", {}).get("content") if "delta" in c else c.get("text")
            if text:
                out.append(text)
    return out


# ------------------------------------------------------------------------------- shapes
def test_chat_stream_shape_matches_vllm(fast: Sim) -> None:
    events = sse(fast.client, "/v1/chat/completions", chat_body(7))
    assert events[-1] == "[DONE]"
    objs = [json.loads(e) for e in events[:-1]]
    assert all(o["object"] == "chat.completion.chunk" and o["model"] == MODEL for o in objs)
    assert len({o["id"] for o in objs}) == 1
    first = objs[0]["choices"][0]
    assert first["delta"] == {"role": "assistant", "content": ""}
    assert first["finish_reason"] is None
    content = objs[1:8]
    assert all(o["choices"][0]["delta"]["content"] for o in content)
    assert all(o["choices"][0]["finish_reason"] is None for o in content)
    assert objs[8]["choices"][0]["finish_reason"] == "length"
    assert objs[8]["choices"][0]["delta"] == {}
    usage = objs[9]
    assert usage["choices"] == []
    assert usage["usage"] == {"prompt_tokens": 2, "completion_tokens": 7, "total_tokens": 9}
    assert len(objs) == 10


def test_completions_stream_shape(fast: Sim) -> None:
    body = {"model": MODEL, "prompt": "one two three", "max_tokens": 4, "ignore_eos": True,
            "stream": True, "stream_options": {"include_usage": True}}
    events = sse(fast.client, "/v1/completions", body)
    objs = [json.loads(e) for e in events[:-1]]
    assert all(o["object"] == "text_completion" for o in objs)
    assert [bool(o["choices"][0]["text"]) for o in objs[:4]] == [True] * 4
    assert objs[4]["choices"][0]["finish_reason"] == "length"
    assert objs[5]["choices"] == []
    assert objs[5]["usage"]["completion_tokens"] == 4
    assert objs[5]["usage"]["prompt_tokens"] == 3


def test_no_usage_chunk_without_include_usage(fast: Sim) -> None:
    body = chat_body(3)
    del body["stream_options"]
    events = sse(fast.client, "/v1/chat/completions", body)
    assert all("usage" not in json.loads(e) for e in events[:-1])
    assert len(events) == 1 + 3 + 1 + 1  # role, content, finish, [DONE]


def test_non_streaming_shapes(fast: Sim) -> None:
    r = fast.client.post("/v1/chat/completions", json=chat_body(6, stream=False))
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    obj = r.json()
    assert obj["object"] == "chat.completion"
    choice = obj["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] == "length"
    assert obj["usage"] == {"prompt_tokens": 2, "completion_tokens": 6, "total_tokens": 8}
    tok = fast.server._tok
    assert tok.count(choice["message"]["content"]) == 6
    r = fast.client.post("/v1/completions", json={"model": MODEL, "prompt": "a b",
                                                   "max_tokens": 3, "ignore_eos": True})
    obj = r.json()
    assert obj["object"] == "text_completion"
    assert tok.count(obj["choices"][0]["text"]) == 3


def test_output_is_countable_by_the_tokenizer(fast: Sim) -> None:
    words = output_words(fast.server.config.tokenizer)
    tok = fast.server._tok
    assert all(tok.count(w) == 1 for w in words)
    events = sse(fast.client, "/v1/chat/completions", chat_body(300))
    texts = content_events(events)
    assert len(texts) == 300
    assert tok.count("".join(texts)) == 300


def test_models_health_tokenize_embeddings(fast: Sim) -> None:
    models = fast.client.get("/v1/models").json()
    assert models["object"] == "list"
    assert models["data"][0]["id"] == MODEL
    assert fast.client.get("/health").status_code == 200
    tok = fast.client.post("/tokenize", json={"prompt": "alpha beta gamma"}).json()
    assert tok["count"] == len(tok["tokens"]) == 3
    assert tok["max_model_len"] == 32768
    tok = fast.client.post("/tokenize", json={
        "model": MODEL, "messages": [{"role": "user", "content": "alpha beta gamma"}]}).json()
    assert tok["count"] == 3
    emb = fast.client.post("/v1/embeddings", json={"model": MODEL,
                                                   "input": ["a b", "c d e"]}).json()
    assert emb["object"] == "list"
    assert [d["index"] for d in emb["data"]] == [0, 1]
    assert len(emb["data"][0]["embedding"]) == 32
    assert emb["usage"] == {"prompt_tokens": 5, "total_tokens": 5}


def test_token_id_and_list_prompts(fast: Sim) -> None:
    def usage(prompt: Any) -> Any:
        return fast.client.post("/v1/completions", json={
            "prompt": prompt, "max_tokens": 1}).json().get("usage", {}).get("prompt_tokens")

    assert usage([5, 17, 300, 2]) == 4
    assert usage(["alpha beta"]) == 2
    assert fast.client.post("/v1/completions", json={"prompt": ["a", "b"]}).status_code == 400


def test_prompt_tokens_match_tokenize(fast: Sim) -> None:
    prompt = "The quick brown fox jumps over the lazy dog, twice: quick, quick."
    count = fast.client.post("/tokenize", json={"prompt": prompt}).json()["count"]
    body = chat_body(2, stream=False)
    body["messages"] = [{"role": "user", "content": [{"type": "text", "text": prompt}]}]
    assert fast.client.post("/v1/chat/completions", json=body).json()["usage"][
        "prompt_tokens"] == count


# ------------------------------------------------------------------------------- errors
def test_unknown_model_is_404_naming_it(fast: Sim) -> None:
    for path, body in (("/v1/chat/completions", chat_body(2)),
                       ("/v1/completions", {"prompt": "x", "max_tokens": 2}),
                       ("/v1/embeddings", {"input": "x"})):
        r = fast.client.post(path, json={**body, "model": "no-such-model"})
        assert r.status_code == 404
        err = r.json()["error"]
        assert "no-such-model" in err["message"]
        assert err["code"] == 404


def test_bad_requests(fast: Sim) -> None:
    r = fast.client.post("/v1/chat/completions", content=b"{not json",
                         headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert "JSON" in r.json()["error"]["message"]
    assert fast.client.post("/v1/chat/completions", json={"model": MODEL}).status_code == 400
    assert fast.client.post("/v1/chat/completions",
                            json=chat_body(0, stream=False)).status_code == 400
    too_long = fast.client.post("/v1/completions", json={"prompt": "x", "max_tokens": 40000})
    assert too_long.status_code == 400
    assert "maximum context length" in too_long.json()["error"]["message"]
    assert fast.client.get("/nope").status_code == 404
    assert fast.client.get("/v1/chat/completions").status_code == 405
    # The connection survives all of the above (keep-alive after errors).
    assert fast.client.get("/health").status_code == 200


def test_malformed_request_line_closes() -> None:
    with sim_with() as sim:
        with socket.create_connection(("127.0.0.1", sim.server.port), timeout=5) as s:
            s.sendall(b"garbage\r\n\r\n")
            data = b""
            while chunk := s.recv(65536):
                data += chunk
        assert data.startswith(b"HTTP/1.1 400")


def test_api_key() -> None:
    with sim_with(api_key="s3cret", ttft_ms=0, itl_ms=0) as sim:
        assert sim.client.post("/v1/chat/completions",
                               json=chat_body(2, stream=False)).status_code == 401
        r = sim.client.post("/v1/chat/completions", json=chat_body(2, stream=False),
                            headers={"Authorization": "Bearer s3cret"})
        assert r.status_code == 200
        assert sim.client.get("/health").status_code == 200


# ------------------------------------------------------------------------------- lengths
def test_exact_max_tokens_and_max_completion_tokens(fast: Sim) -> None:
    for n in (1, 2, 17):
        assert len(content_events(sse(fast.client, "/v1/chat/completions",
                                      chat_body(n)))) == n
    body = chat_body(999, stream=False)
    del body["max_tokens"]
    body["max_completion_tokens"] = 11
    assert fast.client.post("/v1/chat/completions", json=body).json()["usage"][
        "completion_tokens"] == 11


def test_natural_length_min_tokens_and_finish_reason() -> None:
    with sim_with(ttft_ms=0, itl_ms=0, natural_output_tokens=3) as sim:
        def usage(**kw: Any) -> tuple[int, str]:
            body = chat_body(stream=False)
            body.pop("ignore_eos")
            body.update(kw)
            obj = sim.client.post("/v1/chat/completions", json=body).json()
            return obj["usage"]["completion_tokens"], obj["choices"][0]["finish_reason"]

        assert usage(max_tokens=10) == (3, "stop")
        assert usage(max_tokens=10, min_tokens=6) == (6, "stop")
        assert usage(max_tokens=2) == (2, "length")
        assert usage(max_tokens=10, ignore_eos=True) == (10, "length")
    with sim_with(ttft_ms=0, itl_ms=0, seed=7) as sim:
        lengths = set()
        for _ in range(30):
            body = chat_body(8, stream=False, min_tokens=2)
            body.pop("ignore_eos")
            lengths.add(sim.client.post("/v1/chat/completions",
                                        json=body).json()["usage"]["completion_tokens"])
        assert lengths <= set(range(2, 9)) and len(lengths) > 2


def test_tokens_per_chunk() -> None:
    with sim_with(ttft_ms=0, itl_ms=0, tokens_per_chunk=4) as sim:
        tok = sim.server._tok
        texts = content_events(sse(sim.client, "/v1/chat/completions", chat_body(10)))
        assert [tok.count(t) for t in texts] == [4, 4, 2]
        assert sim.records[-1].output_tokens == 10


# ------------------------------------------------------------------------------- reasoning
def split_events(events: list[str], field: str) -> list[tuple[str, str]]:
    """``(kind, text)`` of every delta carrying text: ``reasoning`` or ``answer``."""
    out = []
    for e in events[:-1]:
        obj = json.loads(e)
        for c in obj["choices"]:
            delta = c.get("delta", {})
            assert not (delta.get(field) and delta.get("content")), delta  # never both
            if delta.get(field):
                out.append(("reasoning", delta[field]))
            elif delta.get("content"):
                out.append(("answer", delta["content"]))
    return out


@pytest.mark.parametrize("field", ["reasoning_content", "reasoning"])
def test_reasoning_deltas_then_answer(field: str) -> None:
    with sim_with(ttft_ms=0, itl_ms=1, reasoning_tokens=5, tokens_per_chunk=2,
                  reasoning_field=field) as sim:
        tok = sim.server._tok
        events = sse(sim.client, "/v1/chat/completions", chat_body(9))
        parts = split_events(events, field)
        # chunks of 2 tokens, cut at the boundary: 2+2+1 reasoning, then 2+2 answer
        assert [(k, tok.count(t)) for k, t in parts] == [
            ("reasoning", 2), ("reasoning", 2), ("reasoning", 1), ("answer", 2), ("answer", 2)]
        usage = json.loads(events[-2])["usage"]
        assert usage["completion_tokens"] == 9
        assert usage["completion_tokens_details"] == {"reasoning_tokens": 5}
        rec = sim.records[-1]
        assert (rec.output_tokens, rec.reasoning_tokens) == (9, 5)
        assert rec.first_reasoning_ns == rec.first_token_ns > 0
        # the first answer chunk is written on the 4th decode step: at least 3 ITLs later
        assert rec.first_answer_ns >= rec.first_reasoning_ns + 3 * 1_000_000
        assert rec.first_answer_ns <= rec.last_token_ns


def test_reasoning_longer_than_the_answer_budget_and_other_shapes(fast: Sim) -> None:
    with sim_with(ttft_ms=0, itl_ms=0, reasoning_tokens=8) as sim:
        # the length runs out while reasoning: no answer token, no first answer time
        parts = split_events(sse(sim.client, "/v1/chat/completions", chat_body(4)),
                             "reasoning_content")
        assert [k for k, _ in parts] == ["reasoning"] * 4
        rec = sim.records[-1]
        assert (rec.reasoning_tokens, rec.first_answer_ns) == (4, 0)
        # non-streaming: the message carries both texts, the usage the split
        obj = sim.client.post("/v1/chat/completions", json=chat_body(10, stream=False)).json()
        msg, tok = obj["choices"][0]["message"], sim.server._tok
        assert (tok.count(msg["reasoning_content"]), tok.count(msg["content"])) == (8, 2)
        assert obj["usage"]["completion_tokens_details"] == {"reasoning_tokens": 8}
        assert sim.records[-1].reasoning_tokens == 8
        # completions have no reasoning parser: plain text, nothing counted as reasoning
        body = {"model": MODEL, "prompt": "a b", "max_tokens": 3, "ignore_eos": True}
        assert "completion_tokens_details" not in sim.client.post(
            "/v1/completions", json=body).json()["usage"]
        assert sim.records[-1].reasoning_tokens == 0
    # without the option nothing changes: no reasoning keys, first answer = first token
    fast.client.post("/v1/chat/completions", json=chat_body(3))
    rec = fast.records[-1]
    assert rec.reasoning_tokens == 0 and rec.first_reasoning_ns == 0
    assert rec.first_answer_ns == rec.first_token_ns > 0
    with pytest.raises(ValueError, match="--reasoning-field must be one of"):
        SimConfig(reasoning_field="thinking").validate()
    with pytest.raises(ValueError, match="--reasoning-tokens"):
        SimConfig(reasoning_tokens=-1).validate()


# ------------------------------------------------------------------------------- timing
def test_ttft_and_itl_ground_truth() -> None:
    with proc_sim(ttft_ms=30, itl_ms=4) as sim:
        sent = []
        for _ in range(3):
            sse(sim.client, "/v1/chat/completions", chat_body(21))
            sent.append(sim.records[-1])
        for rec in sent:
            ttft_ms = (rec.first_token_ns - rec.arrival_ns) / 1e6
            itl_ms = (rec.last_token_ns - rec.first_token_ns) / 1e6 / 20
            # Timers fire 0-1 ms after their deadline (epoll has ms resolution); the
            # schedule is absolute, so ITL's mean does not drift with that lateness.
            assert 30 <= ttft_ms < 30 + LATE_MS, ttft_ms
            assert 4 <= itl_ms < 4 + LATE_MS / 20, itl_ms
            assert rec.admitted_ns == rec.arrival_ns
            assert rec.status == "ok" and rec.output_tokens == 21


def test_prefill_and_non_streaming_timing() -> None:
    with proc_sim(ttft_ms=10, itl_ms=2, prefill_ms_per_token=1) as sim:
        body = chat_body(11, stream=False)
        body["messages"][0]["content"] = " ".join(["word"] * 20)
        sim.client.post("/v1/chat/completions", json=body)
        rec = sim.records[-1]
        total_ms = (rec.last_token_ns - rec.arrival_ns) / 1e6
        assert 10 + 20 + 20 <= total_ms < 50 + LATE_MS, total_ms  # ttft + prefill + 10 steps


def test_itl_jitter_keeps_the_mean() -> None:
    with proc_sim(ttft_ms=0, itl_ms=3, itl_jitter_ms=2, seed=1) as sim:
        sse(sim.client, "/v1/chat/completions", chat_body(101))
        rec = sim.records[-1]
        itl_ms = (rec.last_token_ns - rec.first_token_ns) / 1e6 / 100
        assert 2.6 < itl_ms < 3.4 + LATE_MS / 100, itl_ms


def test_max_num_seqs_queues_fifo_and_counts_wait_in_ttft() -> None:
    with proc_sim(ttft_ms=40, itl_ms=10, max_num_seqs=2) as sim:
        async def one(client: httpx.AsyncClient, i: int) -> None:
            body = chat_body(5, stream=True)
            body["messages"][0]["content"] = f"request {i}"
            async with client.stream("POST", "/v1/chat/completions", json=body) as r:
                async for _ in r.aiter_lines():
                    pass

        async def scrape_during(client: httpx.AsyncClient) -> dict[str, float]:
            gauges: dict[str, float] = {}
            for _ in range(100):  # until all four arrived (first two run for 80 ms)
                await asyncio.sleep(0.002)
                text = (await client.get("/metrics")).text
                gauges = {s.name: s.value for f in text_string_to_metric_families(text)
                          for s in f.samples}
                if gauges["vllm:num_requests_waiting"] == 2:
                    break
            return gauges

        async def main() -> dict[str, float]:
            async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
                scrape = asyncio.ensure_future(scrape_during(client))
                await asyncio.gather(*(one(client, i) for i in range(4)))
                return await scrape

        gauges = asyncio.run(main())
        assert gauges["vllm:num_requests_running"] == 2
        assert gauges["vllm:num_requests_waiting"] == 2
        recs = sorted((r for r in sim.records if r.endpoint == "chat"),
                      key=lambda r: r.admitted_ns)
        assert len(recs) == 4
        ttfts = [(r.first_token_ns - r.arrival_ns) / 1e6 for r in recs]
        decode_ms = 40 + 4 * 10  # a running request holds its slot for ttft + 4 steps
        assert all(40 <= t < 40 + LATE_MS for t in ttfts[:2]), ttfts
        assert all(t < 40 + decode_ms + 2 * LATE_MS for t in ttfts[2:]), ttfts
        # a queued request's first token comes a whole decode after the first arrivals (counted
        # from the first arrival: on a loaded client the later requests can arrive late)
        t0 = min(r.arrival_ns for r in recs)
        waits = [(r.first_token_ns - t0) / 1e6 for r in recs[2:]]
        assert all(w >= 40 + decode_ms for w in waits), waits
        firsts = recs[:2]
        queued_by_arrival = sorted(recs[2:], key=lambda r: r.arrival_ns)
        assert queued_by_arrival == recs[2:]  # FIFO: first come, first admitted
        for queued in recs[2:]:
            # Admitted the moment a running request wrote its last token.
            assert queued.admitted_ns in {f.last_token_ns for f in firsts}
            assert queued.admitted_ns > queued.arrival_ns


# ------------------------------------------------------------------------------- metrics
def _samples(client: httpx.Client) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = client.get("/metrics").text
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_metrics_vllm_names_and_counters_move() -> None:
    with sim_with(ttft_ms=0, itl_ms=0) as sim:
        r = sim.client.get("/metrics")
        assert r.headers["content-type"].startswith("text/plain")
        before = _samples(sim.client)
        names = {name for name, _ in before}
        for required in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                         "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc",
                         "vllm:request_success_total", "vllm:prompt_tokens_total",
                         "vllm:generation_tokens_total", "vllm:time_to_first_token_seconds_count",
                         "vllm:inter_token_latency_seconds_bucket",
                         "vllm:e2e_request_latency_seconds_sum"):
            assert required in names, required
        lbl = (("engine", "0"), ("model_name", MODEL))
        for _ in range(3):
            sse(sim.client, "/v1/chat/completions", chat_body(5))
        after = _samples(sim.client)
        assert after[("vllm:generation_tokens_total", lbl)] == 15
        assert after[("vllm:prompt_tokens_total", lbl)] == 6
        ok = lbl + (("finished_reason", "length"),)
        assert after[("vllm:request_success_total", tuple(sorted(ok)))] == 3
        assert after[("vllm:time_to_first_token_seconds_count", lbl)] == 3
        assert after[("vllm:inter_token_latency_seconds_count", lbl)] == 12
        assert after[("vllm:e2e_request_latency_seconds_count", lbl)] == 3
        assert after[("vllm:num_requests_running", lbl)] == 0


# ------------------------------------------------------------------------------- faults
def test_error_injection_429_and_500() -> None:
    with sim_with(error_rate_429=1.0) as sim:
        r = sim.client.post("/v1/chat/completions", json=chat_body(3))
        assert r.status_code == 429
        assert r.json()["error"]["code"] == 429
        assert sim.records[-1].status == "error_429"
    with sim_with(error_rate_500=1.0) as sim:
        r = sim.client.post("/v1/completions", json={"prompt": "x", "max_tokens": 3})
        assert r.status_code == 500
        assert sim.records[-1].status == "error_500"
        assert sim.client.get("/health").status_code == 200


def test_disconnect_injection() -> None:
    with sim_with(ttft_ms=0, itl_ms=1, disconnect_rate=1.0) as sim:
        got: list[str] = []
        with pytest.raises(httpx.RemoteProtocolError):
            with sim.client.stream("POST", "/v1/chat/completions", json=chat_body(10)) as r:
                got.extend(r.iter_lines())
        rec = sim.records[-1]
        assert rec.status == "disconnect"
        assert 1 <= rec.output_tokens < 10
        assert not any("[DONE]" in line for line in got)
        with pytest.raises(httpx.RemoteProtocolError):
            sim.client.post("/v1/chat/completions", json=chat_body(4, stream=False))
        assert sim.server._running == 0


def test_malformed_injection() -> None:
    with sim_with(ttft_ms=0, itl_ms=0, malformed_rate=1.0) as sim:
        events = sse(sim.client, "/v1/chat/completions", chat_body(8))
        assert events[-1] == "[DONE]"
        bad = 0
        for e in events[:-1]:
            try:
                json.loads(e)
            except ValueError:
                bad += 1
        assert bad == 1
        assert sim.records[-1].status == "malformed"


def test_client_disconnect_frees_the_slot() -> None:
    with sim_with(ttft_ms=0, itl_ms=20, max_num_seqs=1) as sim:
        with socket.create_connection(("127.0.0.1", sim.server.port), timeout=5) as s:
            body = json.dumps(chat_body(50)).encode()
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
                      + str(len(body)).encode() + b"\r\n\r\n" + body)
            assert s.recv(65536).startswith(b"HTTP/1.1 200")
        r = sim.client.post("/v1/chat/completions", json=chat_body(2, stream=False))
        assert r.status_code == 200
        statuses = [rec.status for rec in sim.records]
        assert statuses == ["client_closed", "ok"]


# ------------------------------------------------------------------------------- plumbing
def test_pipelined_requests_on_one_connection(fast: Sim) -> None:
    body = json.dumps(chat_body(3, stream=False)).encode()
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: "
           + str(len(body)).encode() + b"\r\n\r\n" + body)
    with socket.create_connection(("127.0.0.1", fast.server.port), timeout=5) as s:
        s.sendall(req * 3 + b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    assert data.count(b"HTTP/1.1 200 OK") == 4
    assert data.count(b'"completion_tokens":3') == 3


def test_records_endpoint_reset_and_ring_bound() -> None:
    with sim_with(ttft_ms=0, itl_ms=0, max_records=2) as sim:
        for _ in range(3):
            sim.client.post("/v1/chat/completions", json=chat_body(2, stream=False))
        data = sim.client.get("/sim/records").json()
        assert data["clock"] == "perf_counter_ns"
        assert data["capacity"] == 2 and data["dropped"] == 1
        assert [r["request_id"] for r in data["records"]] == [1, 2]
        rec = data["records"][0]
        assert rec["arrival_ns"] <= rec["admitted_ns"] <= rec["first_token_ns"] \
            <= rec["last_token_ns"]
        since = sim.client.get("/sim/records?since=2").json()["records"]
        assert [r["request_id"] for r in since] == [2]
        assert sim.client.post("/sim/reset").status_code == 200
        assert sim.client.get("/sim/records").json()["records"] == []


def test_chat_template_tokens_and_batch_slowdown() -> None:
    with proc_sim(ttft_ms=0, itl_ms=2, itl_ms_per_seq=1, chat_template_tokens=5) as sim:
        usage = sim.client.post("/v1/chat/completions",
                                json=chat_body(2, stream=False)).json()["usage"]
        assert usage["prompt_tokens"] == 2 + 5
        tok = sim.client.post("/tokenize", json={
            "messages": [{"role": "user", "content": "hi there"}]}).json()
        assert tok["count"] == 7
        assert sim.client.post("/v1/completions", json={"prompt": "hi there", "max_tokens": 1}
                               ).json()["usage"]["prompt_tokens"] == 2

        async def one(client: httpx.AsyncClient) -> None:
            async with client.stream("POST", "/v1/chat/completions",
                                     json=chat_body(21)) as r:
                async for _ in r.aiter_lines():
                    pass

        async def many() -> None:
            async with httpx.AsyncClient(base_url=sim.url, timeout=10) as client:
                await asyncio.gather(*(one(client) for _ in range(4)))

        asyncio.run(many())
        recs = sim.records[-4:]
        # Each step costs itl + 1 ms per running sequence: up to 2 + 4 ms while all run.
        itls = [(r.last_token_ns - r.first_token_ns) / 1e6 / 20 for r in recs]
        assert all(3 <= t < 6 + LATE_MS / 20 for t in itls), itls
        assert sum(itls) / 4 > 4, itls


def test_records_can_be_off() -> None:
    with sim_with(ttft_ms=0, itl_ms=0, max_records=0) as sim:
        sim.client.post("/v1/chat/completions", json=chat_body(2, stream=False))
        data = sim.client.get("/sim/records").json()
        assert data["records"] == [] and data["dropped"] == 1


def test_runtime_config() -> None:
    with sim_with(ttft_ms=0, itl_ms=0) as sim:
        r = sim.client.post("/sim/config", json={"ttft_ms": 25})
        assert r.status_code == 200 and r.json()["ttft_ms"] == 25
        sim.client.post("/v1/chat/completions", json=chat_body(1, stream=False))
        rec = sim.records[-1]
        assert (rec.first_token_ns - rec.arrival_ns) / 1e6 >= 25
        assert sim.client.post("/sim/config", json={"port": 1}).status_code == 400
        assert sim.client.post("/sim/config", json={"ttft_ms": -1}).status_code == 400


def test_config_from_args_and_validation() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    cfg = SimConfig.from_args(parser.parse_args(
        ["--ttft-ms", "5", "--itl-ms", "1.5", "--max-num-seqs", "8", "--model", "m",
         "--error-rate-429", "0.1", "--tokens-per-chunk", "3"]))
    assert (cfg.ttft_ms, cfg.itl_ms, cfg.max_num_seqs, cfg.model) == (5, 1.5, 8, "m")
    assert (cfg.error_rate_429, cfg.tokens_per_chunk) == (0.1, 3)
    with pytest.raises(ValueError, match="--disconnect-rate"):
        SimConfig.from_args(parser.parse_args(["--disconnect-rate", "2"]))
    # run() reports bad settings as a usage error (exit 2) before binding anything.
    assert run(parser.parse_args(["--ttft-ms", "-1"])) == 2
    assert run(parser.parse_args(["--tokenizer", "/nonexistent/tok"])) == 2


def test_spawn_sim_subprocess() -> None:
    url, proc = spawn_sim(["--ttft-ms", "0", "--itl-ms", "0", "--model", "m2"])
    try:
        with httpx.Client(base_url=url, timeout=10) as client:
            assert client.get("/v1/models").json()["data"][0]["id"] == "m2"
            body = {**chat_body(4, stream=False), "model": "m2"}
            assert client.post("/v1/chat/completions", json=body).json()["usage"][
                "completion_tokens"] == 4
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0


def test_fast_prompt_count_equals_the_tokenizer(fast: Sim) -> None:
    tokens = fast.server._tok
    words = tokens.tok.single_token_words()  # type: ignore[attr-defined]
    texts = [
        "Hello" + "".join(" " + w for w in words[:300]),
        "".join(" " + w for w in words[100:150]),
        words[5] + " " + words[6] + "  " + words[7],  # double space: slow path
        "Hi, there!\nNew line " + " ".join(words[:20]),
        "x" * 50 + " " + words[0],
        "",
    ]
    for text in texts:
        assert tokens.count(text) == (tokens.tok.count(text) if text else 0), text[:40]
        assert tokens.count(text) == len(tokens.encode(text))  # cached answer, same count


def test_connection_close_and_http10(fast: Sim) -> None:
    for request in (b"GET /health HTTP/1.0\r\n\r\n",
                    b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n"):
        with socket.create_connection(("127.0.0.1", fast.server.port), timeout=5) as s:
            s.sendall(request)
            data = b""
            while chunk := s.recv(65536):  # ends: the server closes
                data += chunk
        assert data.startswith(b"HTTP/1.1 200 OK\r\nconnection: close\r\n")


def test_stalled_writes_show_a_slow_reader() -> None:
    TOKENS = 60000  # noqa: N806
    with sim_with(ttft_ms=0, itl_ms=0, max_events_per_write=1, max_model_len=2 * TOKENS) as sim:
        with socket.socket() as s:
            # A fixed small receive buffer: the host's autotuning (tcp_rmem's maximum, 32 MB
            # on some machines) could otherwise absorb every event and nothing would stall.
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
            s.settimeout(10)
            s.connect(("127.0.0.1", sim.server.port))
            body = json.dumps(chat_body(TOKENS)).encode()
            s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: "
                      + str(len(body)).encode() + b"\r\n\r\n" + body)
            # Not reading until the receive queue stops growing: ~12 MB of events are more
            # than both socket buffers hold (the send side autotunes up to wmem_max), so the
            # sim is then blocked, however slowly a loaded machine generates them.
            queued, still, deadline = -1, 0, time.monotonic() + 20
            while still < 3 and time.monotonic() < deadline:
                time.sleep(0.1)
                now = struct.unpack("i", fcntl.ioctl(s, termios.FIONREAD, b"\0" * 4))[0]
                still, queued = (still + 1 if now == queued else 0), now
            data = bytearray()
            while not data.endswith(b"0\r\n\r\n"):
                chunk = s.recv(1 << 20)
                assert chunk
                data += chunk
        rec = sim.records[-1]
        assert rec.output_tokens == TOKENS
        assert rec.stalled_writes > 0


def test_spawn_sim_with_workers() -> None:
    url, proc = spawn_sim(["--ttft-ms", "0", "--itl-ms", "0", "--workers", "2"])
    try:
        with httpx.Client(base_url=url, timeout=10) as client:
            pids = set()
            for _ in range(4):
                # New connections spread over the workers (SO_REUSEPORT hashing).
                with httpx.Client(base_url=url, timeout=10) as c:
                    pids.add(c.get("/sim/records").json()["pid"])
                assert client.post("/v1/completions", json={
                    "prompt": "a", "max_tokens": 2, "ignore_eos": True}).status_code == 200
            assert proc.pid not in pids and len(pids) >= 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0


def test_async_context_manager_and_sim_in_thread() -> None:
    async def main() -> int:
        async with SimServer(SimConfig(ttft_ms=0, itl_ms=0)) as sim:
            async with httpx.AsyncClient(base_url=sim.url) as client:
                r = await client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2})
            return r.status_code

    assert asyncio.run(main()) == 200
    with sim_in_thread(SimConfig(ttft_ms=0, itl_ms=0)) as (url, server):
        assert httpx.get(url + "/health").status_code == 200
        assert server.port == int(url.rsplit(":", 1)[1])


@settings(max_examples=40, deadline=None)
@given(max_tokens=st.integers(1, 40), min_tokens=st.integers(0, 40), ignore_eos=st.booleans(),
       stream=st.booleans(), chat=st.booleans(), usage=st.booleans())
def test_lengths_and_usage_agree_for_any_request(
    fast: Sim, max_tokens: int, min_tokens: int, ignore_eos: bool, stream: bool, chat: bool,
    usage: bool,
) -> None:
    min_tokens = min(min_tokens, max_tokens)
    body: dict[str, Any] = {"model": MODEL, "max_tokens": max_tokens, "min_tokens": min_tokens,
                            "ignore_eos": ignore_eos, "stream": stream}
    if usage:
        body["stream_options"] = {"include_usage": True}
    if chat:
        path = "/v1/chat/completions"
        body["messages"] = [{"role": "user", "content": "some prompt"}]
    else:
        path, body["prompt"] = "/v1/completions", "some prompt"
    tok = fast.server._tok
    if stream:
        events = sse(fast.client, path, body)
        texts = content_events(events)
        objs = [json.loads(e) for e in events[:-1]]
        finish = [o["choices"][0]["finish_reason"] for o in objs
                  if o["choices"] and o["choices"][0]["finish_reason"]]
        n = len(texts)
        assert tok.count("".join(texts)) == n
        if usage:
            assert objs[-1]["usage"]["completion_tokens"] == n
        else:
            assert all("usage" not in o for o in objs)
    else:
        obj = fast.client.post(path, json=body).json()
        choice = obj["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
        n = obj["usage"]["completion_tokens"]
        assert tok.count(text) == n
        finish = [choice["finish_reason"]]
    assert max(1, min_tokens) <= n <= max_tokens
    if ignore_eos:
        assert n == max_tokens
    assert finish == ["length" if n == max_tokens else "stop"]
    assert fast.records[-1].output_tokens == n
