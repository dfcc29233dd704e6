"""What the operator writes onto a benchmark: its status patches and its Events.

The decisions (:mod:`.reconcile`, :mod:`.ensure`, :mod:`.finish`, :mod:`.progress`) return a
:class:`~llmbench.operator.status.Patch`; this is the one place it meets the API server.

Events are posted through the API by the operator itself (not ``kopf.event``), so that they
name ``llmbench-operator`` as their source and reporting component: ``kubectl get events``
and every event exporter show who said it, and kopf cannot set that field.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from kubernetes.client.rest import ApiException

from llmbench.api.status import dump
from llmbench.operator.kube import NotFound
from llmbench.operator.schedule import rfc3339
from llmbench.operator.state import Operator
from llmbench.operator.status import Patch, bounded_status, set_condition, status_of

__all__ = ["COMPONENT", "MAX_EVENT_MESSAGE", "event_object", "post_event", "write_status"]

log = logging.getLogger(__name__)

#: The Events' ``source.component`` and ``reportingComponent``.
COMPONENT = "llmbench-operator"
#: Characters of an Event's message (the API server's own Events keep to 1 KiB; a longer one
#: is cut with an ellipsis, the whole text being in status).
MAX_EVENT_MESSAGE = 1024


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


def event_object(
    body: Mapping[str, Any], reason: str, message: str, warning: bool, at: datetime,
    instance: str,
) -> dict[str, Any]:
    """A core/v1 Event about the benchmark ``body``, reported by ``llmbench-operator`` from
    ``instance`` (the operator pod's name) at ``at``.

    Example: ``event_object(bench, "TargetNotReady", "Service vllm not found", True, now,
    "llmbench-operator-5f9c")["source"] == {"component": "llmbench-operator", ...}``.
    """
    meta = body["metadata"]
    stamp = rfc3339(at)
    if len(message) > MAX_EVENT_MESSAGE:
        message = message[: MAX_EVENT_MESSAGE - 1] + "…"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
        "involvedObject": {
            "apiVersion": body.get("apiVersion"), "kind": body.get("kind"),
            "name": meta["name"], "namespace": meta["namespace"], "uid": meta.get("uid"),
        },
        "reason": reason,
        "message": message,
        "type": "Warning" if warning else "Normal",
        "source": {"component": COMPONENT, "host": instance},
        "reportingComponent": COMPONENT,
        "reportingInstance": instance,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }


async def post_event(
    op: Operator, body: Mapping[str, Any], reason: str, message: str, warning: bool = False
) -> None:
    """Posts an Event on the benchmark. An Event the API server does not take (a quota on
    Events, the namespace going away) is logged, never raised: it must not undo the status
    write it reports."""
    event = event_object(body, reason, message, warning, op.clock.now(), socket.gethostname())
    try:
        await op.kube.create_event(event)
    except (ApiException, NotFound) as exc:
        log.warning("Event %s on %s/%s not posted: %s", reason,
                    body["metadata"].get("namespace"), body["metadata"].get("name"), exc)
