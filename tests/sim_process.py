"""``llmbench sim`` as a process for the tests that need a real server on 127.0.0.1."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from llmbench.sim import spawn_sim

__all__ = ["running_sim"]


@contextlib.contextmanager
def running_sim(args: list[str]) -> Iterator[str]:
    """``llmbench sim`` with ``args`` in its own process; yields its base URL and stops it (and
    closes its output pipe) afterwards. Module fixtures wrap this."""
    url, proc = spawn_sim(args)
    try:
        yield url
    finally:
        proc.terminate()
        proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()
