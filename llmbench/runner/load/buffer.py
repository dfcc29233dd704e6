"""The memory budget of finished responses, and the file they wait in beyond it.

Responses are decoded only after the load (decoding costs CPU the live streams would wait
for), so until then their arrival-stamped bytes are kept: as they came while they are few
(:data:`PACK_AFTER_BYTES`), then compressed in memory (a thread of its own does it,
:class:`Packer`) up to a budget sized from the runner's memory limit, in an unlinked
temporary file beyond it.
"""

from __future__ import annotations

import os
import pickle
import queue
import tempfile
import threading
import zlib
from array import array
from typing import IO

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.responses import fill_record
from llmbench.runner.client.transport import Exchange

__all__ = [
    "PACK_AFTER_BYTES",
    "Packer",
    "ResponseBuffer",
    "Spill",
    "default_buffer_bytes",
    "memory_limit_bytes",
    "pack",
    "unpack",
]


#: Raw response bytes a run holds before it starts packing them. Why wait: packing costs CPU
#: (about 0.3 ms per 256-token response) on a second thread; on a machine the server shares,
#: or in a pod with a CPU limit, that CPU is taken from the server or from the event loop
#: while the next requests go out. Below this the bytes cost at most about twice their size
#: in memory (the c64 three-wave run of ``benchmarks/distortion.py --waves c64`` holds ~4 MB and
#: packs nothing); beyond it they are what makes the peak, and packing them pays.
PACK_AFTER_BYTES = 8 * 2**20


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


def pack(pieces: list[tuple[int, bytes]]) -> bytes:
    """Arrival-stamped pieces as one deflate stream: their stamps, their lengths, their bytes.

    Why zlib at level 1: the SSE events of one response repeat the same JSON around a token
    or two (about 170 bytes each, a few of them new), so a response packs to a tenth of its
    size or less; level 1 is the fastest, and it runs with the GIL released (:class:`Packer`).

    Example:
        >>> unpack(pack([(5, b"ab"), (9, b"cde")]))
        [(5, b'ab'), (9, b'cde')]
    """
    n = len(pieces)
    head = array("q", [n])
    head.extend([ts for ts, _ in pieces])
    head.extend([len(data) for _, data in pieces])
    # raw deflate (negative wbits): no header, no checksum to compute, a quarter faster
    return zlib.compress(head.tobytes() + b"".join([data for _, data in pieces]), 1, -15)


def unpack(blob: bytes) -> list[tuple[int, bytes]]:
    """The pieces :func:`pack` packed, as they were."""
    raw = zlib.decompress(blob, -15)
    head = array("q")
    head.frombytes(raw[:8])
    n = head[0]
    head.frombytes(raw[8 : 8 * (1 + 2 * n)])
    out = []
    pos = 8 * (1 + 2 * n)
    for i in range(1, n + 1):
        end = pos + head[n + i]
        out.append((head[i], raw[pos:end]))
        pos = end
    return out


class _Kept:
    """One finished exchange as the buffer holds it; ``packed`` once the packer is done."""

    __slots__ = ("ex", "packed", "rec", "where")

    def __init__(self, rec: RequestRecord, ex: Exchange, where: tuple[int, int] | None) -> None:
        self.rec = rec
        self.ex = ex
        self.where = where
        self.packed: bytes | None = None


class Packer:
    """Compresses finished responses (:func:`pack`) on a thread of its own, while the load
    runs.

    Why a thread: the undecoded responses are most of the runner's memory (about 45 KB per
    256-token response), and compressing one costs a few hundred microseconds the event loop
    must not spend: its reads would be stamped that much late. ``zlib.compress`` releases the
    GIL, so the loop keeps running meanwhile; what the thread does holding the GIL (list the
    stamps, join the bytes) is a few microseconds per response. The loop only hands the
    exchange over (:meth:`put`, one C call). ``saved`` (bytes the packing saved) is written by
    the thread alone and read by the loop, so the budget sees the smaller size without a lock.
    """

    def __init__(self) -> None:
        self.saved = 0
        self._queue: queue.SimpleQueue[_Kept | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="llmbench-packer", daemon=True)
        self._thread.start()

    def put(self, kept: _Kept) -> None:
        self._queue.put(kept)

    def close(self) -> None:
        """Packs what is still queued and ends the thread."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        get = self._queue.get
        while (kept := get()) is not None:
            ex = kept.ex
            blob = pack(ex.pieces)
            kept.packed = blob
            ex.pieces = []  # the raw bytes go now, not at the end of the run
            self.saved += ex.size - len(blob)


class ResponseBuffer:
    """The run's finished exchanges, undecoded until the load is over.

    Decoding waits for the end of the run because it costs CPU the live streams would wait
    for. Once the run holds ``pack_after`` raw bytes (:data:`PACK_AFTER_BYTES`, at most half
    the budget), those and every later response are compressed by a :class:`Packer` while
    the load runs; up to ``budget`` bytes (compressed, once packed) stay in memory; beyond it
    each response goes to a :class:`Spill` file (or stays in memory when no temporary file
    can be made).
    ``spilled`` counts the responses parked in the file.
    """

    def __init__(self, budget: int, pack_after: int = PACK_AFTER_BYTES) -> None:
        self.budget = budget
        self.buffered = 0
        self.spilled = 0
        self._pack_after = min(pack_after, budget // 2)
        self._kept: list[_Kept] = []
        self._unpacked: list[_Kept] = []  # kept raw until the run holds pack_after bytes
        self._packer: Packer | None = None
        self._spill: Spill | None = None
        self._spill_failed = False

    def keep(self, rec: RequestRecord, ex: Exchange) -> None:
        """Keeps a finished exchange: to the packer, or over the memory budget to the file."""
        size = ex.received()
        self.buffered += size
        packer = self._packer
        where = None
        if size and self.buffered - (packer.saved if packer else 0) > self.budget:
            where = self._park(ex)
            if where is not None:
                self.buffered -= size
        kept = _Kept(rec, ex, where)
        self._kept.append(kept)
        if where is None and ex.pieces:
            if packer is not None:
                packer.put(kept)
                return
            self._unpacked.append(kept)
            if self.buffered > self._pack_after:  # from now on every response is packed
                packer = self._packer = Packer()
                for k in self._unpacked:
                    packer.put(k)
                self._unpacked = []

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

    def close(self) -> None:
        """Ends the packer's thread (what it still had is packed); :meth:`decode` calls it,
        and a run that failed before decoding must."""
        if self._packer is not None:
            self._packer.close()
            self._packer = None

    def decode(self, endpoint_type: str) -> list[RequestRecord]:
        """Decodes every kept exchange into its record, in the order kept; empties the buffer.

        Each response's bytes are dropped as soon as its record is built.
        """
        self.close()
        spill = self._spill
        if spill is not None:
            spill.flush()
        records = []
        for k in self._kept:
            ex = k.ex
            if k.where is not None and spill is not None:
                spill.restore(ex, k.where)
            elif k.packed is not None:
                ex.pieces, k.packed = unpack(k.packed), None
            fill_record(k.rec, ex, endpoint_type)
            ex.pieces = []
            records.append(k.rec)
        self._kept = []
        if spill is not None:
            spill.close()
        return records
