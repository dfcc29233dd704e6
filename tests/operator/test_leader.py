"""Leader election (pure part): whose the operators' Lease is, and when a standby takes it."""

from __future__ import annotations

from datetime import UTC, datetime

from llmbench.operator.leader import IDENTITY, election_verdict

AT = datetime(2026, 12, 1, 2, 0, 20, tzinfo=UTC)


def test_a_held_lease_is_taken_only_after_a_whole_duration_without_renewal() -> None:
    spec = {"holderIdentity": "op-a_1", "leaseDurationSeconds": 15,
            "renewTime": "2026-12-01T02:00:10.000000Z"}
    assert election_verdict(spec, "op-a_1", AT) == "mine"
    assert election_verdict(spec, "op-b_2", AT) == "held"  # renewed 10 s ago
    assert election_verdict(spec, "op-b_2", AT.replace(second=26)) == "free"  # 16 s ago
    assert election_verdict({}, "op-b_2", AT) == "free"  # released (ReleaseOnCancel)
    assert election_verdict({"holderIdentity": None}, "op-b_2", AT) == "free"


def test_each_process_is_its_own_candidate() -> None:
    name, _, suffix = IDENTITY.rpartition("_")
    assert name and len(suffix) == 8
