"""The per-endpoint Lease: whose it is, and when a holder's Lease is taken over."""

from __future__ import annotations

from datetime import UTC, datetime

from llmbench.operator.lease import lease_time, lease_verdict


def bench(phase: str | None) -> dict[str, object]:
    return {"metadata": {"namespace": "llm", "name": "other"},
            "status": {"phase": phase} if phase else {}}


def test_a_lease_is_ours_held_or_stale() -> None:
    assert lease_verdict("llm/me", "llm/me", None) == "ours"  # an earlier attempt took it
    for phase in (None, "Pending", "Queued", "Running"):
        assert lease_verdict("llm/other", "llm/me", bench(phase)) == "held", phase
    # the holder is gone, or finished without releasing it (the release was lost)
    assert lease_verdict("llm/other", "llm/me", None) == "stale"
    assert lease_verdict("llm/other", "llm/me", bench("Succeeded")) == "stale"
    assert lease_verdict("llm/other", "llm/me", bench("Failed")) == "stale"


def test_lease_times_are_microtime_in_utc() -> None:
    at = datetime(2026, 12, 1, 2, 0, 7, 123456, tzinfo=UTC)
    assert lease_time(at) == "2026-12-01T02:00:07.123456Z"
