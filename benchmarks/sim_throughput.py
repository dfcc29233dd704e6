"""How many output tokens/s can ``llmbench sim`` serve? (It must never be the bottleneck.)

Starts the sim in its own process with zero TTFT/ITL and drives it with a minimal
raw-socket streaming client (asyncio streams, one keep-alive connection per slot, counting
``data:`` events) at several concurrencies. Prints tokens/s read by the client, requests/s,
and the CPU the sim process used (a sim near 100 % of one core is the limit of one worker).

    .venv/bin/python benchmarks/sim_throughput.py [--duration 5] [--osl 256]
        [--concurrency 64 256 1024] [--workers 1] [--tokens-per-chunk 1]

A second table runs the sim paced (TTFT 50 ms, ITL 5 ms, OSL 200, the issue's distortion
points) and reports, from the sim's own ground-truth records, how late it wrote first tokens
and what ITL it really produced: the error the oracle itself contributes at that load.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import time
from urllib.parse import urlsplit

import httpx
import numpy as np

from llmbench.sim import spawn_sim

_TAIL = b"0\r\n\r\n"


def _proc_cpu_s(pid: int) -> float:
    """User+system CPU seconds of a process (and its reaped children) from /proc."""
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(x) for x in parts[11:15]) / ticks


async def _slot(host: str, port: int, payload: bytes, stop_at: float,
                totals: list[int]) -> None:
    reader, writer = await asyncio.open_connection(host, port)
    loop = asyncio.get_running_loop()
    try:
        while loop.time() < stop_at:
            writer.write(payload)
            events = 0
            tail = b""
            while True:
                data = await reader.read(262144)
                if not data:
                    raise ConnectionError("sim closed the connection")
                # Count across read boundaries by keeping the last 5 bytes.
                joined = tail + data
                events += joined.count(b"data:") - tail.count(b"data:")
                tail = joined[-5:]
                if joined.endswith(_TAIL):
                    break
            totals[0] += events - 3  # role chunk, finish chunk, [DONE]
            totals[1] += 1
    finally:
        writer.close()


async def _point(url: str, concurrency: int, osl: int, duration: float) -> tuple[int, int,
                                                                                  float]:
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    body = json.dumps({"model": "llmbench-sim", "stream": True, "max_tokens": osl,
                       "ignore_eos": True,
                       "messages": [{"role": "user", "content": "hello"}]}).encode()
    payload = (f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}:{port}\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
               ).encode() + body
    totals = [0, 0]
    loop = asyncio.get_running_loop()
    # Warm-up: connections opened, one request each, not counted.
    start = loop.time()
    await asyncio.gather(*(_slot(host, port, payload, start + 0.3, [0, 0])
                           for _ in range(min(concurrency, 64))))
    start = loop.time()
    await asyncio.gather(*(_slot(host, port, payload, start + duration, totals)
                           for _ in range(concurrency)))
    elapsed = loop.time() - start
    return totals[0], totals[1], elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--duration", type=float, default=5.0)
    ap.add_argument("--osl", type=int, default=256)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[64, 256, 1024])
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--tokens-per-chunk", type=int, default=1)
    ap.add_argument("--max-events-per-write", type=int, nargs="+", default=[0, 1],
                    help="sim burst caps to measure (0 = no cap, 1 = one event per write)")
    ap.add_argument("--paced-concurrency", type=int, nargs="*", default=[1, 64, 256, 512],
                    help="concurrencies for the paced table (none: skip it)")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 8192)), hard))
    print(f"zero TTFT/ITL, OSL {args.osl}, sim workers {args.workers}, "
          f"tokens/chunk {args.tokens_per_chunk}, {os.cpu_count()} CPUs, "
          f"{args.duration:.0f} s per point; load average {os.getloadavg()[0]:.2f}")
    print("sim CPU/token is the cost that matters on a shared machine: 1e6 / it is the "
          "tokens/s one sim core can serve")
    print(f"{'events/write':>12} {'concurrency':>11} {'tokens/s':>10} {'requests/s':>10} "
          f"{'sim CPU':>8} {'sim us/token':>12} {'client CPU':>10}")
    for burst in args.max_events_per_write:
        url, proc = spawn_sim(["--ttft-ms", "0", "--itl-ms", "0", "--max-num-seqs", "0",
                               "--workers", str(args.workers), "--max-records", "10000",
                               "--tokens-per-chunk", str(args.tokens_per_chunk),
                               "--max-events-per-write", str(burst)])
        try:
            for conc in args.concurrency:
                sim_cpu0 = _sim_cpu(proc.pid, args.workers)
                me0 = time.process_time()
                tokens, requests, elapsed = asyncio.run(
                    _point(url, conc, args.osl, args.duration))
                sim_s = _sim_cpu(proc.pid, args.workers) - sim_cpu0
                me = (time.process_time() - me0) / elapsed
                print(f"{burst or 'no cap':>12} {conc:>11} {tokens / elapsed:>10.0f} "
                      f"{requests / elapsed:>10.1f} {sim_s / elapsed:>7.0%} "
                      f"{1e6 * sim_s / max(tokens, 1):>12.2f} {me:>10.0%}", flush=True)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(10)
    if args.paced_concurrency:
        _paced(args)


def _paced(args: argparse.Namespace) -> None:
    ttft, itl, osl = 50.0, 5.0, 200
    print(f"\npaced: TTFT {ttft:.0f} ms, ITL {itl:.0f} ms, OSL {osl}; ground truth from the "
          "sim's records (first token lateness = first written - (admitted + TTFT))")
    print(f"{'concurrency':>11} {'tokens/s':>10} {'sim CPU':>8} {'late mean':>10} "
          f"{'late p99':>9} {'ITL mean':>9} {'ITL err':>8}")
    url, proc = spawn_sim(["--ttft-ms", str(ttft), "--itl-ms", str(itl), "--max-num-seqs", "0",
                           "--max-records", "1000000"])
    try:
        for conc in args.paced_concurrency:
            since = httpx.get(url + "/sim/records?since=999999999").json()["next_request_id"]
            cpu0 = _proc_cpu_s(proc.pid)
            tokens, _, elapsed = asyncio.run(_point(url, conc, osl, args.duration))
            cpu = (_proc_cpu_s(proc.pid) - cpu0) / elapsed
            recs = httpx.get(f"{url}/sim/records?since={since}", timeout=60).json()["records"]
            recs = [r for r in recs if r["status"] == "ok" and r["output_tokens"] == osl]
            late = np.array([(r["first_token_ns"] - r["admitted_ns"]) / 1e6 - ttft
                             for r in recs])
            itls = np.array([(r["last_token_ns"] - r["first_token_ns"]) / 1e6 / (osl - 1)
                             for r in recs])
            print(f"{conc:>11} {tokens / elapsed:>10.0f} {cpu:>7.0%} {late.mean():>8.2f}ms "
                  f"{np.percentile(late, 99):>7.2f}ms {itls.mean():>7.3f}ms "
                  f"{(itls.mean() - itl) / itl:>+7.2%}", flush=True)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)


def _sim_cpu(pid: int, workers: int) -> float:
    if workers == 1:
        return _proc_cpu_s(pid)
    total = _proc_cpu_s(pid)
    try:
        children = open(f"/proc/{pid}/task/{pid}/children").read().split()
    except OSError:
        children = []
    for child in children:
        try:
            total += _proc_cpu_s(int(child))
        except OSError:
            pass
    return total


if __name__ == "__main__":
    main()
