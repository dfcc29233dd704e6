"""The test cluster's processes: liveness, memory, and stopping them by PID.

Every component runs in its own session (process group), so stopping one signals its whole
group; nothing is ever stopped by name.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

__all__ = ["alive", "die_with_parent", "rss_bytes", "signal_group", "stop_pids"]


def rss_bytes(pid: int) -> int:
    """Resident set size of pid plus all its descendants (Linux /proc)."""
    total = 0
    todo = [pid]
    seen: set[int] = set()
    while todo:
        p = todo.pop()
        if p in seen:
            continue
        seen.add(p)
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for tid in os.listdir(f"/proc/{p}/task"):
                children = Path(f"/proc/{p}/task/{tid}/children").read_text().split()
                todo.extend(int(c) for c in children)
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return total


def die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except (FileNotFoundError, IndexError):
        return False


def stop_pids(pids: dict[str, int], grace: float = 10.0) -> None:
    """SIGTERM in reverse start order (kubelet first, etcd last), then SIGKILL stragglers.

    Every component runs in its own session, so its whole process group is signalled."""
    order = list(pids.items())[::-1]
    for _name, pid in order:
        signal_group(pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if alive(pid):
            signal_group(pid, signal.SIGKILL)
    for _name, pid in order:  # children of groups (e.g. pod processes) die with their group
        signal_group(pid, signal.SIGKILL)


def signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
