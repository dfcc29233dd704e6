"""The server dies mid-run: the runner's memory, records and exit, as a user meets them.

``llmbench profile --concurrency 8 --measurement-duration 40`` runs against ``llmbench sim``,
which is killed ``--kill-after`` seconds in. The runner's RSS is sampled every 0.25 s; the
script prints it before and after the kill, how long the runner took to give up, its exit
code and reason, and what it wrote (records, connect errors counted and kept, file sizes).

    python benchmarks/server_killed.py [--kill-after 4] [--concurrency 8]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
from harness import start_sim


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kill-after", type=float, default=4.0)
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--duration", type=float, default=40.0)
    a = p.parse_args()
    url, sim = start_sim("--ttft-ms", "2", "--itl-ms", "1")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "llmbench", "profile", "--url", url, "--concurrency",
               str(a.concurrency), "--measurement-duration", str(a.duration),
               "--output-tokens-mean", "20", "--extra-inputs", "ignore_eos:true",
               "--artifact-dir", tmp]
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        ps = psutil.Process(proc.pid)
        started = time.monotonic()
        killed_at = None
        samples: list[tuple[float, float]] = []
        while proc.poll() is None and time.monotonic() - started < 300:
            now = time.monotonic() - started
            try:
                samples.append((now, ps.memory_info().rss / 2**20))
            except psutil.Error:
                break
            if killed_at is None and now >= a.kill_after:
                sim.kill()
                sim.wait(10)
                killed_at = now
            time.sleep(0.25)
        _, err = proc.communicate(timeout=60)
        ended = time.monotonic() - started
        before = max((r for t, r in samples if killed_at is None or t < killed_at), default=0)
        after = [r for t, r in samples if killed_at is not None and t >= killed_at]
        files = {f.name: f.stat().st_size for f in Path(tmp).rglob("*") if f.is_file()}
        found = list(Path(tmp).rglob("*_genai_perf.json"))
        ours = json.loads(found[0].read_text()).get("llmbench", {}) if found else {}
        records = sum(
            len(f.read_text().splitlines()) for f in Path(tmp).rglob("*_llmbench_requests.jsonl")
        )
    connect = ours.get("errors", {}).get("by_type", {}).get("connect", {})
    print(f"exit code {proc.returncode} after {ended:.1f} s "
          f"({ended - (killed_at or 0):.1f} s after the kill at {killed_at or 0:.1f} s)")
    print(f"RSS before the kill {before:.0f} MB; after: peak {max(after, default=0):.0f} MB, "
          f"last {after[-1] if after else 0:.0f} MB")
    print(f"reason: {ours.get('stop_reason')}")
    print(f"records written {records}; connect errors counted {connect.get('count', 0)}, "
          f"without a record {connect.get('unrecorded', 0)}; completed "
          f"{ours.get('window', {}).get('completed_requests')}")
    print("files: " + ", ".join(f"{k} {v / 1024:.0f} KiB" for k, v in sorted(files.items())))
    print("stderr tail: " + " | ".join(err.strip().splitlines()[-2:]))


if __name__ == "__main__":
    main()
