"""How long does the ``llmbench`` command take to start? (Subcommands are imported lazily.)

Prints the median wall time of ``--repeat`` runs of a few command lines that do no I/O:
``--version``, ``crd`` and ``profile --help`` (which imports the runner).

    .venv/bin/python benchmarks/cli_startup.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

EXE = Path(sys.executable).parent / "llmbench"
LINES = (["--version"], ["crd"], ["profile", "--help"], ["sim", "--help"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    print(f"{'command':28} {'median s':>9}")
    for words in LINES:
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            subprocess.run([str(EXE), *words], capture_output=True, check=True)
            times.append(time.perf_counter() - t0)
        print(f"{'llmbench ' + ' '.join(words):28} {statistics.median(times):9.3f}")


if __name__ == "__main__":
    main()
