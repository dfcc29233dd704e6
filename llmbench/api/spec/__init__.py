"""The ``LLMBenchmark`` resource's spec: one pydantic model, read by the runner, the CRD and users.

Why one model: the same YAML must run on a laptop (``llmbench analyze -f``), be handed to the
runner Job by the operator, and be checked by the API server through the CRD. Every field is
declared once here (manifest key, type, default, bounds, description), and every cross-field
rule once (a :class:`~llmbench.api.rules.Rule`: CEL for the API server, a predicate for Python,
one message). :mod:`llmbench.api.crd` turns this package's JSON schema into the CRD.

Field names are the resource's camelCase keys (Python code may use snake_case); enum values of
``sweep.type`` and ``load.mode`` are the CLI's (``request_rate``, ``input_sequence_length``) so
a flag and a field read alike. Types are strict as the manifest format is: a string is never a
number, ``true`` is never 1, an integral float (``4.0``) is an integer, an integer is a number.

Example::

    spec = Spec.from_manifest(yaml.safe_load(open("examples/llmbenchmark-sim.yaml")))
    spec.points()          # [1.0, 2.0, 4.0, 8.0, 16.0, 32.0]

Validation never stops at the first problem: :class:`SpecError` lists every issue with the
manifest path (``spec.load.requestRate``) and what would be accepted. It runs in the API
server's two steps: the schema (keys, types, bounds, enums) first; once that holds, every rule
of every object, so both sides report the same problems for the same manifest.

Every rule, where it sits and who enforces it (the API server through CEL, or Python only,
and why) is listed by :func:`spec_rules`; ``docs/resource.md`` shows that list as a table
(``llmbench crd --reference``). One check is no declared rule: a request_rate range starting
below 5e-10 with a step, whose first point rounds to 0 at nine decimals, is refused by
Python alone (:meth:`Sweep._after_rules`); CEL has no rounding to mirror it exactly.

The API server prunes nulls (no field is ``nullable``), so ``sweep: null`` reads as an absent
sweep on both sides; Python, stricter, refuses null for a field that has a default. Unknown
fields are refused by the API server only under ``fieldValidation=Strict`` (kubectl's default);
other clients get them dropped with a warning.

Python refuses a little more than the hand-written parser before it did, always to agree with
the API server: strings have a maximum length (the CRD needs one to bound CEL cost),
``sweep.values`` at most 128 items, integers fit in 64 bits, ``inf``/``nan`` are not numbers,
snake_case keys in a manifest are unknown fields, a count sweep's range step is a whole number,
a range's numbers are plain decimals, and a schedule is five standard fields or a macro (no
seconds field, no ``L``/``W``/``#``).
"""

from __future__ import annotations

from ..rules import SpecError, SpecIssue
from ..sweep_values import SWEEP_TYPES
from .flag import FIELD_DEFAULT, CliFlag, FlagForm, FlagReads
from .judging import (
    Baseline,
    BaselineMode,
    BaselinePoint,
    BaselineValues,
    Cost,
    HistoryBand,
    Slo,
    Tolerances,
)
from .load import LOAD_MODES, Load, Sessions
from .root import (
    API_VERSION,
    GROUP,
    KIND,
    MAX_NAME,
    MAX_STORED_POINTS,
    NAME_RULE,
    PLACEMENTS,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
    Spec,
    spec_flags,
    spec_rules,
    stored_points,
)
from .runner import Artifacts, PvcArtifacts, Runner, RunnerLimits, RunnerRequests, Telemetry
from .schedule import CRON_MACROS, CRON_PATTERN, cron_expression
from .sweep import ON_POINT_FAILURE, RANGE_PATTERN, Sweep, SweepWorkload
from .target import (
    ENDPOINT_TYPES,
    LabelSelector,
    LabelSelectorRequirement,
    SecretKeyRef,
    ServiceRef,
    Target,
)
from .trigger import Trigger
from .types import URL_PATTERN
from .workload import OutputTokens, TokenDistribution, Workload

__all__ = [
    "API_VERSION",
    "CRON_MACROS",
    "CRON_PATTERN",
    "ENDPOINT_TYPES",
    "FIELD_DEFAULT",
    "GROUP",
    "KIND",
    "MAX_NAME",
    "MAX_STORED_POINTS",
    "NAME_RULE",
    "LOAD_MODES",
    "ON_POINT_FAILURE",
    "PLACEMENTS",
    "PLURAL",
    "RANGE_PATTERN",
    "SHORT_NAMES",
    "SINGULAR",
    "SWEEP_TYPES",
    "URL_PATTERN",
    "VERSION",
    "Artifacts",
    "Baseline",
    "CliFlag",
    "BaselineMode",
    "BaselinePoint",
    "BaselineValues",
    "Cost",
    "HistoryBand",
    "FlagForm",
    "FlagReads",
    "Load",
    "OutputTokens",
    "PvcArtifacts",
    "Runner",
    "RunnerLimits",
    "RunnerRequests",
    "SecretKeyRef",
    "ServiceRef",
    "LabelSelector",
    "LabelSelectorRequirement",
    "Sessions",
    "Slo",
    "Spec",
    "SpecError",
    "SpecIssue",
    "Sweep",
    "SweepWorkload",
    "Target",
    "Telemetry",
    "Trigger",
    "TokenDistribution",
    "Tolerances",
    "Workload",
    "cron_expression",
    "spec_flags",
    "spec_rules",
    "stored_points",
]
