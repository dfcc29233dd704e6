"""The runner gives freed memory back before its next phase builds on it."""

from __future__ import annotations

import logging

import pytest

from llmbench.runner.point.memory import _libc, note_memory, release_memory


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
