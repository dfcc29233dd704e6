"""The runner's memory, phase by phase: one DEBUG line per phase of a point.

Why: the peak RSS of a profile is the sum of what each phase leaves behind (imports, the
prepared workload, the kept responses, the decoded records, the exports, the plots), and only
a figure per phase says which one to cut. ``llmbench -v profile`` prints them;
``benchmarks/client_ceiling.py --phases`` collects them from there.
"""

from __future__ import annotations

import logging
import os
import resource

__all__ = ["note_memory"]

log = logging.getLogger("llmbench.memory")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def note_memory(phase: str) -> None:
    """Logs (DEBUG) this process's resident memory now and its peak so far, in MB."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            rss = int(f.read().split()[1]) * _PAGE
    except OSError:  # not Linux: the peak alone
        rss = 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    log.debug("memory after %s: rss %.1f MB, peak %.1f MB", phase, rss / 2**20, peak / 2**20)
