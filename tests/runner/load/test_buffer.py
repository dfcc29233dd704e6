"""The kept responses: packed while the run goes on, decoded after it exactly as they came.

The packer holds most of the runner's memory in its hands, so what it gives back must be the
arrival-stamped pieces byte for byte, stamps and cuts included: every metric is computed
from them.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from scripted_server import stream_events

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.client.responses import fill_record
from llmbench.runner.client.transport import Exchange
from llmbench.runner.load.buffer import ResponseBuffer, pack, unpack

_STAMP = st.integers(min_value=-(2**63), max_value=2**63 - 1)


@given(st.lists(st.tuples(_STAMP, st.binary(max_size=300)), max_size=40))
def test_pack_gives_back_every_piece_byte_for_byte(pieces: list[tuple[int, bytes]]) -> None:
    assert unpack(pack(pieces)) == pieces


def _exchange(tokens: int, start_ns: int) -> Exchange:
    """A chat stream as a chunked response, one read per event, 1 ms apart."""
    ex = Exchange(status=200, chunked=True, sent_ns=start_ns)
    ex.headers = {"content-type": "text/event-stream", "transfer-encoding": "chunked"}
    events = stream_events(tokens)
    for i, event in enumerate(events):
        last = b"0\r\n\r\n" if i == len(events) - 1 else b""
        piece = b"%x\r\n%s\r\n%s" % (len(event), event, last)
        ex.pieces.append((start_ns + (i + 1) * 1_000_000, piece))
    ex.size = sum(len(p) for _, p in ex.pieces)
    return ex


def test_kept_responses_are_packed_during_the_run_and_decode_as_the_raw_ones() -> None:
    buf = ResponseBuffer(budget=2**30, pack_after=0)
    kept = [_exchange(64 + i, 10**12 + i * 10**9) for i in range(20)]
    for i, ex in enumerate(kept):
        buf.keep(RequestRecord(index=i), ex)
    raw_size = buf.buffered
    buf.close()  # what the packer still had is packed now
    assert all(ex.pieces == [] for ex in kept)  # the raw bytes are gone before decoding
    packer_saved = raw_size - sum(len(k.packed or b"") for k in buf._kept)
    assert packer_saved > raw_size * 0.8
    records = buf.decode("chat")
    for i, rec in enumerate(records):
        want = RequestRecord(index=i)
        fill_record(want, _exchange(64 + i, 10**12 + i * 10**9), "chat")
        assert rec.to_json() == want.to_json() and rec.output_text == want.output_text
        assert rec.ok and len(rec.chunk_ns) == 64 + i and rec.output_tokens == 64 + i
        assert rec.chunk_ns.typecode == "q"  # 8 bytes a stamp, not a list of int objects
    assert buf.decode("chat") == []  # emptied


def test_a_response_over_the_budget_still_goes_to_the_spill_file() -> None:
    buf = ResponseBuffer(budget=0)
    ex = _exchange(8, 10**12)
    buf.keep(RequestRecord(index=0), ex)
    assert buf.spilled == 1
    (rec,) = buf.decode("chat")
    assert rec.ok and rec.output_tokens == 8 and len(rec.chunk_ns) == 8


def test_a_run_holding_few_bytes_packs_nothing_and_past_the_mark_packs_the_backlog_too() -> None:
    one = _exchange(64, 10**12).size
    buf = ResponseBuffer(budget=2**30, pack_after=10 * one)
    kept = [_exchange(64, 10**12 + i * 10**9) for i in range(12)]
    for i, ex in enumerate(kept[:10]):
        buf.keep(RequestRecord(index=i), ex)
    assert buf._packer is None  # no thread, no packing CPU while the run holds little
    assert all(ex.pieces == _exchange(64, ex.sent_ns).pieces for ex in kept[:10])  # raw
    for i, ex in enumerate(kept[10:], start=10):
        buf.keep(RequestRecord(index=i), ex)
    buf.close()
    assert all(ex.pieces == [] for ex in kept)  # the ten held raw were packed with the rest
    assert all(k.packed for k in buf._kept)
    records = buf.decode("chat")
    assert [r.output_tokens for r in records] == [64] * 12
    assert all(len(r.chunk_ns) == 64 for r in records)


def test_the_mark_is_at_most_half_the_budget() -> None:
    one = _exchange(8, 10**12).size
    buf = ResponseBuffer(budget=4 * one)  # the default mark (8 MiB) is far above this budget
    for i in range(3):
        buf.keep(RequestRecord(index=i), _exchange(8, 10**12))
    assert buf._packer is not None and buf.spilled == 0
    buf.close()
