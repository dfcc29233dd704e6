"""The per-endpoint Lease: whose it is, and when a holder's Lease is taken over."""

from __future__ import annotations

from datetime import UTC, datetime

from llmbench.operator.lease import (
    lease_expired,
    lease_time,
    lease_verdict,
    next_check_in,
    queue_check,
)


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


def test_a_lease_expires_a_duration_after_its_last_renewal() -> None:
    spec = {"acquireTime": "2026-12-01T02:00:00.000000Z", "leaseDurationSeconds": 120}
    at = datetime(2026, 12, 1, 2, 2, 0, tzinfo=UTC)
    assert not lease_expired(spec, at)  # exactly a duration: not yet
    assert lease_expired(spec, at.replace(second=1))
    renewed = {**spec, "renewTime": "2026-12-01T02:01:30.000000Z"}
    assert not lease_expired(renewed, at.replace(second=1))  # the renewal counts, not acquire
    assert lease_expired(renewed, datetime(2026, 12, 1, 2, 3, 31, tzinfo=UTC))
    # a Lease from before renewals (no duration) never expires: the holder's phase decides
    assert not lease_expired({"acquireTime": spec["acquireTime"]}, at.replace(year=2027))


def test_an_expired_lease_is_taken_over_even_from_a_running_holder() -> None:
    assert lease_verdict("llm/other", "llm/me", bench("Running"), expired=True) == "stale"
    assert lease_verdict("llm/me", "llm/me", None, expired=True) == "ours"
    assert lease_verdict("llm/other", "llm/me", bench("Running"), expired=False) == "held"


def test_a_queue_looks_at_its_lease_when_it_can_have_expired_or_at_the_resync() -> None:
    at = datetime(2026, 12, 1, 2, 0, 0, tzinfo=UTC)
    renewed = {"renewTime": "2026-12-01T01:58:20.000000Z", "leaseDurationSeconds": 120,
               "acquireTime": "2026-12-01T01:50:00.000000Z"}
    assert next_check_in(renewed, at, 30.0) == 21.0  # 100 s since the renewal: 20 s left, +1
    assert next_check_in({**renewed, "renewTime": lease_time(at)}, at, 30.0) == 30.0
    assert next_check_in({**renewed, "renewTime": "2026-12-01T01:00:00.000000Z"}, at, 30.0) == 1.0
    # an operator that just started counts no expiry before a duration of its own
    assert next_check_in(renewed, at, 30.0, not_before=25.0) == 25.0
    assert next_check_in({"holderIdentity": "llm/a"}, at, 30.0) == 30.0  # no duration: resync


def test_a_queue_wakes_when_its_lease_is_gone_changed_hands_expired_or_its_holder_ended() -> None:
    spec = {"holderIdentity": "llm/other"}
    assert queue_check(spec, "llm/other", bench("Running"), expired=False) == "wait"
    assert queue_check(spec, "llm/other", bench("Queued"), expired=False) == "wait"
    assert queue_check(None, "llm/other", bench("Running"), expired=False) == "wake"  # released
    assert queue_check({"holderIdentity": "llm/new"}, "llm/other", bench("Running"),
                       expired=False) == "wake"  # its status names the wrong holder now
    assert queue_check(spec, "llm/other", bench("Running"), expired=True) == "wake"
    assert queue_check(spec, "llm/other", bench("Succeeded"), expired=False) == "wake"  # lost
    assert queue_check(spec, "llm/other", None, expired=False) == "wake"  # holder deleted
