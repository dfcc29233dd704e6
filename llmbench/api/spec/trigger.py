"""What else starts a run: the target's serving stack changing (release gating).

Why: a platform team ships a new model-server image or new arguments through GitOps, and the
benchmark that gates the release has to follow that rollout without anyone editing its spec.
``onTargetChange`` makes the operator compare a digest of the target pods' serving image (by
digest) and arguments with the last run's; a change starts one run, under the same Lease and
``concurrencyPolicy`` rules as a schedule tick.
"""

from __future__ import annotations

from pydantic import Field

from ..rules import ApiModel
from .types import Bool

__all__ = ["Trigger"]


class Trigger(ApiModel):
    """Runs started by something other than a spec change or the schedule."""

    on_target_change: Bool = Field(
        default=False,
        description="Start a run when the target pods' image ID or arguments change (checked "
        "every operator resync; the first look records them, a rollout in progress waits "
        "until every Ready pod agrees). Needs target.service or target.podSelector.",
    )
