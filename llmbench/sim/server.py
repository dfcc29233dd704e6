"""``SimServer``: the simulator bound to one event loop, its routes and its shared state.

Why a module of its own: it is where the pieces meet. It owns the decode slots and the FIFO
of waiting requests, the ground-truth ring and the metrics, routes each request parsed by
``wire.Conn`` to an endpoint, validates the request, injects the configured faults, and
starts a ``generation.Gen`` for completions. Running it in a thread or a process is
``llmbench.sim.launch``'s job.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict
from time import perf_counter_ns
from typing import Any

from llmbench.sim.config import SimConfig
from llmbench.sim.dcgm import CONTENT_TYPE as DCGM_CONTENT_TYPE
from llmbench.sim.dcgm import DcgmSimState, DcgmSimulator
from llmbench.sim.generation import Gen
from llmbench.sim.metrics import Metrics
from llmbench.sim.records import SimRecord, record_dict
from llmbench.sim.tokens import get_tokens
from llmbench.sim.wire import (
    SSE_HEAD,
    Conn,
    HTTPError,
    dumps,
    error_body,
    http_response,
    text_of_content,
)

__all__ = ["SimServer", "base_url"]

_log = logging.getLogger(__name__)


def base_url(host: str, port: int) -> str:
    """A URL a local client can use: wildcard binds become loopback, IPv6 gets brackets."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class SimServer:
    """The simulator bound to one event loop; ``records`` is its ground truth.

    Use ``await start()`` / ``await stop()`` inside a loop, ``run_sim_in_thread`` from sync
    tests, or ``spawn_sim`` to give it its own process (and core) in benchmarks.
    """

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.config.validate()
        self._tok = get_tokens(self.config.tokenizer)
        self._words = self._tok.words
        self._words_b = tuple(w.encode() for w in self._words)
        self._model_json = json.dumps(self.config.model)  # ASCII-safe in byte templates
        self._id_prefix = f"{os.getpid():x}{random.Random().getrandbits(24):06x}-"
        self._rng = random.Random(self.config.seed)
        self._records: deque[SimRecord] = deque(maxlen=self.config.max_records)
        self._dropped = 0
        self._next_id = 0
        self._running = 0
        self._running_gens: set[Gen] = set()
        self._waiting: deque[Gen] = deque()
        self._metrics = Metrics(self.config.max_model_len)
        self._conns: set[Conn] = set()
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.port = 0
        self._routes: dict[tuple[bytes, bytes], Callable[[Conn, bytes, int], None]] = {
            (b"POST", b"/v1/chat/completions"): self._chat,
            (b"POST", b"/v1/completions"): self._completions,
            (b"POST", b"/v1/embeddings"): self._embeddings,
            (b"GET", b"/v1/models"): self._models,
            (b"POST", b"/tokenize"): self._tokenize,
            (b"GET", b"/metrics"): self._metrics_endpoint,
            (b"GET", b"/health"): self._health,
            (b"GET", b"/ping"): self._health,
            (b"GET", b"/version"): self._version,
            (b"GET", b"/sim/records"): self._get_records,
            (b"POST", b"/sim/reset"): self._reset,
            (b"GET", b"/sim/config"): self._get_config,
            (b"POST", b"/sim/config"): self._set_config,
        }
        self._dcgm: DcgmSimulator | None = None
        if self.config.dcgm:
            self._dcgm = DcgmSimulator(
                DcgmSimState(
                    n_gpus=self.config.dcgm_gpus,
                    pod=self.config.dcgm_pod,
                    namespace=self.config.dcgm_namespace,
                    collect_interval_s=self.config.dcgm_collect_interval_s,
                ),
                load=self.load_fraction,
            )
            self._routes[(b"GET", b"/dcgm/metrics")] = self._dcgm_endpoint
        self._paths = {p for _, p in self._routes}

    # lifecycle ---------------------------------------------------------------------------
    async def start(self, host: str = "127.0.0.1", port: int = 0,
                    reuse_port: bool = False) -> int:
        """Binds and starts serving; returns the bound port (useful with ``port=0``)."""
        self._loop = asyncio.get_running_loop()
        self._server = await self._loop.create_server(
            lambda: Conn(self), host, port, backlog=4096, reuse_port=reuse_port or None)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    @property
    def url(self) -> str:
        """Base URL of the started server (loopback for wildcard binds)."""
        sock = self._server.sockets[0] if self._server is not None else None
        host = sock.getsockname()[0] if sock is not None else "127.0.0.1"
        return base_url(host, self.port)

    async def __aenter__(self) -> SimServer:
        """``async with SimServer(cfg) as sim:`` serves on 127.0.0.1, any free port."""
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self) -> None:
        """Stops accepting, aborts in-flight requests (recorded as ``client_closed``)."""
        if self._server is not None:
            self._server.close()
        for gen in list(self._waiting) + list(self._running_gens):
            gen.abort("client_closed")
        for conn in list(self._conns):
            if conn.transport is not None:
                conn.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()
            self._server = None

    @property
    def records(self) -> list[SimRecord]:
        """Finished requests, oldest first (at most ``max_records``; see ``dropped``)."""
        return list(self._records)

    @property
    def dropped(self) -> int:
        """Records pushed out of the ring since the last reset."""
        return self._dropped

    def reset(self) -> None:
        """Forgets records (metrics counters stay monotonic, as Prometheus expects)."""
        self._records.clear()
        self._dropped = 0

    def _add_record(self, rec: SimRecord) -> None:
        recs = self._records
        if len(recs) == recs.maxlen:
            self._dropped += 1  # the oldest one falls out (or, with capacity 0, this one)
        recs.append(rec)

    # dispatch ----------------------------------------------------------------------------
    def _dispatch(self, conn: Conn, method: bytes, path: bytes, body: bytes,
                  arrival: int) -> None:
        handler = self._routes.get((method, path))
        try:
            if handler is None:
                if path in self._paths:
                    raise HTTPError(405, f"method {method.decode()} not allowed on "
                                         f"{path.decode()}")
                raise HTTPError(404, f"no route {path.decode('latin-1')}")
            key = self.config.api_key
            if key is not None and path.startswith(b"/v1/") and (
                    conn.auth != b"Bearer " + key.encode()):
                raise HTTPError(401, "invalid or missing API key")
            handler(conn, body, arrival)
        except HTTPError as err:
            conn.send(http_response(err.status, error_body(err.status, err.message)))
        except Exception as err:  # a bug or an input we did not foresee: answer, stay up
            _log.exception("llmbench sim: %s %s failed", method.decode(), path.decode())
            if conn.busy and conn.gen is None:
                conn.send(http_response(500, error_body(500, f"sim error: {err!r}")))

    def _json_body(self, body: bytes) -> dict[str, Any]:
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError) as err:
            raise HTTPError(400, f"request body is not valid JSON: {err}") from None
        if not isinstance(obj, dict):
            raise HTTPError(400, "request body must be a JSON object")
        return obj

    def _check_model(self, req: dict[str, Any]) -> None:
        model = req.get("model")
        if model is not None and model != self.config.model:
            raise HTTPError(404, f"The model `{model}` does not exist.")

    @staticmethod
    def _chat_parts(req: dict[str, Any]) -> list[str]:
        messages = req.get("messages")
        if not isinstance(messages, list) or not messages:
            raise HTTPError(400, "'messages' must be a non-empty list")
        parts = []
        for m in messages:
            if not isinstance(m, dict):
                raise HTTPError(400, "each message must be an object")
            parts.append(text_of_content(m.get("content")))
        # Content only, no chat template: a client's synthetic prompt of N tokens is N.
        return parts

    def _chat(self, conn: Conn, body: bytes, arrival: int) -> None:
        req = self._json_body(body)
        self._check_model(req)
        tokens = sum(self._tok.count(p) for p in self._chat_parts(req))
        tokens += self.config.chat_template_tokens
        self._generate(conn, req, tokens, arrival, chat=True)

    def _completions(self, conn: Conn, body: bytes, arrival: int) -> None:
        req = self._json_body(body)
        self._check_model(req)
        prompt = req.get("prompt")
        if isinstance(prompt, list):
            if len(prompt) == 1 and isinstance(prompt[0], str):
                prompt = prompt[0]
            elif prompt and all(isinstance(t, int) and not isinstance(t, bool)
                                for t in prompt):
                # Token ids (as vLLM accepts them): the count is the length.
                self._generate(conn, req, len(prompt), arrival, chat=False)
                return
            else:
                raise HTTPError(400, "the sim accepts one prompt per request")
        if not isinstance(prompt, str):
            raise HTTPError(400, "'prompt' must be a string")
        self._generate(conn, req, self._tok.count(prompt), arrival, chat=False)

    def _generate(self, conn: Conn, req: dict[str, Any], prompt_tokens: int, arrival: int,
                  chat: bool) -> None:
        cfg = self.config
        rng = self._rng
        rid = self._next_id
        self._next_id += 1
        stream = bool(req.get("stream", False))
        endpoint = "chat" if chat else "completions"
        rec = SimRecord(rid, endpoint, stream, "ok", arrival)
        # Faults before any work: the server refuses outright.
        if cfg.error_rate_429 or cfg.error_rate_500:
            r = rng.random()
            if r < cfg.error_rate_429:
                rec.status = "error_429"
                self._add_record(rec)
                raise HTTPError(429, "simulated rate limit (--error-rate-429)")
            if r < cfg.error_rate_429 + cfg.error_rate_500:
                rec.status = "error_500"
                self._add_record(rec)
                raise HTTPError(500, "simulated server error (--error-rate-500)")
        max_tokens = req.get("max_completion_tokens")
        if max_tokens is None:
            max_tokens = req.get("max_tokens")
        if max_tokens is None:
            max_tokens = max(1, min(cfg.default_max_tokens, cfg.max_model_len - prompt_tokens))
        min_tokens = req.get("min_tokens") or 0
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise HTTPError(400, "max_tokens must be an integer >= 1")
        if not isinstance(min_tokens, int) or min_tokens < 0 or min_tokens > max_tokens:
            raise HTTPError(400, "min_tokens must be an integer within [0, max_tokens]")
        if prompt_tokens + max_tokens > cfg.max_model_len:
            raise HTTPError(400, f"This model's maximum context length is "
                                 f"{cfg.max_model_len} tokens. However, you requested "
                                 f"{prompt_tokens + max_tokens} tokens ({prompt_tokens} in "
                                 f"the messages, {max_tokens} in the completion).")
        if req.get("ignore_eos"):
            n = max_tokens
        elif cfg.natural_output_tokens > 0:
            n = cfg.natural_output_tokens
        else:
            n = rng.randint(1, max_tokens)
        n = min(max(n, min_tokens, 1), max_tokens)
        finish = "length" if n >= max_tokens else "stop"
        opts = req.get("stream_options")
        include_usage = stream and isinstance(opts, dict) and bool(opts.get("include_usage"))
        rec.prompt_tokens = prompt_tokens
        rec.max_tokens = max_tokens
        self._metrics.prompt_tokens += prompt_tokens
        gen = Gen(self, conn, rec, stream, chat, n, finish, include_usage)
        tpc = cfg.tokens_per_chunk
        nchunks = (n + tpc - 1) // tpc
        if cfg.disconnect_rate and rng.random() < cfg.disconnect_rate:
            # After chunk 1..nchunks-1 (a one-chunk stream loses its tail); a
            # non-streaming request gets the connection closed instead of an answer.
            gen.disconnect_at = tpc * rng.randint(1, max(1, nchunks - 1))
        if cfg.malformed_rate and rng.random() < cfg.malformed_rate:
            gen.malformed_at = tpc * rng.randrange(nchunks)
        conn.gen = gen
        if cfg.max_num_seqs and self._running >= cfg.max_num_seqs:
            self._waiting.append(gen)
        else:
            self._running += 1
            self._running_gens.add(gen)
            gen.admit(arrival)
        if stream:
            conn.transport.write(SSE_HEAD)  # type: ignore[union-attr]

    def _admit_waiting(self, now: int) -> None:
        cfg = self.config
        while self._waiting and (not cfg.max_num_seqs or self._running < cfg.max_num_seqs):
            gen = self._waiting.popleft()
            self._running += 1
            self._running_gens.add(gen)
            gen.admit(now)

    # simple endpoints ----------------------------------------------------------------------
    def _embeddings(self, conn: Conn, body: bytes, arrival: int) -> None:
        req = self._json_body(body)
        self._check_model(req)
        inp = req.get("input")
        if isinstance(inp, str):
            texts: list[str] = [inp]
        elif isinstance(inp, list) and inp and all(isinstance(x, str) for x in inp):
            texts = list(inp)
        elif isinstance(inp, list) and inp and all(isinstance(x, int) for x in inp):
            texts = [" ".join(["x"] * len(inp))]
        else:
            raise HTTPError(400, "'input' must be a string or a list of strings")
        rid = self._next_id
        self._next_id += 1
        counts = [self._tok.count(t) for t in texts]
        total = sum(counts)
        dim = self.config.embedding_dim
        data = []
        for i, t in enumerate(texts):
            r = random.Random(hash(t) & 0xFFFFFFFF)
            vec = [round(r.uniform(-1.0, 1.0), 6) for _ in range(dim)]
            norm = math.sqrt(sum(v * v for v in vec)) or 1.0
            data.append({"object": "embedding", "index": i, "embedding": [v / norm for v in vec]})
        payload = http_response(200, dumps(
            {"id": f"embd-{self._id_prefix}{rid}", "object": "list", "created": int(time.time()),
             "model": self.config.model, "data": data,
             "usage": {"prompt_tokens": total, "total_tokens": total}}).encode())
        rec = SimRecord(rid, "embeddings", False, "ok", arrival, admitted_ns=arrival,
                        prompt_tokens=total)
        self._metrics.prompt_tokens += total
        delay_ms = self.config.ttft_ms + self.config.prefill_ms_per_token * total

        def respond() -> None:
            now = perf_counter_ns()
            rec.first_token_ns = rec.last_token_ns = now
            if conn.closed:
                rec.status = "client_closed"
            self._add_record(rec)
            conn.send(payload)

        self._loop.call_at(self._loop.time() + max(0.0, (arrival + int(delay_ms * 1e6)
                                                         - perf_counter_ns()) / 1e9), respond)

    def _models(self, conn: Conn, body: bytes, arrival: int) -> None:
        m = self.config.model
        conn.send(http_response(200, dumps({"object": "list", "data": [{
            "id": m, "object": "model", "created": int(time.time()), "owned_by": "llmbench",
            "root": m, "parent": None, "max_model_len": self.config.max_model_len,
            "permission": []}]}).encode()))

    def _tokenize(self, conn: Conn, body: bytes, arrival: int) -> None:
        req = self._json_body(body)
        self._check_model(req)
        if "messages" in req:
            tokens = [t for part in self._chat_parts(req) for t in self._tok.encode(part)]
            tokens = [0] * self.config.chat_template_tokens + tokens  # template markers
        elif isinstance(req.get("prompt"), str):
            tokens = self._tok.encode(req["prompt"])
        else:
            raise HTTPError(400, "give 'prompt' (string) or 'messages'")
        conn.send(http_response(200, dumps(
            {"count": len(tokens), "max_model_len": self.config.max_model_len,
             "tokens": tokens, "token_strs": None}).encode()))

    def _kv_usage(self) -> float:
        cfg = self.config
        cap = cfg.kv_cache_tokens or max(cfg.max_num_seqs, 256) * 2048
        used = sum(g.rec.prompt_tokens + g.sent for g in self._running_gens)
        return min(1.0, used / cap)

    def _metrics_endpoint(self, conn: Conn, body: bytes, arrival: int) -> None:
        text = self._metrics.render(self.config.model, self._running, len(self._waiting),
                                    self._kv_usage())
        conn.send(http_response(200, text, b"text/plain; version=0.0.4; charset=utf-8"))

    def load_fraction(self) -> float:
        """How busy the simulated GPU is: running sequences over the batch limit.

        Without ``--max-num-seqs`` the GPU counts as full at 64 sequences.
        """
        return min(1.0, self._running / (self.config.max_num_seqs or 64))

    def _dcgm_endpoint(self, conn: Conn, body: bytes, arrival: int) -> None:
        assert self._dcgm is not None
        text = self._dcgm.metrics_text().encode()
        conn.send(http_response(200, text, DCGM_CONTENT_TYPE.encode()))

    def _health(self, conn: Conn, body: bytes, arrival: int) -> None:
        conn.send(http_response(200, b""))

    def _version(self, conn: Conn, body: bytes, arrival: int) -> None:
        conn.send(http_response(200, b'{"version":"llmbench-sim"}'))

    def _get_records(self, conn: Conn, body: bytes, arrival: int) -> None:
        """Ground truth as JSON; ``?since=ID`` returns only records with ``request_id >= ID``
        (request ids grow with arrival), so a benchmark fetches just its own window."""
        since = 0
        for item in conn.query.split(b"&"):
            key, _, value = item.partition(b"=")
            if key == b"since":
                try:
                    since = int(value)
                except ValueError:
                    raise HTTPError(400, "since must be an integer request id") from None
        payload = {"clock": "perf_counter_ns", "pid": os.getpid(), "dropped": self._dropped,
                   "capacity": self._records.maxlen, "next_request_id": self._next_id,
                   "records": [record_dict(r) for r in self._records
                               if r.request_id >= since]}
        conn.send(http_response(200, dumps(payload).encode()))

    def _reset(self, conn: Conn, body: bytes, arrival: int) -> None:
        self.reset()
        conn.send(http_response(200, b'{"reset":true}'))

    def _get_config(self, conn: Conn, body: bytes, arrival: int) -> None:
        conn.send(http_response(200, dumps(asdict(self.config)).encode()))

    def _set_config(self, conn: Conn, body: bytes, arrival: int) -> None:
        """Changes timing/fault knobs at run time, so one server can serve many scenarios."""
        req = self._json_body(body)
        mutable = {"ttft_ms", "ttft_jitter_ms", "itl_ms", "itl_jitter_ms", "itl_ms_per_seq",
                   "prefill_ms_per_token", "max_num_seqs", "tokens_per_chunk",
                   "max_events_per_write",
                   "natural_output_tokens", "reasoning_tokens", "reasoning_field",
                   "reasoning_usage",
                   "default_max_tokens", "error_rate_429",
                   "error_rate_500", "disconnect_rate", "malformed_rate"}
        bad = sorted(set(req) - mutable)
        if bad:
            raise HTTPError(400, f"not settable at run time: {', '.join(bad)}")
        merged = SimConfig(**{**asdict(self.config), **req})
        try:
            merged.validate()
        except (ValueError, TypeError) as err:
            raise HTTPError(400, str(err)) from None
        self.config = merged
        self._admit_waiting(perf_counter_ns())
        conn.send(http_response(200, dumps(asdict(self.config)).encode()))
