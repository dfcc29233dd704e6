"""Several runner pods, one point: each pod's share, the records on the wire, the exact merge.

The merge property: however the requests are split between shards and however far apart the
shards' clocks are, the leader's merged statistics equal those of the concatenated records
(exactly: the same summarize over the same numbers, not an average of percentiles).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from llmbench.runner.client.records import RequestRecord
from llmbench.runner.load.arrivals import schedule_offsets
from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.result import LoadResult, merge_results
from llmbench.runner.load.shards import (
    pack_records,
    shard_config,
    shard_load,
    shift_records,
    skew_estimate,
    start_spread_ms,
    unpack_records,
)
from llmbench.runner.load.workers import split_indices, worker_configs
from llmbench.runner.point.metrics import summarize


def make_records(rng: random.Random, n: int, warm: int) -> list[RequestRecord]:
    """Plausible streamed requests in realtime ns, some failed, some warm-up."""
    out = []
    t = 1_700_000_000_000_000_000
    for k in range(n):
        sent = t + rng.randrange(0, 5_000_000_000)
        rec = RequestRecord(index=k, warmup=k < warm, sent_ns=sent, input_tokens=rng.randint(8, 64),
                            input_tokens_source="server")
        if rng.random() < 0.1:
            rec.error_type, rec.error_message, rec.status = "http_500", "boom", 500
        else:
            osl = rng.randint(1, 12)
            first = sent + rng.randrange(1_000_000, 90_000_000)
            chunks = [first]
            for _ in range(osl - 1):
                chunks.append(chunks[-1] + rng.randrange(100_000, 20_000_000))
            rec.first_token_ns, rec.last_token_ns, rec.chunk_ns = first, chunks[-1], chunks
            rec.output_tokens, rec.output_tokens_source, rec.status = osl, "server", 200
            rec.output_tokens_client = osl + rng.choice((0, 0, 1))
        out.append(rec)
    return out


def clone(records: list[RequestRecord]) -> list[RequestRecord]:
    return [RequestRecord.from_json(r.to_json()) for r in records]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 120),
    shards=st.integers(1, 8),
    budget=st.sampled_from([None, 10**9]),
)
def test_merged_statistics_equal_those_of_the_concatenated_records(
    seed: int, n: int, shards: int, budget: int | None
) -> None:
    rng = random.Random(seed)
    truth = make_records(rng, n, warm=rng.randint(0, min(5, n - 1)))
    # each shard's clock: monotonic = realtime - offset (offsets seconds to days apart)
    offsets = [rng.randrange(-(10**14), 10**14) for _ in range(shards)]
    owner = [rng.randrange(shards) for _ in truth]
    parts: list[LoadResult] = []
    for j in range(shards):
        mine = clone([r for r, o in zip(truth, owner, strict=True) if o == j])
        shift_records(mine, -offsets[j])  # what shard j measured, in its own clock
        text, trimmed = pack_records(mine, budget)
        assert not trimmed
        got = unpack_records(text)
        shift_records(got, offsets[j] - offsets[0])  # the leader's conversion
        parts.append(LoadResult(records=got))
    merged = merge_results(parts).records
    expected = clone(truth)
    shift_records(expected, -offsets[0])  # the same records, seen on the leader's clock
    # in send order, as the merge (and --workers) hands them over: float sums then add up
    # in the same order, so the comparison can be exact
    expected.sort(key=lambda r: (r.sent_ns, r.index))
    merged.sort(key=lambda r: (r.sent_ns, r.index))
    slo = {"ttft": 50.0, "itl": 10.0}
    a = summarize(merged, streaming=True, slo=slo).to_dict()
    b = summarize(expected, streaming=True, slo=slo).to_dict()
    assert a == b
    assert sorted(r.index for r in merged) == list(range(n))  # nothing twice, nothing lost


def test_trimmed_records_keep_every_genai_perf_statistic_but_the_chunk_gaps() -> None:
    rng = random.Random(7)
    recs = [r for r in make_records(rng, 60, warm=0) if len(r.chunk_ns) > 3]
    full, trimmed = pack_records(recs)
    assert not trimmed
    small, trimmed = pack_records(recs, budget=len(full) // 2)
    assert trimmed and len(small) < len(full)
    back = unpack_records(small)
    assert all(len(r.chunk_ns) == 3 for r in back)
    a = summarize(back, streaming=True).to_dict()
    b = summarize(recs, streaming=True).to_dict()
    for key in ("time_to_first_token", "time_to_second_token", "inter_token_latency",
                "request_latency", "output_token_throughput", "output_sequence_length"):
        assert a[key] == b[key], key
    assert a["llmbench"]["inter_chunk_gap"] != b["llmbench"]["inter_chunk_gap"]


@given(conc=st.integers(1, 300), shards=st.integers(1, 64), workers=st.integers(1, 6),
       count=st.integers(1, 400), warm=st.integers(0, 30))
def test_shards_split_slots_and_requests_exactly(
    conc: int, shards: int, workers: int, count: int, warm: int
) -> None:
    cfg = LoadConfig(concurrency=max(conc, shards), request_count=max(count, shards),
                     warmup_request_count=warm, workers=workers)
    parts = [shard_config(cfg, i, shards) for i in range(shards)]
    assert sum(p.concurrency for p in parts) == cfg.concurrency
    assert all(p.concurrency >= 1 for p in parts)
    sent = sorted(k for p in parts for w in split_indices(p, workers) for k in w)
    assert sent == list(range(warm + cfg.request_count))  # each number once, warm-up first
    assert len({p.seed + w for p in parts for w in range(workers)}) == shards * workers


@given(shards=st.integers(1, 8), workers=st.integers(1, 4),
       rate=st.floats(0.5, 5000, allow_nan=False))
def test_constant_rate_shards_and_workers_interleave_into_the_single_schedule(
    shards: int, workers: int, rate: float
) -> None:
    cfg = LoadConfig(mode="request_rate", request_rate=rate, request_count=100)
    n = 10 * shards * workers
    single = list(itertools.islice(schedule_offsets(cfg), n))
    union = sorted(
        t
        for i in range(shards)
        for w in worker_configs(shard_config(cfg, i, shards), workers)
        for t in itertools.islice(schedule_offsets(w), 10)
    )
    assert len(union) == n
    assert all(abs(a - b) <= shards + workers + 1 for a, b in zip(union, single, strict=True))


def test_poisson_shards_have_their_own_seed_and_a_share_of_the_rate() -> None:
    cfg = LoadConfig(mode="request_rate", request_rate=90.0, rate_mode="poisson", seed=3,
                     max_concurrency=10)
    parts = [shard_config(cfg, i, 3) for i in range(3)]
    assert [p.request_rate for p in parts] == [30.0, 30.0, 30.0]
    assert len({p.seed for p in parts}) == 3
    assert sum(p.max_concurrency or 0 for p in parts) == 10
    first = [list(itertools.islice(schedule_offsets(p), 5)) for p in parts]
    assert first[0] != first[1] != first[2]
    assert shard_config(cfg, 0, 1) is cfg  # one runner: untouched
    assert replace(cfg, shard=0, shards=1) == cfg


def test_shard_load_spread_and_skew() -> None:
    recs = [RequestRecord(index=k, sent_ns=1000 + k * 100, last_token_ns=1000 + k * 100 + 500,
                          first_token_ns=1000 + k * 100 + 50) for k in range(4)]
    load = shard_load(1, recs, (1000, 2000), target=2.0, first_send_ns=900)
    assert (load.requests, load.completed, load.errors) == (4, 4, 0)
    assert load.mean_in_flight == 4 * 500 / 1000
    assert load.first_send_ms == 100 / 1e6
    assert start_spread_ms([None, 5_000_000, 2_000_000]) == 3.0
    assert start_spread_ms([1]) is None
    # leader 40 ms ahead of the shard, 10 ms each way
    skew, unc = skew_estimate(t1=0, t2=50_000_000, t3=60_000_000, t4=30_000_000)
    assert (skew, unc) == (40.0, 10.0)
