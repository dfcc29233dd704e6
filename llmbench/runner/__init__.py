"""The runner: measures an OpenAI-compatible endpoint the way GenAI-Perf defines it.

It never imports ``kopf`` or ``kubernetes`` so it runs anywhere: a laptop, CI, or the
runner Job the operator starts. The public surface is the ``llmbench`` CLI; modules are
private unless listed here.
"""

__all__: list[str] = []
