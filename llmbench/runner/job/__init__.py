"""The runner inside the operator's Job: the sweep, its results written back point by point.

Why a package of its own on top of the runner: the Job learns what to measure from its results
ConfigMap (:mod:`llmbench.api.job`), resumes from it, and writes every finished point, the
digest and the summary CSV back into it. That needs a tiny Kubernetes client (:mod:`.store`,
httpx and the pod's service-account files, never ``kubernetes`` or ``kopf``, so the runner
still runs anywhere), the digest the operator mirrors into ``status`` (:mod:`.digest`) and the
loop that ties them to :func:`~llmbench.runner.sweep.run.run_sweep` (:mod:`.main`).
"""

__all__: list[str] = []
