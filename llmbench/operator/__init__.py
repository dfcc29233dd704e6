"""The kopf operator that turns ``LLMBenchmark`` resources into runner Jobs.

* :mod:`.build`: the objects one run owns, as pure manifest builders;
* :mod:`.placement`: target pods and nodes -> affinity, tolerations, exporters, stack snapshot;
* :mod:`.status`: conditions, the reconcile decision, digest -> status, history;
* :mod:`.schedule`: cron ticks, missed ticks, the clock;
* :mod:`.kube`: every API call and the permission it needs;
* :mod:`.handlers`: the kopf handlers (thin; they re-read the benchmark before deciding);
* :mod:`.exporter`: the ``/metrics`` gauges of each benchmark's last valid run.
"""

__all__: list[str] = []
