"""The built-in OpenAI-compatible simulator and its simulated dcgm-exporter (the test oracle).

Why it exists: a benchmark client can only be checked against a server whose behaviour is
known exactly. The simulator injects TTFT, ITL, prefill cost, a concurrency limit with FIFO
queueing, multi-token chunks and faults, and records per request what it really did
(arrival, first and last token written, token counts) so client-side numbers can be compared
with what happened on the wire rather than with the configured delays.

It is independent of the runner it checks: it imports ``llmbench.tokenizer`` (shared, so
both sides count tokens alike) and nothing from the runner. Modules, lowest first:

* ``config``: ``SimConfig``, every knob;
* ``tokens``: prompt token counts and the output vocabulary;
* ``records``: ``SimRecord``, the ground truth per request;
* ``metrics``: the vLLM-named ``/metrics`` counters and histograms;
* ``dcgm``: the simulated dcgm-exporter (``--dcgm``);
* ``wire``: HTTP plumbing on raw ``asyncio.Protocol``;
* ``generation``: one completion on its deadlines (the timing model);
* ``server``: ``SimServer``, routes, endpoints, queueing and fault injection;
* ``launch``: the server in a thread, a child process or N worker processes;
* ``cli``: ``llmbench sim`` and ``python -m llmbench.sim``.

The names tests and benchmarks use are re-exported here.
"""

from llmbench.sim.config import SimConfig
from llmbench.sim.launch import run_sim_in_thread, sim_in_thread, spawn_sim
from llmbench.sim.records import SimRecord
from llmbench.sim.server import SimServer
from llmbench.sim.tokens import output_words

__all__ = [
    "SimConfig",
    "SimRecord",
    "SimServer",
    "output_words",
    "run_sim_in_thread",
    "sim_in_thread",
    "spawn_sim",
]
