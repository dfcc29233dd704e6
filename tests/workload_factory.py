"""Workload settings and request bodies as the workload tests build and read them.

Why one place: every workload test builds a :class:`WorkloadConfig` for the same model and
reads the JSON body of a prepared request back; the prompts, requests, settings and dataset
tests share these two.
"""

from __future__ import annotations

import json
from typing import Any

from llmbench.runner.workload.config import WorkloadConfig
from llmbench.runner.workload.requests import PreparedRequest

__all__ = ["body", "cfg"]


def cfg(**kw: Any) -> WorkloadConfig:
    """A workload for model ``m`` unless told otherwise."""
    kw.setdefault("model", "m")
    return WorkloadConfig(**kw)


def body(r: PreparedRequest) -> dict[str, Any]:
    """The JSON body the request sends."""
    out: dict[str, Any] = json.loads(r.body)
    return out
