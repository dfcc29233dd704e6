"""kopf's settings for this operator, and why each is set.

Applied by the startup handler (:mod:`.handlers`) before any watch starts.
"""

from __future__ import annotations

import logging

import kopf

__all__ = ["configure"]


def configure(settings: kopf.OperatorSettings) -> None:
    """Timeouts on every watch and request (a silently stalled watch is kopf's known failure
    mode), progress kept in our own annotations (status is ours and schema-checked), no
    cluster-wide CRD scanning (which would need cluster-wide rights), no peering objects."""
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = 10
    settings.scanning.disabled = True
    settings.peering.standalone = True
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="llmbench.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="llmbench.io", key="last-handled-configuration"
    )
    # Only warnings from kopf's own log become Events (not "handler succeeded" on every
    # ConfigMap update); the transitions the operator posts itself are always sent.
    settings.posting.level = logging.WARNING
