"""What a finished response costs the event loop once the undecoded-response budget is spent.

Three ways to keep memory bounded while requests are in flight (issue 9, section 5), each
measured as CPU time on the loop per finished response (a chat stream of ``--osl`` tokens,
one SSE event per chunk and per read, as the sim and vLLM send them):

* spill: pickle the arrival-stamped pieces into an unlinked temporary file, keep the offset
  (what the runner does);
* decode: SSE + JSON decoding into the record (the old behaviour did it for half the buffer
  at once; in bounded slices between reads the total per response is the same);
* hand-off: pickle the pieces for another process (the pipe write, the other process's
  decoding CPU on a shared node and the records' way back not counted).

    python benchmarks/overflow_cost.py [--osl 256] [--responses 2000]
"""

from __future__ import annotations

import argparse
import pickle
import time

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.responses import fill_record
from llmbench.runner.client.transport import Exchange
from llmbench.runner.load.buffer import Spill


def _exchange(osl: int) -> Exchange:
    ex = Exchange(status=200, chunked=True)
    ex.headers = {"content-type": "text/event-stream", "transfer-encoding": "chunked"}
    t = 1_000_000
    for i in range(osl):
        event = (b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,'
                 b'"model":"m","choices":[{"index":0,"delta":{"content":" w%d"},'
                 b'"finish_reason":null}]}\n\n' % i)
        ex.pieces.append((t + i, b"%x\r\n%s\r\n" % (len(event), event)))
    tail = (b'data: {"choices":[],"usage":{"prompt_tokens":200,"completion_tokens":%d}}\n\n'
            b"data: [DONE]\n\n" % osl)
    ex.pieces.append((t + osl, b"%x\r\n%s\r\n0\r\n\r\n" % (len(tail), tail)))
    ex.size = sum(len(p) for _, p in ex.pieces)
    return ex


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--osl", type=int, default=256)
    p.add_argument("--responses", type=int, default=2000)
    a = p.parse_args()
    template = _exchange(a.osl)
    size = template.size
    results = {}

    exs = [_exchange(a.osl) for _ in range(a.responses)]
    spill = Spill()
    t0 = time.process_time()
    for ex in exs:
        spill.park(ex)
    results["spill to a file"] = time.process_time() - t0
    spill.close()

    exs = [_exchange(a.osl) for _ in range(a.responses)]
    t0 = time.process_time()
    for ex in exs:
        fill_record(RequestRecord(index=0), ex, "chat")
    results["decode on the loop"] = time.process_time() - t0

    exs = [_exchange(a.osl) for _ in range(a.responses)]
    t0 = time.process_time()
    for ex in exs:
        pickle.dumps(ex.pieces, protocol=pickle.HIGHEST_PROTOCOL)
    results["pickle for a process"] = time.process_time() - t0

    print(f"{a.responses} responses of {a.osl} tokens ({size / 1024:.0f} KiB each), "
          "CPU on the loop per response:")
    for name, cpu in results.items():
        print(f"  {name:<22}{cpu / a.responses * 1e6:>9.0f} µs")


if __name__ == "__main__":
    main()
