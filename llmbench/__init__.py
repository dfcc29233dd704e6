"""llmbench: LLM inference benchmarks, GenAI-Perf semantics, Kubernetes-native.

The distribution maps two folders onto subpackages: ``runner/`` is ``llmbench.runner``
(the load generator and metrics engine, no Kubernetes imports) and ``operator/`` is
``llmbench.operator`` (the kopf operator). ``operator/`` is never importable as the
top-level name ``operator``, which belongs to Python's standard library.
"""

__version__ = "0.1.0"
__all__ = ["__version__"]
