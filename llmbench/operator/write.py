"""What the operator writes onto a benchmark: its status patches and its Events.

The decisions (:mod:`.reconcile`, :mod:`.ensure`, :mod:`.finish`, :mod:`.progress`) return a
:class:`~llmbench.operator.status.Patch`; this is the one place it meets the API server.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, cast

import kopf

from llmbench.api.status import dump
from llmbench.operator.schedule import rfc3339
from llmbench.operator.state import Operator
from llmbench.operator.status import Patch, bounded_status, set_condition, status_of

__all__ = ["post_event", "write_status"]


async def write_status(op: Operator, body: Mapping[str, Any], patch: Patch, at: datetime) -> None:
    """Patches ``patch.fields`` and sets ``patch.conditions`` on top of the conditions of
    ``body`` (the benchmark as read under its lock), a flipped one stamped ``at``."""
    meta = body["metadata"]
    current = status_of(body)
    status = dict(patch.fields)
    if patch.conditions:
        conds = [dump(c) for c in current.conditions]
        for c in patch.conditions:
            conds = set_condition(conds, c, rfc3339(at))
        status["conditions"] = conds
    cm = status.get("resultsConfigMap") or current.results_config_map
    bounded = bounded_status(status, cm, body.get("status") or {})
    await op.kube.patch_status(meta["namespace"], meta["name"], bounded)


def post_event(body: Mapping[str, Any], reason: str, message: str, warning: bool = False) -> None:
    """A Kubernetes Event on the benchmark (kopf posts it in the background)."""
    kopf.event(
        cast(Any, dict(body)), type="Warning" if warning else "Normal", reason=reason,
        message=message,
    )
