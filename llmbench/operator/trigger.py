"""``spec.trigger.onTargetChange``: when the target's serving stack changed since the last run.

Why a digest of the pods and not of the Deployment: what is measured is what runs, the
serving container's image by digest (``imageID``: a tag moved to a new build counts) and its
command and arguments, as the stack snapshot records them (:func:`~.placement.stack_snapshot`,
secret-like values redacted before hashing). Why only a settled target counts: during a
rolling update old and new pods are Ready together; a run then would measure a mix, and the
next look would start a second one. So the digest exists only when every Ready pod agrees
(:func:`target_digest`), and :func:`target_decision` is the whole rule: nothing observed,
nothing to do; nothing recorded yet (an older operator's runs, the trigger just switched on),
record it without a run; a different one, start a run. Whether that run may start now is
the schedule's rule (``concurrencyPolicy``, :func:`~.reconcile.tick_decision`) and its Lease.

The digest is recorded in ``status.targetDigest`` when a run starts (for any reason) and on
the first look; :func:`~.resync.check_target` looks every resync.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from llmbench.api.status import StackStatus
from llmbench.operator.placement import stack_snapshot

__all__ = ["TargetAction", "stack_digest", "target_decision", "target_digest"]

#: What a look at the target does: nothing, record its digest, or start a run.
TargetAction = Literal["none", "record", "start"]


def stack_digest(stack: StackStatus) -> str | None:
    """A stable digest of a snapshot's serving image (by ID when known) and arguments; None
    without a target pod."""
    if not stack.target_pods:
        return None
    image = stack.target_image_id or stack.target_image or ""
    text = json.dumps([image, stack.target_args], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def target_digest(pods: Sequence[Mapping[str, Any]]) -> str | None:
    """The digest every Ready target pod agrees on; None with no pod, or while they differ
    (a rollout in progress: the run waits until it settles)."""
    digests = {stack_digest(stack_snapshot([pod], [])) for pod in pods}
    if len(digests) != 1:
        return None
    return digests.pop()


def target_decision(recorded: str | None, observed: str | None) -> TargetAction:
    """What a look at the target does (see the module's rule)."""
    if observed is None:
        return "none"
    if recorded is None:
        return "record"
    return "none" if observed == recorded else "start"
