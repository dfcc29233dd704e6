"""Prometheus text exposition in, ``(name, labels, value)`` samples out.

Why this module exists: it is the one place that knows the wire format. Text is parsed with
``prometheus_client``'s maintained parser, never with regexes; :func:`compact_exposition` keeps
only the lines the summaries read, so a long point does not hold megabytes of histogram buckets;
:func:`is_blank` turns DCGM's "no value" sentinels into missing readings; :func:`metrics_urls`
says which endpoints a point scrapes. What the labels mean (which GPU, which workload) lives with
the types in :mod:`llmbench.runner.telemetry.model`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

from prometheus_client.parser import text_string_to_metric_families

from llmbench.runner.telemetry.model import ENERGY, WANTED_SERVER

__all__ = ["compact_exposition", "is_blank", "metrics_urls", "parse_exposition"]

# DCGM reports "no value" with sentinel numbers instead of omitting the sample (dcgm_structs.h:
# DCGM_INT32_BLANK 0x7ffffff0, DCGM_INT64_BLANK 0x7ffffffffffffff0, DCGM_FP64_BLANK
# 140737488355328.0, each followed by a few more codes). Treat them as missing, never as readings.
_INT32_BLANK = (0x7FFFFFF0, 0x7FFFFFFF)
_INT64_BLANK_MIN = float(0x7FFFFFFFFFFFFFF0) * 0.999
_FP64_BLANK = (140737488355328.0, 140737488355328.0 + 16)


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], float]]:
    """Parse Prometheus text into ``(sample name, labels, value)`` triples.

    Raises ``ValueError`` on text that is not the exposition format (an HTML error page, JSON).
    Sample names are as the parser emits them: counter samples end in ``_total`` even when the
    exporter omitted it (TGI), histograms give ``_sum``/``_count``/``_bucket``.
    """
    out: list[tuple[str, dict[str, str], float]] = []
    try:
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                out.append((s.name, dict(s.labels), float(s.value)))
    except ValueError:
        raise
    except Exception as exc:  # the parser raises assorted types on odd input
        raise ValueError(f"not Prometheus text: {exc}") from exc
    return out


def compact_exposition(text: str) -> str:
    """Keep only the lines the summaries read (``DCGM_FI_*``, known server series, their TYPE).

    Why: vLLM serves ~100 KB per scrape, mostly histogram buckets, and a 10-minute point at 1 s
    would hold tens of MB of text. The result is still valid exposition text with identical
    summaries. Text with no wanted line (an HTML error page) is returned unchanged so that
    :func:`summarize_scrapes` can report it as garbage rather than as "no metrics".
    """
    out: list[str] = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 3 and parts[1] == "TYPE" and _is_wanted(parts[2]):
                out.append(line)
            continue
        if _is_wanted(line.split("{", 1)[0].split(None, 1)[0] if line.strip() else ""):
            out.append(line)
    if not any(not ln.startswith("#") for ln in out):
        return text
    return "\n".join(out) + "\n"


def _is_wanted(name: str) -> bool:
    return name.startswith("DCGM_FI_") or name in WANTED_SERVER


def metrics_urls(
    target_url: str | None,
    server_metrics_urls: Sequence[str] = (),
    *,
    include_target: bool = True,
) -> list[str]:
    """The URLs to scrape: ``--server-metrics-url`` values plus ``<target base>/metrics``.

    The target's path (``/v1``, ``/v1/chat/completions``) is dropped because servers expose
    ``/metrics`` at the root. Duplicates are removed, order kept.

    >>> metrics_urls("http://vllm:8000/v1", ["http://node:9400/metrics"])
    ['http://node:9400/metrics', 'http://vllm:8000/metrics']
    """
    urls = list(server_metrics_urls)
    if include_target and target_url:
        parts = urlsplit(target_url)
        urls.append(urlunsplit((parts.scheme, parts.netloc, "/metrics", "", "")))
    return list(dict.fromkeys(u for u in urls if u))


def is_blank(name: str, value: float) -> bool:
    """Whether DCGM field ``name`` read ``value`` means "no value" (a sentinel, NaN or inf)."""
    if math.isnan(value) or math.isinf(value):
        return True
    if value >= _INT64_BLANK_MIN or _FP64_BLANK[0] <= value <= _FP64_BLANK[1]:
        return True
    # Only gauges are int32 fields; the energy counter is int64 and legitimately passes 2^31.
    return name != ENERGY and _INT32_BLANK[0] <= value <= _INT32_BLANK[1]
