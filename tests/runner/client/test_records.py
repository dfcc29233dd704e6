"""A request record's stamps: packed in memory, plain JSON in the files, the same both ways."""

from __future__ import annotations

import json
import pickle

from llmbench.runner.client.records import RequestRecord

STAMPS = [10**12 + i * 7_919_000 for i in range(256)]  # a 256-token answer, perf_counter_ns


def _record() -> RequestRecord:
    rec = RequestRecord(index=3, sent_ns=10**12 - 5_000_000, first_token_ns=STAMPS[0],
                        last_token_ns=STAMPS[-1], output_tokens=256, status=200)
    for ts in STAMPS:
        rec.chunk_ns.append(ts)
    return rec


def test_stamps_round_trip_through_the_export_json_and_pickle() -> None:
    rec = _record()
    text = json.dumps(rec.to_json())  # the requests .jsonl line: plain numbers
    assert json.loads(text)["chunk_ns"] == STAMPS
    back = RequestRecord.from_json(json.loads(text))
    assert list(back.chunk_ns) == STAMPS and back.to_json() == rec.to_json()
    assert back.chunk_ns.typecode == "q"  # a record read back is as compact as a measured one
    moved = pickle.loads(pickle.dumps(rec))  # worker processes hand records back pickled
    assert list(moved.chunk_ns) == STAMPS

