"""The memory budget of finished responses, and the file they wait in beyond it.

Responses are decoded only after the load (decoding costs CPU the live streams would wait
for), so until then their arrival-stamped bytes are kept: in memory up to a budget sized
from the runner's memory limit, in an unlinked temporary file beyond it.
"""

from __future__ import annotations

import os
import pickle
import tempfile
from typing import IO

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.responses import fill_record
from llmbench.runner.client.transport import Exchange

__all__ = ["ResponseBuffer", "Spill", "default_buffer_bytes", "memory_limit_bytes"]


def memory_limit_bytes() -> int | None:
    """The memory this process may use: its cgroup's limit (v2, then v1) in a container, else
    the machine's physical memory; None when neither can be read."""
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 1 << 60:  # v1 says "no limit" with a huge number
            return int(text)
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def default_buffer_bytes(workers: int = 1) -> int:
    """Undecoded-response budget per process: an eighth of the memory limit shared by the
    worker processes, between 16 MiB and 1 GiB (128 MiB when the limit is unknown).

    Buffered bytes cost about twice their size in Python objects, so the runner keeps about
    a quarter of its limit for them and a pod sized for its load is not OOM-killed.
    ``LLMBENCH_BUFFER_MB`` sets the budget per process instead (benchmarks use it to cross
    the budget with a short run).
    """
    override = os.environ.get("LLMBENCH_BUFFER_MB")
    if override:
        try:
            return max(0, int(float(override) * 2**20))
        except ValueError:
            raise ValueError(f"LLMBENCH_BUFFER_MB={override!r} is not a number") from None
    limit = memory_limit_bytes()
    if limit is None:
        return 128 * 2**20
    return int(min(max(limit / 8 / max(1, workers), 16 * 2**20), 2**30))


class Spill:
    """Finished responses parked, undecoded, in an unlinked temporary file.

    Why a file: once the memory budget is spent, decoding on the event loop costs the live
    streams about 1.3 ms per 256-token response (seconds when done in a batch), while
    pickling its arrival-stamped pieces into the page cache costs about 0.03–0.1 ms
    (``benchmarks/overflow_cost.py``); only the offset and length stay in memory. The pieces
    come back after the load, when decoding costs no measured time. The file holds only
    what this process wrote, read back by this process.
    """

    def __init__(self) -> None:
        self._file: IO[bytes] = tempfile.TemporaryFile()
        self._size = 0

    def park(self, ex: Exchange) -> tuple[int, int]:
        data = pickle.dumps(ex.pieces, protocol=pickle.HIGHEST_PROTOCOL)
        self._file.write(data)
        where = (self._size, len(data))
        self._size += len(data)
        ex.pieces = []
        return where

    def restore(self, ex: Exchange, where: tuple[int, int]) -> None:
        offset, length = where
        ex.pieces = pickle.loads(os.pread(self._file.fileno(), length, offset))

    def flush(self) -> None:
        self._file.flush()

    def close(self) -> None:
        self._file.close()


class ResponseBuffer:
    """The run's finished exchanges, undecoded until the load is over.

    Decoding waits for the end of the run because it costs CPU the live streams would wait
    for. Up to ``budget`` bytes stay in memory; beyond it each response goes to a
    :class:`Spill` file (or stays in memory when no temporary file can be made).
    ``spilled`` counts the responses parked in the file.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.buffered = 0
        self.spilled = 0
        self._raw: list[tuple[RequestRecord, Exchange, tuple[int, int] | None]] = []
        self._spill: Spill | None = None
        self._spill_failed = False

    def keep(self, rec: RequestRecord, ex: Exchange) -> None:
        """Keeps a finished exchange; over the memory budget it goes to the file."""
        size = ex.received()
        self.buffered += size
        where = None
        if self.buffered > self.budget and size:
            where = self._park(ex)
            if where is not None:
                self.buffered -= size
        self._raw.append((rec, ex, where))

    def _park(self, ex: Exchange) -> tuple[int, int] | None:
        if self._spill is None and not self._spill_failed:
            try:
                self._spill = Spill()
            except OSError:
                self._spill_failed = True  # no writable temp dir: keep bytes in memory
        if self._spill is None:
            return None
        self.spilled += 1
        return self._spill.park(ex)

    def decode(self, endpoint_type: str) -> list[RequestRecord]:
        """Decodes every kept exchange into its record, in the order kept; empties the buffer."""
        spill = self._spill
        if spill is not None:
            spill.flush()
        records = []
        for rec, ex, where in self._raw:
            if where is not None and spill is not None:
                spill.restore(ex, where)
            fill_record(rec, ex, endpoint_type)
            ex.pieces = []
            records.append(rec)
        self._raw = []
        if spill is not None:
            spill.close()
        return records
