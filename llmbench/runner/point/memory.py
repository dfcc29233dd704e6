"""The runner's memory, phase by phase: one DEBUG line per phase of a point.

Why: the peak RSS of a profile is the sum of what each phase leaves behind (imports, the
prepared workload, the kept responses, the decoded records, the exports, the plots), and only
a figure per phase says which one to cut. ``llmbench -v profile`` prints them;
``benchmarks/client_ceiling.py --phases`` collects them from there.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import resource
from collections.abc import Callable
from functools import cache, wraps
from typing import Any, ParamSpec, TypeVar

__all__ = ["collect_after", "note_memory", "release_memory"]

_P = ParamSpec("_P")
_R = TypeVar("_R")

log = logging.getLogger("llmbench.memory")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def note_memory(phase: str) -> None:
    """Logs (DEBUG) this process's resident memory now and its peak so far, in MB, and the
    CPU seconds it has used so far (every thread)."""
    if not log.isEnabledFor(logging.DEBUG):
        return
    try:
        with open("/proc/self/statm", encoding="ascii") as f:
            rss = int(f.read().split()[1]) * _PAGE
    except OSError:  # not Linux: the peak alone
        rss = 0
    use = resource.getrusage(resource.RUSAGE_SELF)
    peak = use.ru_maxrss * 1024  # KiB on Linux
    log.debug(
        "memory after %s: rss %.1f MB, peak %.1f MB, cpu %.2f s",
        phase, rss / 2**20, peak / 2**20, use.ru_utime + use.ru_stime,
    )


@cache
def _libc() -> Any:
    """The C library's symbols when it has ``malloc_trim`` (glibc does), else None.

    ``CDLL(None)`` is the process's own symbol table: no search for a library file (which
    ``ctypes.util.find_library`` does by running ``ldconfig``).
    """
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "malloc_trim") else None


def release_memory() -> None:
    """Gives the memory the run freed back to the system before the next phase builds on it.

    Why: a phase's garbage (the kept responses once decoded, the statistics' arrays) is freed
    inside the C heap, which keeps the pages; the exports and plots that follow would then
    stack their own memory on top of the run's. glibc's ``malloc_trim(0)`` returns the free
    pages of every heap (a no-op elsewhere); no full collection first: the run's structures
    hold no cycles, and one costs ~50 ms of CPU.
    """
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def collect_after(draw: Callable[_P, _R]) -> Callable[_P, _R]:
    """Frees what ``draw`` left unreachable as soon as it returns: a figure's garbage.

    Why: a matplotlib figure is a web of cycles (figure, axes, artists, canvas), so its
    renderer's pixel buffers live until a full collection, which a large heap makes rare; a
    report's figures then stack up (about 2 MB each, 7 MB for the time-series panels) on the
    run's memory. Objects alive before the call are frozen (:func:`gc.freeze`), so the
    collection only walks what the drawing made: milliseconds, not the ~50 ms of a full one.
    Decorate the functions that build a figure, not their callers (a nested call would thaw
    the outer one's frozen objects).
    """

    @wraps(draw)
    def drawn(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        gc.freeze()
        try:
            return draw(*args, **kwargs)
        finally:
            gc.collect()
            gc.unfreeze()

    return drawn
