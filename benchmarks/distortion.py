"""Measurement distortion: what clients report against what the server really did.

For each concurrency the sim injects a known TTFT and ITL and records, per request, when it
read the request and wrote the first and last token (its ground truth). The raw-socket
client and ``llmbench profile`` run against it in turn; the table shows each client's TTFT
and ITL means next to the server's record for the same requests.

    python benchmarks/distortion.py [--osl 200] [--requests-per-slot 4]
"""

from __future__ import annotations

import argparse

from harness import (
    llmbench_profile,
    raw_client,
    reset_truth,
    server_truth,
    settle,
    start_sim,
    stop_sim,
)

#: (concurrency, TTFT ms, ITL ms): the issue's operating points.
POINTS = [(1, 50, 5), (64, 50, 10), (64, 50, 5), (256, 50, 5), (512, 50, 5)]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--osl", type=int, default=200)
    p.add_argument("--requests-per-slot", type=int, default=4)
    p.add_argument("--min-requests", type=int, default=64)
    p.add_argument("--concurrency", type=int, nargs="+", help="only these operating points")
    a = p.parse_args()
    print(f"{'conc':>5}{'TTFT/ITL set':>14} | {'server TTFT':>11}{'raw TTFT':>10}{'llmb TTFT':>10}"
          f"{'llmb-raw':>9} | {'server ITL':>10}{'llmb ITL':>9}{'ITL err':>8}")
    for c, ttft, itl in POINTS:
        if a.concurrency and c not in a.concurrency:
            continue
        url, sim = start_sim("--ttft-ms", str(ttft), "--itl-ms", str(itl))
        try:
            n = max(a.min_requests, c * a.requests_per_slot)
            reset_truth(url)
            raw = raw_client(url, c, n, a.osl)
            truth_raw = server_truth(url)
            settle()
            reset_truth(url)
            s = llmbench_profile(url, c, n, a.osl)
            truth = server_truth(url)
        finally:
            stop_sim(sim)
        lt = s["time_to_first_token"]["avg"]
        li = s["inter_token_latency"]["avg"]
        print(f"{c:>5}{f'{ttft}/{itl} ms':>14} | {truth['ttft_mean_ms']:>11.2f}"
              f"{raw['ttft_mean_ms']:>10.2f}{lt:>10.2f}{lt - raw['ttft_mean_ms']:>+9.2f} | "
              f"{truth['itl_mean_ms']:>10.3f}{li:>9.3f}{li / truth['itl_mean_ms'] - 1:>+8.2%}"
              f"   (raw run server TTFT {truth_raw['ttft_mean_ms']:.2f})")


if __name__ == "__main__":
    main()
