"""kopf's settings for this operator, and why each is set.

Applied by the startup handler (:mod:`.handlers`) before any watch starts.
"""

from __future__ import annotations

import logging

import kopf

from llmbench.operator.build import LABEL_ACTIVE, LABEL_MANAGED_BY, MANAGED_BY

__all__ = ["CHUNK_SIZE", "WORKER_LIMIT", "configure"]

#: Objects per page of a watch's initial list: a restart with thousands of benchmarks (or
#: runner pods) reads them a page at a time instead of holding one huge response.
CHUNK_SIZE = 100
#: Handlers running at once: a burst of events (a restart, 100 benchmarks created together)
#: queues instead of opening a thread and an API request per object at once.
WORKER_LIMIT = 20


def configure(settings: kopf.OperatorSettings) -> None:
    """Timeouts on every watch and request (a silently stalled watch is kopf's known failure
    mode), progress kept in our own annotations (status is ours and schema-checked), no
    cluster-wide CRD scanning (which would need cluster-wide rights), no peering objects."""
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.networking.request_timeout = 30
    settings.networking.connect_timeout = 10
    settings.watching.chunk_size = CHUNK_SIZE
    settings.queueing.worker_limit = WORKER_LIMIT
    # Only results ConfigMaps of runs in progress are watched (server-side), not the up to
    # spec.historyLimit finished ones each benchmark keeps.
    settings.watching.label_selectors["", "v1", "configmaps"] = (
        f"{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_ACTIVE}=true"
    )
    settings.scanning.disabled = True
    settings.peering.standalone = True
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="llmbench.io")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="llmbench.io", key="last-handled-configuration"
    )
    # Only warnings from kopf's own log become Events (not "handler succeeded" on every
    # ConfigMap update); the transitions the operator posts itself are always sent.
    settings.posting.level = logging.WARNING
