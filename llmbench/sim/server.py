"""``llmbench sim``: a fast OpenAI-compatible server with known latencies, the test oracle.

Why it exists: a benchmark client can only be checked against a server whose behaviour is
known exactly. The simulator injects TTFT, ITL, prefill cost, a concurrency limit with FIFO
queueing, multi-token chunks and faults, and records per request what it really did
(arrival, first and last token written, token counts) so client-side numbers can be compared
with what happened on the wire rather than with the configured delays.

Why it is written on raw ``asyncio.Protocol``: the simulator shares a small machine with the
client it measures, so every microsecond it spends per token is stolen from the client. A
web framework costs tens of microseconds per event; here a token is one pre-built byte
template, one timer callback and one ``transport.write``. HTTP support is the small subset
benchmark clients use: HTTP/1.1 keep-alive, ``Content-Length`` request bodies, responses
with ``Content-Length`` (JSON) or ``Transfer-Encoding: chunked`` (SSE, like uvicorn).

Timing model (per request, all deadlines absolute so event-loop lag never accumulates):

* arrival: ``perf_counter_ns()`` when the bytes completing the request head arrived;
* admitted: arrival, or when a decode slot frees up if ``max_num_seqs`` are running (FIFO);
* first chunk deadline: admitted + ttft (± jitter) + prefill_ms_per_token x prompt tokens;
* chunk ``k`` deadline: chunk ``k-1`` deadline + itl (± jitter) + itl_ms_per_seq x running,
  counted from when chunk 0 was actually written;
* chunks whose deadlines have passed (the sim ran behind, or ITL is 0) are written together
  in one write, still one SSE event each, as vLLM merges outputs for a slow consumer;
  ``--max-events-per-write 1`` forces one event per write (syscall-bound, ~8 us/token);
* when the client stops reading (transport paused) the stream is held and resumes with a
  burst of what is due, so memory stays bounded; ``stalled_writes`` in the record says so.

Non-streaming responses are written once the last token is due (first = last token time).

``time.perf_counter_ns`` is ``CLOCK_MONOTONIC`` on Linux, so a client process on the same
host can compare its own timestamps with ``GET /sim/records`` directly. Timers fire with the
event loop's millisecond granularity (epoll), so a chunk is written 0-1 ms after its
deadline; the records hold the real write times, which is what an oracle must report.
With ``--workers N`` each worker process has its own ``max_num_seqs``, records and metrics.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import json
import logging
import math
import multiprocessing as mp
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from bisect import bisect_left
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, fields
from time import perf_counter_ns
from typing import Any, Protocol

from llmbench.sim.dcgm import CONTENT_TYPE as DCGM_CONTENT_TYPE
from llmbench.sim.dcgm import DcgmSimState, DcgmSimulator

__all__ = [
    "SimConfig",
    "SimRecord",
    "SimServer",
    "add_arguments",
    "output_words",
    "run",
    "run_sim_in_thread",
    "sim_in_thread",
    "spawn_sim",
]

_READY_PREFIX = "llmbench sim listening on "
_log = logging.getLogger(__name__)


# --------------------------------------------------------------------------------------
# configuration
# --------------------------------------------------------------------------------------
@dataclass(slots=True)
class SimConfig:
    """Every simulator knob. Times in milliseconds, rates as probabilities per request."""

    model: str = "llmbench-sim"
    host: str = "127.0.0.1"
    port: int = 8000
    seed: int = 0
    ttft_ms: float = 50.0
    ttft_jitter_ms: float = 0.0
    itl_ms: float = 10.0
    itl_jitter_ms: float = 0.0
    itl_ms_per_seq: float = 0.0
    prefill_ms_per_token: float = 0.0
    max_num_seqs: int = 0
    tokens_per_chunk: int = 1
    max_events_per_write: int = 0
    natural_output_tokens: int = 0
    default_max_tokens: int = 256
    max_model_len: int = 32768
    kv_cache_tokens: int = 0
    embedding_dim: int = 32
    error_rate_429: float = 0.0
    error_rate_500: float = 0.0
    disconnect_rate: float = 0.0
    malformed_rate: float = 0.0
    api_key: str | None = None
    max_records: int = 1_000_000
    workers: int = 1
    tokenizer: str = "default"
    chat_template_tokens: int = 0
    dcgm: bool = False
    dcgm_gpus: int = 1
    dcgm_pod: str | None = None
    dcgm_namespace: str | None = None
    dcgm_collect_interval_s: float = 0.0

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> SimConfig:
        """Builds the config from parsed ``add_arguments`` flags (unknown attributes ignored)."""
        values = {f.name: getattr(args, f"sim_{f.name}") for f in fields(cls)
                  if hasattr(args, f"sim_{f.name}")}
        cfg = cls(**values)
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Rejects impossible settings with a message naming the flag."""
        for name in ("ttft_ms", "ttft_jitter_ms", "itl_ms", "itl_jitter_ms", "itl_ms_per_seq",
                     "prefill_ms_per_token"):
            if getattr(self, name) < 0:
                raise ValueError(f"--{name.replace('_', '-')} must be >= 0")
        for name in ("error_rate_429", "error_rate_500", "disconnect_rate", "malformed_rate"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"--{name.replace('_', '-')} must be within [0, 1]")
        if self.error_rate_429 + self.error_rate_500 > 1.0:
            raise ValueError("--error-rate-429 + --error-rate-500 must be <= 1")
        if self.max_events_per_write < 0:
            raise ValueError("--max-events-per-write must be >= 0 (0 = no cap)")
        if self.tokens_per_chunk < 1:
            raise ValueError("--tokens-per-chunk must be >= 1")
        if self.max_num_seqs < 0:
            raise ValueError("--max-num-seqs must be >= 0 (0 = unlimited)")
        if self.workers < 1:
            raise ValueError("--workers must be >= 1")
        if self.dcgm_gpus < 1:
            raise ValueError("--dcgm-gpus must be >= 1")
        if self.dcgm_collect_interval_s < 0:
            raise ValueError("--dcgm-collect-interval must be >= 0")
        if self.chat_template_tokens < 0:
            raise ValueError("--chat-template-tokens must be >= 0")
        if self.max_records < 0:
            raise ValueError("--max-records must be >= 0")
        if self.default_max_tokens < 1 or self.max_model_len < 2:
            raise ValueError("--default-max-tokens must be >= 1 and --max-model-len >= 2")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Adds the ``llmbench sim`` flags; every destination is ``sim_<SimConfig field>``."""
    d = SimConfig()
    g = parser.add_argument_group("server")
    g.add_argument("--model", dest="sim_model", default=d.model,
                   help="served model name (default %(default)s)")
    g.add_argument("--host", dest="sim_host", default=d.host, help="bind address")
    g.add_argument("--port", dest="sim_port", type=int, default=d.port,
                   help="port (0 = any free port; the bound URL is printed)")
    g.add_argument("--workers", dest="sim_workers", type=int, default=d.workers,
                   help="SO_REUSEPORT worker processes; limits, records and metrics are per "
                        "worker (default %(default)s)")
    g.add_argument("--seed", dest="sim_seed", type=int, default=d.seed,
                   help="seed for lengths, jitter and fault injection")
    g.add_argument("--api-key", dest="sim_api_key", default=d.api_key, metavar="KEY",
                   help="require 'Authorization: Bearer KEY' (default: no auth)")
    g.add_argument("--chat-template-tokens", dest="sim_chat_template_tokens", type=int,
                   default=d.chat_template_tokens,
                   help="added to a chat request's prompt_tokens, as a real chat template "
                        "adds role markers (default 0: usage equals the client's count)")
    dg = parser.add_argument_group("simulated GPU telemetry")
    dg.add_argument("--dcgm", dest="sim_dcgm", action="store_true",
                    help="also serve GET /dcgm/metrics in dcgm-exporter's format: SIMULATED "
                         "GPUs (modelName llmbench-simulated-GPU) whose power and utilisation "
                         "follow the running sequences")
    dg.add_argument("--dcgm-gpus", dest="sim_dcgm_gpus", type=int, default=d.dcgm_gpus,
                    help="simulated GPUs (default %(default)s)")
    dg.add_argument("--dcgm-pod", dest="sim_dcgm_pod", default=d.dcgm_pod,
                    help="pod label of the simulated GPUs (as dcgm-exporter sets it)")
    dg.add_argument("--dcgm-namespace", dest="sim_dcgm_namespace", default=d.dcgm_namespace,
                    help="namespace label of the simulated GPUs")
    dg.add_argument("--dcgm-collect-interval", dest="sim_dcgm_collect_interval_s", type=float,
                    default=d.dcgm_collect_interval_s,
                    help="seconds between value changes, like dcgm-exporter's -c (0 = live)")
    g.add_argument("--tokenizer", dest="sim_tokenizer", default=d.tokenizer,
                   help="counts prompts and picks output words: 'default' (embedded), a "
                        "tokenizer.json or its directory, a cached hub id, or 'whitespace'")
    g.add_argument("--max-records", dest="sim_max_records", type=int, default=d.max_records,
                   help="ground-truth ring size (~320 bytes per record); older records are "
                        "dropped and counted; 0 keeps none (default %(default)s)")
    t = parser.add_argument_group("timing")
    t.add_argument("--ttft-ms", dest="sim_ttft_ms", type=float, default=d.ttft_ms,
                   help="time to first token after admission (default %(default)s)")
    t.add_argument("--ttft-jitter-ms", dest="sim_ttft_jitter_ms", type=float,
                   default=d.ttft_jitter_ms, help="uniform +/- jitter on TTFT")
    t.add_argument("--itl-ms", dest="sim_itl_ms", type=float, default=d.itl_ms,
                   help="time between output chunks, i.e. one decode step "
                        "(default %(default)s)")
    t.add_argument("--itl-jitter-ms", dest="sim_itl_jitter_ms", type=float,
                   default=d.itl_jitter_ms, help="uniform +/- jitter on each step")
    t.add_argument("--itl-ms-per-seq", dest="sim_itl_ms_per_seq", type=float,
                   default=d.itl_ms_per_seq,
                   help="extra step time per running sequence (batch-size slowdown)")
    t.add_argument("--prefill-ms-per-token", dest="sim_prefill_ms_per_token", type=float,
                   default=d.prefill_ms_per_token, help="added to TTFT per prompt token")
    t.add_argument("--max-num-seqs", dest="sim_max_num_seqs", type=int, default=d.max_num_seqs,
                   help="concurrently decoding sequences; more wait FIFO and the wait counts "
                        "in TTFT (0 = unlimited, the default)")
    t.add_argument("--tokens-per-chunk", dest="sim_tokens_per_chunk", type=int,
                   default=d.tokens_per_chunk,
                   help="output tokens per SSE event, as with speculative decoding")
    t.add_argument("--max-events-per-write", dest="sim_max_events_per_write", type=int,
                   default=d.max_events_per_write,
                   help="cap on overdue SSE events sent in one write when the sim runs "
                        "behind or ITL is 0 (0 = no cap, the default; 1 = one event per "
                        "write, the costliest and most syscall-bound)")
    o = parser.add_argument_group("output")
    o.add_argument("--natural-output-tokens", dest="sim_natural_output_tokens", type=int,
                   default=d.natural_output_tokens,
                   help="length at which the model 'emits EOS' without ignore_eos; 0 = "
                        "uniform random in [max(1, min_tokens), max_tokens] (default)")
    o.add_argument("--default-max-tokens", dest="sim_default_max_tokens", type=int,
                   default=d.default_max_tokens, help="max_tokens when a request has none")
    o.add_argument("--max-model-len", dest="sim_max_model_len", type=int,
                   default=d.max_model_len,
                   help="prompt + max_tokens above this is a 400, like vLLM")
    o.add_argument("--kv-cache-tokens", dest="sim_kv_cache_tokens", type=int,
                   default=d.kv_cache_tokens,
                   help="KV capacity behind vllm:kv_cache_usage_perc "
                        "(0 = max(max_num_seqs, 256) x 2048)")
    o.add_argument("--embedding-dim", dest="sim_embedding_dim", type=int,
                   default=d.embedding_dim, help="length of /v1/embeddings vectors")
    f = parser.add_argument_group("fault injection (probability per request)")
    f.add_argument("--error-rate-429", dest="sim_error_rate_429", type=float,
                   default=d.error_rate_429, help="answer 429 Too Many Requests")
    f.add_argument("--error-rate-500", dest="sim_error_rate_500", type=float,
                   default=d.error_rate_500, help="answer 500 Internal Server Error")
    f.add_argument("--disconnect-rate", dest="sim_disconnect_rate", type=float,
                   default=d.disconnect_rate, help="close the connection mid-stream")
    f.add_argument("--malformed-rate", dest="sim_malformed_rate", type=float,
                   default=d.malformed_rate, help="emit one SSE event that is invalid JSON")
    for action in parser._actions:  # short metavars: "--ttft-ms MS", not "SIM_TTFT_MS"
        if action.dest.startswith("sim_") and action.option_strings and not action.metavar:
            flag = action.option_strings[0]
            action.metavar = ("MS" if flag.endswith("-ms") or "-ms-" in flag else
                              "P" if flag.endswith("-rate") or "-rate-" in flag else
                              "N" if action.type is int else flag.lstrip("-").upper())


# --------------------------------------------------------------------------------------
# tokens
# --------------------------------------------------------------------------------------
class _Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...
    def count(self, text: str) -> int: ...


class _WhitespaceTokenizer:
    """Fallback when the project tokenizer is unavailable: one token per whitespace word."""

    def encode(self, text: str) -> list[int]:
        return [hash(w) & 0x7FFF for w in text.split()]

    def count(self, text: str) -> int:
        return len(text.split())


# Common English words; the ones that are a single token of the active tokenizer (with a
# leading space, and still one token each when concatenated) become the output vocabulary.
_CANDIDATE_WORDS = (
    "the of and to in is that it for on with as was at by be this are from or an have not "
    "but they which one you were all we can her has there been if more when will would who "
    "so no model data time new first some other than its only into over also after people "
    "two year work most use may well way many these then them about out up just like what "
    "make can could see any good long day right small large value point system part place "
    "case week number group world area water state power light level order line test run "
    "open real high low fast slow token text word node pod cluster server client request"
).split()



def _load_tokenizer(spec: str) -> _Tokenizer:
    """The project's tokenizer (imported lazily: it is heavy) or the whitespace fallback.

    ``spec`` is anything ``llmbench profile --tokenizer`` accepts except ``server`` (a
    tokenizer.json, a directory, a cached hub id, ``default``), or ``whitespace``.
    """
    if spec == "whitespace":
        return _WhitespaceTokenizer()
    try:
        from llmbench.tokenizer import load_tokenizer
    except ImportError:  # a stripped-down install: keep serving, count words
        return _WhitespaceTokenizer()
    if spec == "server":
        raise ValueError("--tokenizer server makes no sense for the sim itself")
    return load_tokenizer(None if spec == "default" else spec)


class _Tokens:
    """The sim's tokenizer view: exact prompt counts, cheap for synthetic prompts, and the
    output vocabulary.

    Encoding costs ~1 us per token, more than the sim spends per output token, so prompts
    made only of the tokenizer's single-token words (what ``llmbench profile`` generates)
    are counted by splitting on spaces when the tokenizer's counts provably add up
    (``words_add_up``); anything else is encoded. Counts are cached per text.
    """

    def __init__(self, spec: str) -> None:
        self.tok = _load_tokenizer(spec)
        single = getattr(self.tok, "single_token_words", None)
        vocab: list[str] = single() if single is not None else []
        if vocab:
            known = set(vocab)
            words = [" " + w for w in dict.fromkeys(_CANDIDATE_WORDS) if w in known]
            if len(words) < 16:
                words = [" " + w for w in vocab[:256]]
        else:  # whitespace fallback
            words = [" " + w for w in dict.fromkeys(_CANDIDATE_WORDS)]
        if len(words) < 8 or self.tok.count("".join(words)) != len(words):
            raise ValueError(f"--tokenizer {spec}: plain words are not one token each, so "
                             "output lengths could not be exact; use --tokenizer whitespace")
        self.words = tuple(words)
        self.word_set = frozenset(vocab)
        add_up = getattr(self.tok, "words_add_up", None)
        self.additive = bool(vocab) and add_up is not None and bool(add_up())
        self._cache: dict[str, int] = {}

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text) if text else []

    def count(self, text: str) -> int:
        if not text:
            return 0
        cache = self._cache
        n = cache.get(text)
        if n is not None:
            return n
        n = -1
        if self.additive:
            parts = text.split(" ")
            if self.word_set.issuperset(parts[1:]):
                first = parts[0]
                head = cache.get(first)
                if head is None:
                    head = cache[first] = self.tok.count(first) if first else 0
                n = head + len(parts) - 1
        if n < 0:
            n = self.tok.count(text)
        if len(cache) >= 8192:
            cache.clear()
        cache[text] = n
        return n


@functools.cache
def _tokens(spec: str = "default") -> _Tokens:
    return _Tokens(spec)


def output_words(tokenizer: str = "default") -> tuple[str, ...]:
    """The sim's output vocabulary: words that are exactly one token each, also concatenated.

    A response of ``n`` tokens is ``n`` of these words joined without separator, so the
    client's tokenizer-based OSL equals the sim's ``completion_tokens`` exactly.
    """
    return _tokens(tokenizer).words


# --------------------------------------------------------------------------------------
# ground truth and metrics
# --------------------------------------------------------------------------------------
@dataclass(slots=True)
class SimRecord:
    """What the sim did for one request; times are ``perf_counter_ns`` (0 = did not happen).

    ``status`` is ``ok``, ``error_429``/``error_500``/``disconnect``/``malformed`` (the
    injected faults) or ``client_closed`` (the client went away first). Requests rejected
    as invalid (400/401/404) leave no record. ``stalled_writes`` counts chunk writes that
    found the socket still full from earlier ones: the client was not reading fast enough,
    so "written" times of that request are earlier than the bytes really left.
    """

    request_id: int
    endpoint: str
    stream: bool
    status: str
    arrival_ns: int
    admitted_ns: int = 0
    first_token_ns: int = 0
    last_token_ns: int = 0
    prompt_tokens: int = 0
    output_tokens: int = 0
    max_tokens: int = 0
    finish_reason: str | None = None
    stalled_writes: int = 0


_RECORD_FIELDS = tuple(f.name for f in fields(SimRecord))


def _record_dict(rec: SimRecord) -> dict[str, Any]:
    """``asdict`` without its deep copy: ~5x faster for a million records."""
    return {name: getattr(rec, name) for name in _RECORD_FIELDS}


class _Histogram:
    """A Prometheus histogram in four fields: observing is one bisect and three adds."""

    __slots__ = ("buckets", "counts", "sum", "count")

    def __init__(self, buckets: Sequence[float]) -> None:
        self.buckets = list(buckets)
        self.counts = [0] * (len(self.buckets) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.buckets, value)] += 1
        self.sum += value
        self.count += 1


# Bucket boundaries as vLLM's v1 PrometheusStatLogger declares them, so dashboards and
# recording rules written for vLLM work against the sim unchanged.
_TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5,
                 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
_ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0)
_REQUEST_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                    50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)


def _one_two_five(limit: int) -> list[float]:
    out: list[float] = []
    exp = 0
    while True:
        for m in (1, 2, 5):
            v = m * 10**exp
            if v > limit:
                return out
            out.append(float(v))
        exp += 1


class _Metrics:
    """vLLM-named server metrics, rendered to Prometheus text only when scraped."""

    def __init__(self, max_model_len: int) -> None:
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}
        self.ttft = _Histogram(_TTFT_BUCKETS)
        self.itl = _Histogram(_ITL_BUCKETS)
        self.e2e = _Histogram(_REQUEST_BUCKETS)
        self.queue = _Histogram(_REQUEST_BUCKETS)
        token_buckets = _one_two_five(max_model_len)
        self.req_prompt = _Histogram(token_buckets)
        self.req_generation = _Histogram(token_buckets)

    def render(self, model: str, running: int, waiting: int, kv_usage: float) -> bytes:
        esc = model.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        lbl = f'engine="0",model_name="{esc}"'
        out: list[str] = []

        def scalar(name: str, kind: str, doc: str, value: float) -> None:
            out.append(f"# HELP {name} {doc}\n# TYPE {name} {kind}\n{name}{{{lbl}}} {value!r}\n")

        scalar("vllm:num_requests_running", "gauge",
               "Number of requests in model execution batches.", float(running))
        scalar("vllm:num_requests_waiting", "gauge",
               "Number of requests waiting to be processed.", float(waiting))
        scalar("vllm:gpu_cache_usage_perc", "gauge",
               "GPU KV-cache usage. 1 means 100 percent usage. DEPRECATED: "
               "Use vllm:kv_cache_usage_perc instead.", kv_usage)
        scalar("vllm:kv_cache_usage_perc", "gauge",
               "KV-cache usage. 1 means 100 percent usage.", kv_usage)
        scalar("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.",
               float(self.prompt_tokens))
        scalar("vllm:generation_tokens_total", "counter",
               "Number of generation tokens processed.", float(self.generation_tokens))
        name = "vllm:request_success_total"
        out.append(f"# HELP {name} Count of successfully processed requests.\n"
                   f"# TYPE {name} counter\n")
        for reason, value in self.success.items():
            out.append(f'{name}{{{lbl},finished_reason="{reason}"}} {float(value)!r}\n')
        for hname, doc, hist in (
            ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
             self.ttft),
            ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.",
             self.itl),
            ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.",
             self.e2e),
            ("vllm:request_queue_time_seconds",
             "Histogram of time spent in WAITING phase for request.", self.queue),
            ("vllm:request_prompt_tokens", "Number of prefill tokens processed.",
             self.req_prompt),
            ("vllm:request_generation_tokens", "Number of generation tokens processed.",
             self.req_generation),
        ):
            out.append(f"# HELP {hname} {doc}\n# TYPE {hname} histogram\n")
            cum = 0
            for bound, n in zip(hist.buckets, hist.counts, strict=False):
                cum += n
                out.append(f'{hname}_bucket{{{lbl},le="{bound!r}"}} {float(cum)!r}\n')
            out.append(f'{hname}_bucket{{{lbl},le="+Inf"}} {float(hist.count)!r}\n')
            out.append(f"{hname}_count{{{lbl}}} {float(hist.count)!r}\n")
            out.append(f"{hname}_sum{{{lbl}}} {hist.sum!r}\n")
        return "".join(out).encode()


# --------------------------------------------------------------------------------------
# HTTP plumbing
# --------------------------------------------------------------------------------------
_REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
            405: "Method Not Allowed", 411: "Length Required",
            413: "Payload Too Large", 429: "Too Many Requests",
            431: "Request Header Fields Too Large", 500: "Internal Server Error",
            501: "Not Implemented"}
_ERROR_TYPES = {400: "BadRequestError", 401: "AuthenticationError", 404: "NotFoundError",
                405: "MethodNotAllowed", 411: "BadRequestError", 413: "BadRequestError",
                429: "RateLimitError", 431: "BadRequestError", 500: "InternalServerError",
                501: "NotImplementedError"}
_SSE_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
             b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")
_DONE = b"data: [DONE]\n\n"
_DONE_CHUNK = b"%x\r\n%b\r\n0\r\n\r\n" % (len(_DONE), _DONE)
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode
_MAX_HEAD = 65536
_MAX_BODY = 64 * 1024 * 1024


def _http_response(status: int, body: bytes, content_type: bytes = b"application/json",
                   close: bool = False) -> bytes:
    head = b"HTTP/1.1 %d %b\r\ncontent-type: %b\r\ncontent-length: %d\r\n%b\r\n" % (
        status, _REASONS.get(status, "Status").encode(), content_type, len(body),
        b"connection: close\r\n" if close else b"")
    return head + body


def _error_body(status: int, message: str) -> bytes:
    """OpenAI's error envelope (which current vLLM also uses)."""
    return _dumps({"error": {"message": message, "type": _ERROR_TYPES.get(status, "Error"),
                                 "param": None, "code": status}}).encode()


class _HTTPError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def _text_of_content(content: Any) -> str:
    """Message content as text: a string, or the text parts of an OpenAI content list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    raise _HTTPError(400, "message content must be a string or a list of parts")


class _Conn(asyncio.Protocol):
    """One client connection: parses requests, runs one response at a time (keep-alive).

    Pipelined requests wait in ``buf`` until the current response is complete.
    """

    __slots__ = ("sim", "transport", "buf", "busy", "closed", "close_after", "gen",
                 "head_ns", "head_end", "body_len", "method", "path", "query", "keep", "auth",
                 "processing", "paused")

    def __init__(self, sim: SimServer) -> None:
        self.sim = sim
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.busy = False
        self.closed = False
        self.close_after = False
        self.gen: _Gen | None = None
        self.head_ns = 0
        self.head_end = -1
        self.body_len = 0
        self.method = b""
        self.path = b""
        self.query = b""
        self.keep = True
        self.auth: bytes | None = None
        self.processing = False
        self.paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.sim._conns.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.sim._conns.discard(self)
        gen = self.gen
        if gen is not None:
            self.gen = None
            gen.abort("client_closed")

    def pause_writing(self) -> None:
        # The client reads slower than we write: hold the stream (tokens keep "being
        # generated" on schedule) so memory stays bounded, like uvicorn awaiting drain.
        self.paused = True

    def resume_writing(self) -> None:
        self.paused = False
        gen = self.gen
        if gen is not None and gen.held:
            gen.held = False
            gen.handle = gen.sim._loop.call_soon(gen.tick)

    def data_received(self, data: bytes) -> None:
        now = perf_counter_ns()
        self.buf += data
        if not self.busy:
            self._process(now)

    def eof_received(self) -> bool | None:
        # A half-closed client still gets its response; close when it is written.
        self.close_after = True
        if not self.busy and self.transport is not None:
            self.transport.close()
        return True

    def _process(self, now: int) -> None:
        if self.processing:  # re-entered via finish() of a synchronous response
            return
        self.processing = True
        try:
            self._process_loop(now)
        finally:
            self.processing = False

    def _process_loop(self, now: int) -> None:
        buf = self.buf
        while not self.busy and not self.closed:
            if self.head_end < 0:
                end = buf.find(b"\r\n\r\n")
                if end < 0:
                    if len(buf) > _MAX_HEAD:
                        self._fatal(431, "request head too large")
                    return
                self.head_ns = now
                try:
                    self._parse_head(bytes(buf[:end]))
                except _HTTPError as err:
                    self._fatal(err.status, err.message)
                    return
                self.head_end = end + 4
            total = self.head_end + self.body_len
            if len(buf) < total:
                return
            body = bytes(buf[self.head_end:total])
            del buf[:total]
            self.head_end = -1
            self.busy = True
            self.sim._dispatch(self, self.method, self.path, body, self.head_ns)
            now = perf_counter_ns()

    def _parse_head(self, head: bytes) -> None:
        lines = head.split(b"\r\n")
        parts = lines[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            raise _HTTPError(400, "malformed request line")
        self.method = parts[0]
        self.path, _, self.query = parts[1].partition(b"?")
        self.keep = parts[2] != b"HTTP/1.0"
        self.body_len = 0
        self.auth = None
        for line in lines[1:]:
            key, _, value = line.partition(b":")
            key = key.strip().lower()
            if key == b"content-length":
                try:
                    self.body_len = int(value)
                except ValueError:
                    raise _HTTPError(400, "bad content-length") from None
                if not 0 <= self.body_len <= _MAX_BODY:
                    raise _HTTPError(413, "request body too large")
            elif key == b"connection":
                v = value.strip().lower()
                if v == b"close":
                    self.keep = False
                elif v == b"keep-alive":
                    self.keep = True
            elif key == b"transfer-encoding":
                raise _HTTPError(411, "chunked request bodies are not supported; "
                                      "send Content-Length")
            elif key == b"authorization":
                self.auth = value.strip()
            elif key == b"expect" and value.strip().lower() == b"100-continue":
                # curl asks before sending bodies over 1 KiB; say go at once.
                if self.transport is not None:
                    self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _fatal(self, status: int, message: str) -> None:
        """Protocol-level error: the stream position is unknown, so answer and close."""
        if self.transport is not None and not self.closed:
            self.transport.write(_http_response(status, _error_body(status, message), close=True))
            self.transport.close()
        self.closed = True

    # response side ---------------------------------------------------------------------
    def send(self, payload: bytes) -> None:
        """Writes a complete response and moves on to the next pipelined request."""
        if self.closed or self.transport is None:
            return
        if not self.keep:
            # Mark "connection: close" in the head for HTTP/1.0 and "Connection: close".
            payload = payload.replace(b"\r\n", b"\r\nconnection: close\r\n", 1)
        self.transport.write(payload)
        self.finish()

    def finish(self) -> None:
        self.busy = False
        self.gen = None
        if self.closed or self.transport is None:
            return
        if not self.keep or self.close_after:
            self.transport.close()
            self.closed = True
            return
        if self.buf:
            self._process(perf_counter_ns())


# --------------------------------------------------------------------------------------
# generation
# --------------------------------------------------------------------------------------
_WAITING, _PREFILL, _DECODE, _DONE_STATE = range(4)


class _Gen:
    """One generation request: queued, then emits chunks on absolute deadlines via call_at."""

    __slots__ = ("sim", "conn", "rec", "stream", "chat", "n", "sent", "prefix", "suffix",
                 "woff", "handle", "deadline_ns", "state", "include_usage", "finish_reason",
                 "malformed_at", "disconnect_at", "last_write_ns", "created", "rid_s", "held")

    def __init__(self, sim: SimServer, conn: _Conn, rec: SimRecord, stream: bool, chat: bool,
                 n: int, finish_reason: str, include_usage: bool) -> None:
        self.sim = sim
        self.conn = conn
        self.rec = rec
        self.stream = stream
        self.chat = chat
        self.n = n
        self.sent = 0
        self.finish_reason = finish_reason
        self.include_usage = include_usage
        self.handle: asyncio.TimerHandle | asyncio.Handle | None = None
        self.deadline_ns = 0
        self.state = _WAITING
        self.malformed_at = -1
        self.disconnect_at = -1
        self.last_write_ns = 0
        self.held = False
        self.woff = rec.request_id % len(sim._words)
        self.created = int(time.time())
        model = sim._model_json
        if chat:
            self.rid_s = f"chatcmpl-{sim._id_prefix}{rec.request_id}"
            self.prefix = (f'data: {{"id":"{self.rid_s}","object":"chat.completion.chunk",'
                           f'"created":{self.created},"model":{model},"choices":[{{"index":0,'
                           f'"delta":{{"content":"').encode()
            self.suffix = b'"},"logprobs":null,"finish_reason":null}]}\n\n'
        else:
            self.rid_s = f"cmpl-{sim._id_prefix}{rec.request_id}"
            self.prefix = (f'data: {{"id":"{self.rid_s}","object":"text_completion",'
                           f'"created":{self.created},"model":{model},"choices":[{{"index":0,'
                           f'"text":"').encode()
            self.suffix = b'","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'

    # scheduling ------------------------------------------------------------------------
    def admit(self, now_ns: int) -> None:
        """Takes a decode slot: the first chunk is due after TTFT and prefill."""
        sim = self.sim
        cfg = sim.config
        self.state = _PREFILL
        self.rec.admitted_ns = now_ns
        ttft = cfg.ttft_ms
        if cfg.ttft_jitter_ms:
            ttft = max(0.0, ttft + sim._rng.uniform(-cfg.ttft_jitter_ms, cfg.ttft_jitter_ms))
        ttft += cfg.prefill_ms_per_token * self.rec.prompt_tokens
        self.deadline_ns = now_ns + int(ttft * 1e6)
        self._schedule()

    def _schedule(self) -> None:
        sim = self.sim
        delay = (self.deadline_ns - perf_counter_ns()) / 1e9
        if delay <= 0:
            self.handle = sim._loop.call_soon(self.tick)
        else:
            self.handle = sim._loop.call_at(sim._loop.time() + delay, self.tick)

    def _step_ns(self) -> int:
        cfg = self.sim.config
        step = cfg.itl_ms
        if cfg.itl_jitter_ms:
            step = max(0.0, step + self.sim._rng.uniform(-cfg.itl_jitter_ms, cfg.itl_jitter_ms))
        if cfg.itl_ms_per_seq:
            step += cfg.itl_ms_per_seq * self.sim._running
        return int(step * 1e6)

    # emission --------------------------------------------------------------------------
    def _content(self, start: int, count: int) -> bytes:
        words = self.sim._words_b
        nw = len(words)
        base = self.woff + start
        if count == 1:
            return words[base % nw]
        return b"".join(words[(base + i) % nw] for i in range(count))

    def tick(self) -> None:
        """Timer callback: writes every chunk that is due, in one write.

        Normally that is one chunk. When the sim runs behind (or ITL is zero) the overdue
        chunks leave together, still as separate SSE events, like vLLM merging outputs for
        a slow consumer; ``max_events_per_write`` caps that burst.
        """
        self.handle = None
        conn = self.conn
        transport = conn.transport
        if conn.closed or transport is None:
            self.abort("client_closed")
            return
        if conn.paused and self.stream:
            self.held = True  # resume_writing() calls tick again; overdue chunks then burst
            return
        now = perf_counter_ns()
        sim = self.sim
        if not self.stream:
            self._finish_json(now)
            return
        cfg = sim.config
        tpc = cfg.tokens_per_chunk
        limit = cfg.max_events_per_write or 1 << 62
        n = self.n
        words = sim._words_b
        nw = len(words)
        prefix = self.prefix
        suffix = self.suffix
        sent = self.sent
        parts: list[bytes] = []
        if transport.get_write_buffer_size():
            self.rec.stalled_writes += 1
        if sent == 0:
            # Decode steps count from the first token actually written, so a late first
            # token (loop lag, timer granularity) shows in TTFT only, never in ITL.
            self.deadline_ns = now
            self.rec.first_token_ns = now
            if self.chat:
                parts.append(self._role_chunk())
        else:
            sim._metrics.itl.observe((now - self.last_write_ns) / 1e9)
        self.last_write_ns = now
        fixed_step = not (cfg.itl_jitter_ms or cfg.itl_ms_per_seq)
        step = int(cfg.itl_ms * 1e6)
        events = 0
        while True:
            if tpc == 1:
                content = words[(self.woff + sent) % nw]
            else:
                content = self._content(sent, min(tpc, n - sent))
            if self.malformed_at == sent:
                event = prefix + content + b'"}\n\n'  # truncated JSON: a malformed event
                self.rec.status = "malformed"
            else:
                event = prefix + content + suffix
            parts.append(b"%x\r\n%b\r\n" % (len(event), event))
            sent += tpc if sent + tpc <= n else n - sent
            events += 1
            if events > 1:  # events written together: zero gaps, as a client sees them
                itl = sim._metrics.itl
                itl.counts[0] += 1
                itl.count += 1
            if 0 <= self.disconnect_at <= sent:
                # Injected fault: the server drops the connection mid-stream (no tail).
                # The record is complete before the bytes leave, so a client that has
                # seen the end can always find it (also from another thread).
                self.sent = sent
                self.rec.status = "disconnect"
                self.rec.last_token_ns = now
                self.rec.output_tokens = sent
                conn.closed = True
                conn.gen = None
                self._release(now, "abort")
                transport.write(b"".join(parts))
                transport.close()
                return
            if sent >= n:
                self.sent = sent
                parts.append(self._tail())
                self._complete(now)
                transport.write(b"".join(parts))
                conn.finish()
                return
            self.deadline_ns += step if fixed_step else self._step_ns()
            if self.deadline_ns > now or events >= limit:
                break
        self.sent = sent
        self.state = _DECODE
        transport.write(b"".join(parts))
        if self.deadline_ns <= now:
            self.handle = sim._loop.call_soon(self.tick)
        else:
            self.handle = sim._loop.call_at(sim._loop.time() + (self.deadline_ns - now) / 1e9,
                                            self.tick)

    def _role_chunk(self) -> bytes:
        event = (f'data: {{"id":"{self.rid_s}","object":"chat.completion.chunk",'
                 f'"created":{self.created},"model":{self.sim._model_json},"choices":[{{'
                 f'"index":0,"delta":{{"role":"assistant","content":""}},"logprobs":null,'
                 f'"finish_reason":null}}]}}\n\n').encode()
        return b"%x\r\n%b\r\n" % (len(event), event)

    def _usage_json(self) -> str:
        p = self.rec.prompt_tokens
        return (f'{{"prompt_tokens":{p},"total_tokens":{p + self.n},'
                f'"completion_tokens":{self.n}}}')

    def _tail(self) -> bytes:
        """Finish-reason chunk, optional usage-only chunk, ``[DONE]``, end of chunked body."""
        head = (f'data: {{"id":"{self.rid_s}","object":'
                f'"{"chat.completion.chunk" if self.chat else "text_completion"}",'
                f'"created":{self.created},"model":{self.sim._model_json},"choices":')
        if self.chat:
            fin = (f'{head}[{{"index":0,"delta":{{}},"logprobs":null,'
                   f'"finish_reason":"{self.finish_reason}","stop_reason":null}}]}}\n\n')
        else:
            fin = (f'{head}[{{"index":0,"text":"","logprobs":null,'
                   f'"finish_reason":"{self.finish_reason}","stop_reason":null}}]}}\n\n')
        events = [fin]
        if self.include_usage:
            events.append(f'{head}[],"usage":{self._usage_json()}}}\n\n')
        out = []
        for e in events:
            b = e.encode()
            out.append(b"%x\r\n%b\r\n" % (len(b), b))
        out.append(_DONE_CHUNK)
        return b"".join(out)

    def _finish_json(self, now: int) -> None:
        """Non-streaming: the whole completion is sent once the last token is 'generated'."""
        if self.state == _PREFILL and self.n > 1:
            # Decode time still to come: the response is due after n-1 more steps.
            self.state = _DECODE
            steps = -(-self.n // self.sim.config.tokens_per_chunk) - 1
            self.deadline_ns += sum(self._step_ns() for _ in range(steps))
            if self.deadline_ns > now:
                self._schedule()
                return
        text = self._content(0, self.n).decode()
        rid = self.rid_s
        if self.chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant",
                                                               "content": text},
                                      "logprobs": None, "finish_reason": self.finish_reason,
                                      "stop_reason": None}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None,
                      "finish_reason": self.finish_reason, "stop_reason": None}
            obj = "text_completion"
        p = self.rec.prompt_tokens
        body = _dumps({"id": rid, "object": obj, "created": self.created,
                           "model": self.sim.config.model, "choices": [choice],
                           "usage": {"prompt_tokens": p, "total_tokens": p + self.n,
                                     "completion_tokens": self.n}}).encode()
        if self.malformed_at >= 0:
            body = body[: len(body) // 2]
            self.rec.status = "malformed"
        self.rec.first_token_ns = now
        self.sent = self.n
        if self.disconnect_at >= 0:
            self.rec.status = "disconnect"
            self.rec.last_token_ns = now
            self.conn.closed = True
            self.conn.gen = None
            self._release(now, "abort")
            self.conn.transport.close()  # type: ignore[union-attr]
            return
        self._complete(now)
        self.conn.send(_http_response(200, body))

    # bookkeeping ----------------------------------------------------------------------
    def _complete(self, now: int) -> None:
        self.rec.last_token_ns = now
        self.rec.output_tokens = self.n
        self.rec.finish_reason = self.finish_reason
        self._release(now, self.finish_reason)

    def abort(self, status: str) -> None:
        """The client went away (or the server stops): free the slot, keep the record."""
        if self.state == _DONE_STATE:
            return
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None
        now = perf_counter_ns()
        if self.rec.status == "ok":
            self.rec.status = status
        if self.sent:
            self.rec.last_token_ns = self.last_write_ns
        self.rec.output_tokens = self.sent
        if self.state == _WAITING:
            try:
                self.sim._waiting.remove(self)
            except ValueError:
                pass
            self.state = _DONE_STATE
            self.sim._add_record(self.rec)
            return
        self._release(now, "abort")

    def _release(self, now: int, reason: str) -> None:
        self.state = _DONE_STATE
        sim = self.sim
        rec = self.rec
        m = sim._metrics
        m.success[reason] = m.success.get(reason, 0) + 1
        m.generation_tokens += self.sent
        if rec.first_token_ns:
            m.ttft.observe((rec.first_token_ns - rec.arrival_ns) / 1e9)
        m.e2e.observe((now - rec.arrival_ns) / 1e9)
        m.queue.observe((rec.admitted_ns - rec.arrival_ns) / 1e9)
        m.req_prompt.observe(rec.prompt_tokens)
        m.req_generation.observe(self.sent)
        sim._running_gens.discard(self)
        sim._add_record(rec)
        sim._running -= 1
        sim._admit_waiting(now)


# --------------------------------------------------------------------------------------
# the server
# --------------------------------------------------------------------------------------
class SimServer:
    """The simulator bound to one event loop; ``records`` is its ground truth.

    Use ``await start()`` / ``await stop()`` inside a loop, ``run_sim_in_thread`` from sync
    tests, or ``spawn_sim`` to give it its own process (and core) in benchmarks.
    """

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config or SimConfig()
        self.config.validate()
        self._tok = _tokens(self.config.tokenizer)
        self._words = self._tok.words
        self._words_b = tuple(w.encode() for w in self._words)
        self._model_json = json.dumps(self.config.model)  # ASCII-safe in byte templates
        self._id_prefix = f"{os.getpid():x}{random.Random().getrandbits(24):06x}-"
        self._rng = random.Random(self.config.seed)
        self._records: deque[SimRecord] = deque(maxlen=self.config.max_records)
        self._dropped = 0
        self._next_id = 0
        self._running = 0
        self._running_gens: set[_Gen] = set()
        self._waiting: deque[_Gen] = deque()
        self._metrics = _Metrics(self.config.max_model_len)
        self._conns: set[_Conn] = set()
        self._server: asyncio.base_events.Server | None = None
        self._loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self.port = 0
        self._routes: dict[tuple[bytes, bytes], Callable[[_Conn, bytes, int], None]] = {
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
            lambda: _Conn(self), host, port, backlog=4096, reuse_port=reuse_port or None)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    @property
    def url(self) -> str:
        """Base URL of the started server (loopback for wildcard binds)."""
        sock = self._server.sockets[0] if self._server is not None else None
        host = sock.getsockname()[0] if sock is not None else "127.0.0.1"
        return _base_url(host, self.port)

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
    def _dispatch(self, conn: _Conn, method: bytes, path: bytes, body: bytes,
                  arrival: int) -> None:
        handler = self._routes.get((method, path))
        try:
            if handler is None:
                if path in self._paths:
                    raise _HTTPError(405, f"method {method.decode()} not allowed on "
                                          f"{path.decode()}")
                raise _HTTPError(404, f"no route {path.decode('latin-1')}")
            key = self.config.api_key
            if key is not None and path.startswith(b"/v1/") and (
                    conn.auth != b"Bearer " + key.encode()):
                raise _HTTPError(401, "invalid or missing API key")
            handler(conn, body, arrival)
        except _HTTPError as err:
            conn.send(_http_response(err.status, _error_body(err.status, err.message)))
        except Exception as err:  # a bug or an input we did not foresee: answer, stay up
            _log.exception("llmbench sim: %s %s failed", method.decode(), path.decode())
            if conn.busy and conn.gen is None:
                conn.send(_http_response(500, _error_body(500, f"sim error: {err!r}")))

    def _json_body(self, body: bytes) -> dict[str, Any]:
        try:
            obj = json.loads(body)
        except (ValueError, UnicodeDecodeError) as err:
            raise _HTTPError(400, f"request body is not valid JSON: {err}") from None
        if not isinstance(obj, dict):
            raise _HTTPError(400, "request body must be a JSON object")
        return obj

    def _check_model(self, req: dict[str, Any]) -> None:
        model = req.get("model")
        if model is not None and model != self.config.model:
            raise _HTTPError(404, f"The model `{model}` does not exist.")

    @staticmethod
    def _chat_parts(req: dict[str, Any]) -> list[str]:
        messages = req.get("messages")
        if not isinstance(messages, list) or not messages:
            raise _HTTPError(400, "'messages' must be a non-empty list")
        parts = []
        for m in messages:
            if not isinstance(m, dict):
                raise _HTTPError(400, "each message must be an object")
            parts.append(_text_of_content(m.get("content")))
        # Content only, no chat template: a client's synthetic prompt of N tokens is N.
        return parts

    def _chat(self, conn: _Conn, body: bytes, arrival: int) -> None:
        req = self._json_body(body)
        self._check_model(req)
        tokens = sum(self._tok.count(p) for p in self._chat_parts(req))
        tokens += self.config.chat_template_tokens
        self._generate(conn, req, tokens, arrival, chat=True)

    def _completions(self, conn: _Conn, body: bytes, arrival: int) -> None:
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
                raise _HTTPError(400, "the sim accepts one prompt per request")
        if not isinstance(prompt, str):
            raise _HTTPError(400, "'prompt' must be a string")
        self._generate(conn, req, self._tok.count(prompt), arrival, chat=False)

    def _generate(self, conn: _Conn, req: dict[str, Any], prompt_tokens: int, arrival: int,
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
                raise _HTTPError(429, "simulated rate limit (--error-rate-429)")
            if r < cfg.error_rate_429 + cfg.error_rate_500:
                rec.status = "error_500"
                self._add_record(rec)
                raise _HTTPError(500, "simulated server error (--error-rate-500)")
        max_tokens = req.get("max_completion_tokens")
        if max_tokens is None:
            max_tokens = req.get("max_tokens")
        if max_tokens is None:
            max_tokens = max(1, min(cfg.default_max_tokens, cfg.max_model_len - prompt_tokens))
        min_tokens = req.get("min_tokens") or 0
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise _HTTPError(400, "max_tokens must be an integer >= 1")
        if not isinstance(min_tokens, int) or min_tokens < 0 or min_tokens > max_tokens:
            raise _HTTPError(400, "min_tokens must be an integer within [0, max_tokens]")
        if prompt_tokens + max_tokens > cfg.max_model_len:
            raise _HTTPError(400, f"This model's maximum context length is "
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
        gen = _Gen(self, conn, rec, stream, chat, n, finish, include_usage)
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
            conn.transport.write(_SSE_HEAD)  # type: ignore[union-attr]

    def _admit_waiting(self, now: int) -> None:
        cfg = self.config
        while self._waiting and (not cfg.max_num_seqs or self._running < cfg.max_num_seqs):
            gen = self._waiting.popleft()
            self._running += 1
            self._running_gens.add(gen)
            gen.admit(now)

    # simple endpoints ----------------------------------------------------------------------
    def _embeddings(self, conn: _Conn, body: bytes, arrival: int) -> None:
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
            raise _HTTPError(400, "'input' must be a string or a list of strings")
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
        payload = _http_response(200, _dumps(
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

    def _models(self, conn: _Conn, body: bytes, arrival: int) -> None:
        m = self.config.model
        conn.send(_http_response(200, _dumps({"object": "list", "data": [{
            "id": m, "object": "model", "created": int(time.time()), "owned_by": "llmbench",
            "root": m, "parent": None, "max_model_len": self.config.max_model_len,
            "permission": []}]}).encode()))

    def _tokenize(self, conn: _Conn, body: bytes, arrival: int) -> None:
        req = self._json_body(body)
        self._check_model(req)
        if "messages" in req:
            tokens = [t for part in self._chat_parts(req) for t in self._tok.encode(part)]
            tokens = [0] * self.config.chat_template_tokens + tokens  # template markers
        elif isinstance(req.get("prompt"), str):
            tokens = self._tok.encode(req["prompt"])
        else:
            raise _HTTPError(400, "give 'prompt' (string) or 'messages'")
        conn.send(_http_response(200, _dumps(
            {"count": len(tokens), "max_model_len": self.config.max_model_len,
             "tokens": tokens, "token_strs": None}).encode()))

    def _kv_usage(self) -> float:
        cfg = self.config
        cap = cfg.kv_cache_tokens or max(cfg.max_num_seqs, 256) * 2048
        used = sum(g.rec.prompt_tokens + g.sent for g in self._running_gens)
        return min(1.0, used / cap)

    def _metrics_endpoint(self, conn: _Conn, body: bytes, arrival: int) -> None:
        text = self._metrics.render(self.config.model, self._running, len(self._waiting),
                                    self._kv_usage())
        conn.send(_http_response(200, text, b"text/plain; version=0.0.4; charset=utf-8"))

    def load_fraction(self) -> float:
        """How busy the simulated GPU is: running sequences over the batch limit.

        Without ``--max-num-seqs`` the GPU counts as full at 64 sequences.
        """
        return min(1.0, self._running / (self.config.max_num_seqs or 64))

    def _dcgm_endpoint(self, conn: _Conn, body: bytes, arrival: int) -> None:
        assert self._dcgm is not None
        text = self._dcgm.metrics_text().encode()
        conn.send(_http_response(200, text, DCGM_CONTENT_TYPE.encode()))

    def _health(self, conn: _Conn, body: bytes, arrival: int) -> None:
        conn.send(_http_response(200, b""))

    def _version(self, conn: _Conn, body: bytes, arrival: int) -> None:
        conn.send(_http_response(200, b'{"version":"llmbench-sim"}'))

    def _get_records(self, conn: _Conn, body: bytes, arrival: int) -> None:
        """Ground truth as JSON; ``?since=ID`` returns only records with ``request_id >= ID``
        (request ids grow with arrival), so a benchmark fetches just its own window."""
        since = 0
        for item in conn.query.split(b"&"):
            key, _, value = item.partition(b"=")
            if key == b"since":
                try:
                    since = int(value)
                except ValueError:
                    raise _HTTPError(400, "since must be an integer request id") from None
        payload = {"clock": "perf_counter_ns", "pid": os.getpid(), "dropped": self._dropped,
                   "capacity": self._records.maxlen, "next_request_id": self._next_id,
                   "records": [_record_dict(r) for r in self._records
                               if r.request_id >= since]}
        conn.send(_http_response(200, _dumps(payload).encode()))

    def _reset(self, conn: _Conn, body: bytes, arrival: int) -> None:
        self.reset()
        conn.send(_http_response(200, b'{"reset":true}'))

    def _get_config(self, conn: _Conn, body: bytes, arrival: int) -> None:
        conn.send(_http_response(200, _dumps(asdict(self.config)).encode()))

    def _set_config(self, conn: _Conn, body: bytes, arrival: int) -> None:
        """Changes timing/fault knobs at run time, so one server can serve many scenarios."""
        req = self._json_body(body)
        mutable = {"ttft_ms", "ttft_jitter_ms", "itl_ms", "itl_jitter_ms", "itl_ms_per_seq",
                   "prefill_ms_per_token", "max_num_seqs", "tokens_per_chunk",
                   "max_events_per_write",
                   "natural_output_tokens", "default_max_tokens", "error_rate_429",
                   "error_rate_500", "disconnect_rate", "malformed_rate"}
        bad = sorted(set(req) - mutable)
        if bad:
            raise _HTTPError(400, f"not settable at run time: {', '.join(bad)}")
        merged = SimConfig(**{**asdict(self.config), **req})
        try:
            merged.validate()
        except (ValueError, TypeError) as err:
            raise _HTTPError(400, str(err)) from None
        self.config = merged
        self._admit_waiting(perf_counter_ns())
        conn.send(_http_response(200, _dumps(asdict(self.config)).encode()))


# --------------------------------------------------------------------------------------
# launchers
# --------------------------------------------------------------------------------------
def _base_url(host: str, port: int) -> str:
    """A URL a local client can use: wildcard binds become loopback, IPv6 gets brackets."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


def run_sim_in_thread(config: SimConfig | None = None, host: str = "127.0.0.1",
                      port: int = 0) -> tuple[str, Callable[[], None]]:
    """Runs a sim on its own loop in a daemon thread; returns ``(base_url, stop)``.

    For synchronous tests. The server object is ``stop.server`` (records, reset).
    """
    ready = threading.Event()
    state: dict[str, Any] = {}

    def main() -> None:
        loop = asyncio.new_event_loop()
        state["loop"] = loop
        server = SimServer(config)
        state["server"] = server
        try:
            state["port"] = loop.run_until_complete(server.start(host, port))
        except BaseException as err:  # reported to the caller below
            state["error"] = err
            ready.set()
            loop.close()
            return
        stopped = loop.create_future()
        state["stopped"] = stopped
        ready.set()
        loop.run_until_complete(stopped)
        loop.run_until_complete(server.stop())
        loop.close()

    thread = threading.Thread(target=main, name="llmbench-sim", daemon=True)
    thread.start()
    ready.wait(30)
    if "error" in state:
        raise state["error"]

    def stop() -> None:
        loop = state["loop"]
        fut = state["stopped"]
        if not loop.is_closed():
            loop.call_soon_threadsafe(lambda: _resolve(fut))
        thread.join(10)

    stop.server = state["server"]  # type: ignore[attr-defined]
    return _base_url(host, state["port"]), stop


@contextlib.contextmanager
def sim_in_thread(config: SimConfig | None = None) -> Iterator[tuple[str, SimServer]]:
    """``with sim_in_thread(cfg) as (url, server):`` for synchronous tests."""
    url, stop = run_sim_in_thread(config)
    try:
        yield url, stop.server  # type: ignore[attr-defined]
    finally:
        stop()


def spawn_sim(config_args: Sequence[str] = (), timeout: float = 30.0,
              env: dict[str, str] | None = None) -> tuple[str, subprocess.Popen[str]]:
    """Starts ``python -m llmbench.sim.server --port 0 ...`` in its own process.

    Returns the base URL once the server listens. The caller terminates the process
    (SIGTERM stops it cleanly). Benchmarks use this so client and server have separate
    interpreters and cores.
    """
    args = [sys.executable, "-m", "llmbench.sim.server", "--port", "0", *config_args]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, text=True, env=env)
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.startswith(_READY_PREFIX):
            url = line[len(_READY_PREFIX):].split()[0]
            # The sim prints nothing after this line; closing our end leaves no pipe to
            # drain and no file object for the caller to close.
            proc.stdout.close()
            return url, proc
    proc.kill()
    proc.wait()
    proc.stdout.close()
    raise RuntimeError(f"llmbench sim did not start (exit code {proc.returncode})")


async def _serve(config: SimConfig, port: int, reuse_port: bool, announce: bool) -> None:
    server = SimServer(config)
    bound = await server.start(config.host, port, reuse_port=reuse_port)
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, lambda: _resolve(stop))
    if announce:
        _announce(config, bound)
    await stop
    await server.stop()


def _announce(config: SimConfig, port: int) -> None:
    print(f"{_READY_PREFIX}{_base_url(config.host, port)} (model {config.model}, "
          f"workers {config.workers}, pid {os.getpid()})", flush=True)


def _worker(config: SimConfig, port: int, ready: Any) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent forwards SIGTERM

    async def main() -> None:
        server = SimServer(config)
        await server.start(config.host, port, reuse_port=True)
        ready.set()
        loop = asyncio.get_running_loop()
        stop = loop.create_future()
        loop.add_signal_handler(signal.SIGTERM, lambda: _resolve(stop))
        await stop
        await server.stop()

    asyncio.run(main())


def _run_workers(config: SimConfig) -> int:
    """N processes on one port via SO_REUSEPORT; the kernel spreads connections."""
    probe = socket.socket(socket.AF_INET6 if ":" in config.host else socket.AF_INET)
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    probe.bind((config.host, config.port))
    port = probe.getsockname()[1]
    ctx = mp.get_context("spawn")
    procs = []
    try:
        for _ in range(config.workers):
            ready = ctx.Event()
            p = ctx.Process(target=_worker, args=(config, port, ready), daemon=True)
            p.start()
            procs.append(p)
            if not ready.wait(60):
                raise RuntimeError("a sim worker did not start")
        probe.close()
        _announce(config, port)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(0.5):
            if not all(p.is_alive() for p in procs):
                print("llmbench sim: a worker exited", file=sys.stderr)
                return 1
        return 0
    finally:
        probe.close()
        for p in procs:
            if p.is_alive() and p.pid is not None:
                os.kill(p.pid, signal.SIGTERM)
        for p in procs:
            p.join(5)


def run(args: argparse.Namespace) -> int:
    """``llmbench sim``: serve until SIGINT/SIGTERM; prints the URL once listening."""
    try:
        config = SimConfig.from_args(args)
        _tokens(config.tokenizer)  # a bad --tokenizer is a usage error, not a traceback
    except ValueError as err:
        print(f"llmbench sim: error: {err}", file=sys.stderr)
        return 2
    try:
        if config.workers > 1:
            return _run_workers(config)
        asyncio.run(_serve(config, config.port, False, announce=True))
    except OSError as err:
        print(f"llmbench sim: cannot listen on {config.host}:{config.port}: {err}",
              file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m llmbench.sim.server``: the same as ``llmbench sim``."""
    parser = argparse.ArgumentParser(prog="llmbench sim", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
