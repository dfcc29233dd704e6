"""The kopf operator that turns ``LLMBenchmark`` resources into runner Jobs.

Four rooms: pure builders and decisions, the API calls, the plain async functions that read,
decide and write, and the kopf handlers that call them.

* :mod:`.build`: the objects one run owns, as pure manifest builders;
* :mod:`.placement`: target pods and nodes -> affinity, tolerations, exporters, stack snapshot;
* :mod:`.status`: conditions, the reconcile decision, digest -> status, history;
* :mod:`.schedule`: cron ticks, missed ticks, the clock;
* :mod:`.baseline`: which earlier run a run is judged against, and the Regressed condition;
* :mod:`.kube`: every API call and the permission it needs;
* :mod:`.state`: the one object the handlers share (config, client, clock, locks, backoff);
* :mod:`.write`: status patches and Events onto the benchmark;
* :mod:`.reconcile`: the benchmark -> its current run (start, schedule ticks, retries);
* :mod:`.ensure`: a run's spec check, target, Lease, telemetry, baseline and objects;
* :mod:`.target`: resolving ``spec.target`` and its dcgm-exporters;
* :mod:`.lease`: the per-endpoint Lease;
* :mod:`.results`: reading a run's results ConfigMap (digest, CSV, context);
* :mod:`.progress`: a running run's digest and runner pods -> status;
* :mod:`.finish`: a finished Job -> final status, history, Lease release, the next run;
* :mod:`.exporter`: the ``/metrics`` gauges of each benchmark's last valid run;
* :mod:`.settings`: kopf's settings;
* :mod:`.handlers`: every kopf handler, each a short delegate.
"""

__all__: list[str] = []
