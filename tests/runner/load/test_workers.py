"""The split of a point's work across worker processes."""

from __future__ import annotations

from llmbench.runner.load.config import LoadConfig
from llmbench.runner.load.workers import split_concurrency, split_indices


def test_work_split_across_workers_covers_every_request_once() -> None:
    cfg = LoadConfig(concurrency=5, request_count=17, warmup_request_count=3)
    parts = split_indices(cfg, 3)
    assert sorted(i for p in parts for i in p) == list(range(20))
    assert all(any(i < 3 for i in p) for p in parts)  # every worker warms up
    assert split_concurrency(5, 3) == [2, 2, 1]
