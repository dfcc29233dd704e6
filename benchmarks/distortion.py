"""Measurement distortion: what clients report against what the server really did.

For each concurrency the sim injects a known TTFT and ITL and records, per request, when it
read the request and wrote the first and last token (its ground truth). The raw-socket
client and ``llmbench profile`` run against it in turn; the table shows each client's TTFT
and ITL means next to the server's record for the same requests.

    python benchmarks/distortion.py [--osl 200] [--requests-per-slot 4]

``--waves c64 c256`` runs the synchronized-wave scenarios instead: every slot starts at once
with no warm-up, so a whole wave's first tokens reach the client in the same few
milliseconds, the moment a slow client loop stamps late. In each repetition the raw-socket
client on uvloop (the floor), ``llmbench --event-loop asyncio`` and ``llmbench --event-loop
uvloop`` take turns against one sim; the table shows, per client, the median over
``--repeat`` runs of its TTFT mean above the sim's own record of the same requests, the sim's
TTFT under that client's load (a busy client slows a server on the same CPUs) and the
client's CPU seconds.

Every run is a new client process, so its connections are fresh: the first wave meets a
server that has not served on them yet. The last column splits each client's excess per wave
(``send/recv`` ms, the means of the wave's requests, :func:`harness.wave_split`): the send
side is the sim's read of the request head minus the client's send stamp (a stamp taken
before the connection was open, or on one the server had not yet accepted, shows here), the
receive side the client's first-token stamp minus the sim's write of the first token (a
busy client loop shows here). Both are ``CLOCK_MONOTONIC`` on this host; their sum is the
TTFT excess.

    python benchmarks/distortion.py --waves c64 c256 --repeat 3 [--baseline DIR ...]
"""

from __future__ import annotations

import argparse
import os
import statistics
from typing import Any

from harness import (
    llmbench_profile,
    raw_client,
    reset_truth,
    server_truth,
    settle,
    start_sim,
    stop_sim,
    wave_split,
)

#: (concurrency, TTFT ms, ITL ms): the issue's operating points.
POINTS = [(1, 50, 5), (64, 50, 10), (64, 50, 5), (256, 50, 5), (512, 50, 5)]

#: Synchronized-wave scenarios (issue 9): concurrency, TTFT ms, ITL ms, OSL, ISL, requests
#: (three waves at c64, six at c256), ignore_eos, no warm-up.
WAVES: dict[str, dict[str, int]] = {
    "c64": {"c": 64, "ttft": 50, "itl": 10, "osl": 100, "isl": 200, "n": 192},
    "c256": {"c": 256, "ttft": 50, "itl": 5, "osl": 256, "isl": 200, "n": 1536},
}
CLIENTS = ("raw uvloop", "llmbench asyncio", "llmbench uvloop")
#: ``--baseline DIR ...``: other llmbench packages (before a change), each run as one more
#: client named ``llmbench @DIR`` (the folder's name), client name -> folder.
BASELINE: dict[str, str] = {}


def _wave_run(url: str, client: str, w: dict[str, int]) -> dict[str, Any]:
    """One run of ``client`` on fresh connections (a new process): its TTFT mean above the
    sim's for the same requests, the send/receive split per wave, CPU seconds."""
    reset_truth(url)
    if client == "raw uvloop":
        r = raw_client(url, w["c"], w["n"], w["osl"], "rawclient.py", "--loop", "uvloop",
                       "--isl", str(w["isl"]))
        ttft, itl, cpu, stamps = r["ttft_mean_ms"], None, r["cpu_s"], r["stamps"]
    else:
        code = BASELINE.get(client)
        loop = "uvloop" if code else client.split()[1]
        s = llmbench_profile(url, w["c"], w["n"], w["osl"], "--event-loop", loop,
                             "--warmup-request-count", "0", isl=w["isl"], code=code)
        if s["errors"]["total"]:
            raise RuntimeError(f"{client} saw errors: {s['errors']}")
        ttft, itl, cpu, stamps = (s["time_to_first_token"]["avg"],
                                  s["inter_token_latency"]["avg"], s["_cpu_s"], s["_stamps"])
    truth = server_truth(url, w["osl"])
    settle()
    out: dict[str, Any] = {"err": ttft - truth["ttft_mean_ms"],
                           "server_ttft": truth["ttft_mean_ms"], "ttft": ttft, "cpu": cpu,
                           "waves": wave_split(stamps, truth["records"], w["c"])}
    if itl is not None:
        out["itl_err"] = itl / truth["itl_mean_ms"] - 1
    return out


def waves(names: list[str], repeat: int) -> None:
    print(f"{'scenario':<9}{'client':<18}{'TTFT-truth ms':>14}{'(each run)':>20}"
          f"{'sim TTFT':>10}{'CPU s':>7}{'ITL err':>9}  send/recv ms per wave"
          f"   median of {repeat}, same sim")
    for name in names:
        w = WAVES[name]
        url, sim = start_sim("--ttft-ms", str(w["ttft"]), "--itl-ms", str(w["itl"]))
        clients = CLIENTS + tuple(BASELINE)
        runs: dict[str, list[dict[str, Any]]] = {c: [] for c in clients}
        try:
            for rep_i in range(repeat):
                k = rep_i % len(clients)
                for client in clients[k:] + clients[:k]:  # no client always first
                    runs[client].append(_wave_run(url, client, w))
        finally:
            stop_sim(sim)
        for client in clients:
            rs = runs[client]

            def med(key: str, rs: list[dict[str, Any]] = rs) -> float:
                return statistics.median(r[key] for r in rs)

            each = "/".join(f"{r['err']:+.1f}" for r in rs)
            itl = f"{med('itl_err'):>+9.2%}" if "itl_err" in rs[0] else f"{'':>9}"
            split = " ".join(
                f"{statistics.median(r['waves'][i][0] for r in rs):.1f}/"
                f"{statistics.median(r['waves'][i][1] for r in rs):.2f}"
                for i in range(len(rs[0]["waves"])))
            print(f"{name:<9}{client:<18}{med('err'):>+14.2f}{each:>20}"
                  f"{med('server_ttft'):>10.2f}{med('cpu'):>7.2f}{itl}  {split}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--osl", type=int, default=200)
    p.add_argument("--requests-per-slot", type=int, default=4)
    p.add_argument("--min-requests", type=int, default=64)
    p.add_argument("--concurrency", type=int, nargs="+", help="only these operating points")
    p.add_argument("--waves", nargs="*", choices=sorted(WAVES),
                   help="run the synchronized-wave scenarios instead (all when none named)")
    p.add_argument("--repeat", type=int, default=3, help="runs per client in --waves")
    p.add_argument("--baseline", metavar="DIR", nargs="+", default=[],
                   help="with --waves, also run the llmbench package in each DIR (e.g. from "
                   "`git archive HEAD llmbench | tar -x -C DIR`) as 'llmbench @DIR' (uvloop)")
    a = p.parse_args()
    for d in a.baseline:
        BASELINE[f"llmbench @{os.path.basename(os.path.normpath(d))}"[:17]] = d
    if a.waves is not None:
        waves(a.waves or sorted(WAVES), a.repeat)
        return
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
