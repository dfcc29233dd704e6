"""GPU (DCGM) and inference-server telemetry over a point's measurement window.

Why this exists: when latency jumps the first questions are "is the GPU saturated, is the KV
cache full, or is someone else sending traffic?". The client cannot see any of that, so we scrape
Prometheus text endpoints (dcgm-exporter, the inference server's own ``/metrics``) while the
point runs and summarise them over exactly the measurement window.

One module per concern; import the one you need (this package re-exports nothing, so reading
results does not pull in the scraper or the parser):

* :mod:`~llmbench.runner.telemetry.model`: the result types (``TelemetryResult``,
  ``GpuSummary``, ``ServerSummary``, ``Stat``, ``GpuFilter``), the DCGM and server metric names
  and the DCGM label conventions; numpy only.
* :mod:`~llmbench.runner.telemetry.parse`: Prometheus text exposition parsing
  (``prometheus_client``), compaction, DCGM blank values, the URLs to scrape.
* :mod:`~llmbench.runner.telemetry.summary`: recorded ``(t_ns, text)`` scrapes to a
  ``TelemetryResult`` and the point's ``"telemetry"`` JSON section; pure, so tests and offline
  analysis feed recorded data.
* :mod:`~llmbench.runner.telemetry.validity`: signals that cast doubt on a point's numbers.
* :mod:`~llmbench.runner.telemetry.collector`: ``TelemetryCollector``, the httpx scrape loops
  the profile runner opens and closes with the window; it never raises into the run.

Elsewhere: the GPU table's cells in :mod:`llmbench.runner.labels`, the plot in
:mod:`llmbench.runner.report.telemetry_plot`, the flags in :mod:`llmbench.cli.telemetry`.
"""
