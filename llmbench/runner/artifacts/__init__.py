"""Artefact files in GenAI-Perf 0.0.16's names, layouts and formats, so its readers read ours.

One folder per point, ``<artifact-dir>/<model>-openai-<endpoint-type>-concurrency<N>`` (or
``-request_rate<R>``; :func:`~.layout.point_dir_name`), holding (``<stem>`` is
``--profile-export-file`` without ``.json``, ``profile_export`` by default):

* ``inputs.json``: GenAI-Perf's ``{"data": [{"payload": [body]}, ...]}``, one entry per distinct
  request (``--num-dataset-entries`` of them), indented as GenAI-Perf writes it;
* ``<stem>.json``: perf_analyzer's profile export (:mod:`.perf_analyzer`): one experiment
  ``{mode, value}``, every measured request that completed with its send time, payload,
  response times and responses, the window boundaries, ``version``, ``service_kind`` and
  ``endpoint``; epoch nanoseconds (our ``perf_counter_ns`` stamps plus one offset taken when the
  point started), so GenAI-Perf's profile-data parser and ``process-export-files`` read it;
* ``<stem>_genai_perf.json``: :class:`~llmbench.api.results.PointResult` (GenAI-Perf's keys,
  ``telemetry_stats``, ``input_config`` in its nested schema (:mod:`.input_config`), everything
  of ours under ``llmbench``), read back by :func:`~.read.load_summary`;
* ``<stem>_genai_perf.csv``: :func:`~.genai_perf_csv.genai_perf_csv`, GenAI-Perf's tables, then
  one of ours;
* ``<stem>_llmbench_requests.jsonl``: our per-request records (every request, warm-up and
  failures included, monotonic stamps), one JSON object a line, read by
  :func:`~.read.load_records`; not a ``.json`` file, so GenAI-Perf's ``*.json`` folder scan
  never mistakes it for the export.

One module per concern, imported directly (this package re-exports nothing):
:mod:`.layout` (folder and file names), :mod:`.genai_perf_csv`, :mod:`.input_config`,
:mod:`.perf_analyzer`, :mod:`.write` (write-then-rename, one point's files) and :mod:`.read`.
Below ``point/`` and ``sweep/``, which both use it; it imports the result models, the request
record and the metric labels only.
"""
