"""What the operator writes onto a benchmark: status patches and Events."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import kopf

from llmbench.api.status import Condition
from llmbench.operator.state import kube
from llmbench.operator.status import bounded_status, set_condition

__all__ = ["post_event", "write_status"]


async def write_status(
    namespace: str,
    name: str,
    fields: Mapping[str, Any],
    conditions: list[Condition] = (),  # type: ignore[assignment]
    body: Mapping[str, Any] | None = None,
) -> None:
    """Patches ``fields`` and sets ``conditions`` on top of the current ones."""
    current = body if body is not None else await kube().get_benchmark(namespace, name)
    status = dict(fields)
    conds = list((current.get("status") or {}).get("conditions") or [])
    for c in conditions:
        conds = set_condition(conds, c)
    if conditions:
        status["conditions"] = conds
    cm = status.get("resultsConfigMap") or (current.get("status") or {}).get("resultsConfigMap")
    await kube().patch_status(namespace, name, bounded_status(status, cm))


def post_event(body: Mapping[str, Any], reason: str, message: str, warning: bool = False) -> None:
    """A Kubernetes Event on the benchmark (kopf posts it in the background)."""
    kopf.event(
        cast(Any, dict(body)), type="Warning" if warning else "Normal", reason=reason,
        message=message,
    )

