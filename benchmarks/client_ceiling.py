"""Client ceiling: output tokens/s one client ingests from ``llmbench sim`` with zero delays.

Prints, per concurrency (64, 256, 1024), the raw-socket reference, ``llmbench profile``
(1 and 2 worker processes) and their ratio, with each client's CPU seconds and peak RSS.
The sim runs in its own process; all numbers come from one run on one machine.

    python benchmarks/client_ceiling.py [--osl 200] [--requests-per-slot 8]
"""

from __future__ import annotations

import argparse

from harness import llmbench_profile, raw_client, settle, start_sim, stop_sim


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--osl", type=int, default=200)
    p.add_argument("--requests-per-slot", type=int, default=8)
    p.add_argument("--min-requests", type=int, default=0, help="per run, for longer runs")
    p.add_argument("--concurrency", type=int, nargs="+", default=[64, 256, 1024])
    p.add_argument("--sim-workers", type=int, default=1)
    a = p.parse_args()
    url, sim = start_sim("--ttft-ms", "0", "--itl-ms", "0", "--max-records", "0",
                         "--workers", str(a.sim_workers))
    print(f"{'client':<22}{'conc':>6}{'tok/s':>12}{'vs raw':>9}{'CPU s':>8}{'RSS MB':>8}")
    try:
        for c in a.concurrency:
            n = max(a.min_requests, c * a.requests_per_slot)
            raw = raw_client(url, c, n, a.osl)
            print(f"{'raw socket':<22}{c:>6}{raw['tokens_per_s']:>12,.0f}{'100%':>9}"
                  f"{raw['cpu_s']:>8.1f}{raw['rss_mb']:>8.0f}")
            settle()
            hx = raw_client(url, c, n, a.osl, script="httpxclient.py")
            print(f"{'httpx (no parsing)':<22}{c:>6}{hx['tokens_per_s']:>12,.0f}"
                  f"{hx['tokens_per_s'] / raw['tokens_per_s']:>9.0%}{hx['cpu_s']:>8.1f}"
                  f"{hx['rss_mb']:>8.0f}")
            settle()
            for workers in (1, 2):
                s = llmbench_profile(url, c, n, a.osl, "--workers", str(workers))
                ott = s["output_token_throughput"]["avg"]
                errors = s["errors"]["total"]
                print(f"{f'llmbench workers={workers}':<22}{c:>6}{ott:>12,.0f}"
                      f"{ott / raw['tokens_per_s']:>9.0%}{s['_cpu_s']:>8.1f}{s['_rss_mb']:>8.0f}"
                      + (f"  errors={errors}" if errors else ""))
                settle()
    finally:
        stop_sim(sim)


if __name__ == "__main__":
    main()
