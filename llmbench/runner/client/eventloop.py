"""Which asyncio event loop measures: uvloop where it is installed (Linux), else the stdlib's.

Why it matters: every read is stamped when the loop gets to it, so the loop's own cost per
read and per wake-up is added to TTFT when many streams arrive together (a synchronized wave
of first tokens). uvloop runs that path in C on libuv and costs the measured server less CPU
on a shared node; ``--event-loop asyncio`` keeps the stdlib loop for comparison or where
uvloop is missing.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["EVENT_LOOPS", "default_event_loop", "loop_factory", "run", "running_loop_kind"]

T = TypeVar("T")

#: The choices of ``--event-loop``.
EVENT_LOOPS = ("asyncio", "uvloop")


def default_event_loop() -> str:
    """``uvloop`` on Linux when it is installed (a default dependency there), else ``asyncio``."""
    if sys.platform == "linux" and importlib.util.find_spec("uvloop") is not None:
        return "uvloop"
    return "asyncio"


def loop_factory(kind: str | None) -> Callable[[], asyncio.AbstractEventLoop]:
    """A new-loop factory for ``kind`` (None: the default); ValueError naming the flag when
    uvloop is asked for and not installed."""
    kind = kind or default_event_loop()
    if kind == "asyncio":
        return asyncio.new_event_loop
    if kind != "uvloop":
        raise ValueError(f"--event-loop {kind!r}: choose one of {', '.join(EVENT_LOOPS)}")
    try:
        import uvloop
    except ImportError:
        raise ValueError(
            "--event-loop uvloop: uvloop is not installed (pip install uvloop), "
            "or use --event-loop asyncio"
        ) from None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(main: Coroutine[Any, Any, T], kind: str | None = None) -> T:
    """``asyncio.run(main)`` on a loop of ``kind``."""
    factory = loop_factory(kind)
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)


def running_loop_kind() -> str:
    """The kind of the running loop, so worker processes use the loop their parent uses."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.split(".", 1)[0] == "uvloop" else "asyncio"
