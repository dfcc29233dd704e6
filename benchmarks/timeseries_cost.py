"""What does cutting a point into time-series slices cost after the run?

Builds ``--requests`` synthetic records of ``--chunks`` content chunks each (one sent every
millisecond, chunks 5 ms apart) and prints the median wall time of ``--repeat`` calls of
``build_timeseries`` with 1 s slices, and the slices' token sum as a check.

    .venv/bin/python benchmarks/timeseries_cost.py [--requests 100000] [--chunks 256] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import time

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.point.timeseries import build_timeseries

MS = 1_000_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--chunks", type=int, default=256)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    records = []
    for i in range(args.requests):
        sent = i * MS
        chunks = list(range(sent + 20 * MS, sent + 20 * MS + args.chunks * 5 * MS, 5 * MS))
        records.append(RequestRecord(index=i, sent_ns=sent, first_token_ns=chunks[0],
                                     last_token_ns=chunks[-1], chunk_ns=chunks,
                                     output_tokens=args.chunks))
    times = []
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        series = build_timeseries(records, None, interval_s=1.0)
        times.append(time.perf_counter() - t0)
    assert series is not None
    tokens = sum(s.output_tokens for s in series.timeslices)
    print(f"{args.requests} requests x {args.chunks} chunks: {len(series.timeslices)} slices, "
          f"median {statistics.median(times):.2f} s of {args.repeat}, tokens {tokens:.0f}")


if __name__ == "__main__":
    main()
