"""The runner gives freed memory back before its next phase builds on it."""

from __future__ import annotations

import gc
import logging
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from llmbench.runner.point.memory import _libc, collect_after, note_memory, release_memory
from llmbench.runner.report.plots import itl_position_plot


def _rss_mb() -> float:
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * 4096 / 2**20


@pytest.mark.skipif(_libc() is None, reason="malloc_trim is glibc's")
def test_memory_freed_inside_the_heap_goes_back_to_the_system() -> None:
    # 64 MB of malloc'd buffers (above pymalloc's 512 bytes), freed but for one in 64: the
    # survivors pin the heap's top, so free() alone cannot shrink it (the phase garbage of a
    # run looks like this: responses freed between records that stay)
    blocks = [bytearray(2000) for _ in range(32_000)]
    kept = blocks[::64]
    del blocks
    before = _rss_mb()
    release_memory()
    after = _rss_mb()
    assert len(kept) == 500
    assert before - after > 30, (before, after)


def test_each_phase_line_says_rss_peak_and_cpu(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="llmbench.memory"):
        note_memory("imports")
    (line,) = caplog.messages
    assert line.startswith("memory after imports: rss ") and " MB, peak " in line
    assert line.endswith(" s") and ", cpu " in line


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


@pytest.fixture
def no_automatic_gc() -> Iterator[None]:
    """Only explicit collections: what a large heap makes of the automatic ones."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _cycle(refs: list[weakref.ref[_Node]]) -> None:
    a, b = _Node(), _Node()
    a.other, b.other = b, a  # a figure's shape: parts that point at each other
    refs.append(weakref.ref(a))


def test_what_a_drawing_left_in_cycles_is_freed_when_it_returns(no_automatic_gc: None) -> None:
    plain: list[weakref.ref[_Node]] = []
    _cycle(plain)
    assert plain[0]() is not None  # left for a collection that may not come soon
    collected: list[weakref.ref[_Node]] = []
    collect_after(_cycle)(collected)
    assert collected[0]() is None
    # what existed before was frozen, not walked: its garbage waits for the next collection
    assert plain[0]() is not None
    assert gc.get_freeze_count() == 0  # and it is thawed again, so that collection frees it
    gc.collect()
    assert plain[0]() is None


def test_a_report_figure_is_gone_once_its_png_is_written(
    no_automatic_gc: None, tmp_path: Path
) -> None:
    from matplotlib.figure import Figure

    made: list[weakref.ref[Figure]] = []
    real_init = Figure.__init__

    def spy(self: Figure, *args: object, **kwargs: object) -> None:
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]
        made.append(weakref.ref(self))

    from llmbench.runner.client.records import RequestRecord

    rec = RequestRecord(index=0, sent_ns=0, first_token_ns=10, last_token_ns=30, status=200)
    rec.chunk_ns.extend([10, 20, 30])
    Figure.__init__ = spy  # type: ignore[method-assign]
    try:
        png = itl_position_plot([("p", [rec])], tmp_path / "itl.png")
    finally:
        Figure.__init__ = real_init  # type: ignore[method-assign]
    assert png is not None and png.read_bytes().startswith(b"\x89PNG")
    assert len(made) == 1 and made[0]() is None
