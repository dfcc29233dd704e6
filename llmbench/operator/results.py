"""A run's results ConfigMap as the operator reads it: the runner's digest, the summary CSV,
and the run's context (its Lease's target, its baseline, its artefacts folder).

The runner writes this map after every point (and it is the sweep's checkpoint); the operator
only reads it, from the watch event's body or once when the run ends.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from llmbench.api.job import (
    CONTEXT_KEY,
    DIGEST_KEY,
    PROGRESS_KEY,
    SUMMARY_KEY,
    RunContext,
    run_name,
)
from llmbench.api.status import CurrentPoint, RunDigest
from llmbench.operator.kube import Kube, NotFound

__all__ = ["context_of", "read_context", "read_current_point", "read_digest"]

log = logging.getLogger("llmbench.operator")


def read_digest(cm: Mapping[str, Any]) -> tuple[RunDigest | None, str | None]:
    """The digest (None: not written yet, or unreadable, which is logged) and the summary CSV
    of a results ConfigMap."""
    data = cm.get("data") or {}
    raw = data.get(DIGEST_KEY)
    if not raw:
        return None, data.get(SUMMARY_KEY)
    try:
        return RunDigest.model_validate_json(raw), data.get(SUMMARY_KEY)
    except ValidationError:
        log.warning("unreadable %s in ConfigMap %s", DIGEST_KEY, cm["metadata"]["name"])
        return None, data.get(SUMMARY_KEY)


def read_current_point(cm: Mapping[str, Any]) -> CurrentPoint | None:
    """The runner's record of the point under way (None between points, or unreadable)."""
    raw = (cm.get("data") or {}).get(PROGRESS_KEY)
    if not raw:
        return None
    try:
        return CurrentPoint.model_validate_json(raw)
    except ValidationError:
        log.warning("unreadable %s in ConfigMap %s", PROGRESS_KEY, cm["metadata"]["name"])
        return None


def context_of(cm: Mapping[str, Any] | None) -> RunContext | None:
    """``context.json`` of a run's ConfigMap (None when the map or the key is gone)."""
    try:
        return RunContext.model_validate_json((cm or {})["data"][CONTEXT_KEY])
    except (KeyError, TypeError, ValidationError):
        return None


async def read_context(kube: Kube, namespace: str, name: str, run: int) -> RunContext | None:
    """``context.json`` of run ``run`` (None when its ConfigMap or the key is gone)."""
    try:
        return context_of(await kube.get_configmap(namespace, run_name(name, run)))
    except NotFound:
        return None
