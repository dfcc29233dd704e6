"""The Lease: one benchmark at a time per endpoint."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from llmbench.operator.build import holder_identity, target_lease
from llmbench.operator.kube import NotFound
from llmbench.operator.state import kube

__all__ = ["acquire_lease", "release_lease"]


def _micro_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


async def acquire_lease(body: Mapping[str, Any], target_key: str) -> str | None:
    """Takes the endpoint's Lease; returns the holder when another benchmark has it.

    A Lease whose holder no longer exists, or has finished, is taken over (its release was
    lost, e.g. the operator stopped between the end of a run and the release).
    """
    k = kube()
    lease = target_lease(body, target_key, _micro_now())
    me = holder_identity(body)
    for _ in range(3):
        if await k.create(lease):
            return None
        try:
            existing = await k.get_lease(lease["metadata"]["namespace"], lease["metadata"]["name"])
        except NotFound:
            continue
        holder = (existing.get("spec") or {}).get("holderIdentity") or ""
        if holder == me:
            return None
        ns, _, name = holder.partition("/")
        try:
            other = await k.get_benchmark(ns, name)
        except NotFound:
            other = None
        if other is not None and (other.get("status") or {}).get("phase") not in (
            "Succeeded", "Failed",
        ):
            return holder
        await k.delete_lease(lease["metadata"]["namespace"], lease["metadata"]["name"], holder)
    return None


async def release_lease(body: Mapping[str, Any], target_key: str) -> None:
    """Frees the endpoint for the next queued benchmark."""
    lease = target_lease(body, target_key, _micro_now())
    await kube().delete_lease(
        lease["metadata"]["namespace"], lease["metadata"]["name"], holder_identity(body)
    )

