"""``llmbench sim``: a fast OpenAI-compatible server with known latencies, the test oracle.

Why a module of its own: the command line is thin and shared. ``llmbench.cli`` imports this
module lazily from its subcommand table and calls ``add_arguments`` and ``run``;
``python -m llmbench.sim`` calls ``main``. Every flag's destination is
``sim_<SimConfig field>``, so ``SimConfig.from_args`` needs no mapping table.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

from llmbench.sim.config import REASONING_FIELDS, SimConfig
from llmbench.sim.launch import run_workers, serve
from llmbench.sim.tokens import get_tokens

__all__ = ["add_arguments", "main", "run"]


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
    o.add_argument("--reasoning-tokens", dest="sim_reasoning_tokens", type=int,
                   default=d.reasoning_tokens,
                   help="the first N output tokens of each chat answer go out as reasoning "
                        "deltas, the rest as content, as a reasoning parser splits them "
                        "(default 0: no reasoning)")
    o.add_argument("--reasoning-field", dest="sim_reasoning_field", default=d.reasoning_field,
                   choices=REASONING_FIELDS,
                   help="the delta key of reasoning text: vLLM/SGLang's reasoning_content "
                        "or OpenAI-style reasoning (default %(default)s)")
    o.add_argument("--no-reasoning-usage", dest="sim_reasoning_usage", action="store_false",
                   help="leave completion_tokens_details.reasoning_tokens out of the usage, "
                        "as servers that do not count reasoning there (clients must count "
                        "the reasoning text themselves)")
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


def run(args: argparse.Namespace) -> int:
    """``llmbench sim``: serve until SIGINT/SIGTERM; prints the URL once listening."""
    try:
        config = SimConfig.from_args(args)
        get_tokens(config.tokenizer)  # a bad --tokenizer is a usage error, not a traceback
    except ValueError as err:
        print(f"llmbench sim: error: {err}", file=sys.stderr)
        return 2
    try:
        if config.workers > 1:
            return run_workers(config)
        asyncio.run(serve(config, config.port, False, announce=True))
    except OSError as err:
        print(f"llmbench sim: cannot listen on {config.host}:{config.port}: {err}",
              file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m llmbench.sim``: the same as ``llmbench sim``."""
    parser = argparse.ArgumentParser(prog="llmbench sim", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))
