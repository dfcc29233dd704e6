"""``GET /metrics``: vLLM-named Prometheus counters, gauges and histograms.

Why a module of its own: the telemetry code is tested against the sim as if it were vLLM,
so the metric names, help texts and bucket boundaries must be vLLM's; keeping them here
keeps that compatibility surface in one place. Observing is cheap (a bisect and three adds);
text is rendered only when scraped.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence

__all__ = ["Metrics"]


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


class Metrics:
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
