"""``llmbench.api``: the ``LLMBenchmark`` resource model and the CRD generated from it.

Why a package of its own: the runner, the operator and the CLI all read the same spec, and the
API server must enforce what they enforce. This package is that one declaration; it imports
nothing else of llmbench (only the standard library, pydantic, cronsim and PyYAML), so every
layer may import it and it can never pull the runner or kopf into the operator's webhook or a
``kubectl``-side tool.

* :mod:`llmbench.api.spec`: the pydantic models (``Spec`` and its parts, one module each) and
  their rules;
* :mod:`llmbench.api.rules`: the rule record (CEL + Python, one message) and error reporting;
* :mod:`llmbench.api.sweep_values`: the points of a sweep range or list (pure);
* :mod:`llmbench.api.crd`: the structural CustomResourceDefinition (``llmbench crd``);
* :mod:`llmbench.api.results`: the typed results (a point, its telemetry, a sweep's analysis),
  imported from there, not re-exported here (``Spec`` has a ``Cost`` too).
"""

from .rules import Rule, SpecError, SpecIssue
from .spec import (
    API_VERSION,
    CRON_MACROS,
    ENDPOINT_TYPES,
    GROUP,
    KIND,
    LOAD_MODES,
    ON_POINT_FAILURE,
    PLACEMENTS,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
    Cost,
    Load,
    OutputTokens,
    SecretKeyRef,
    ServiceRef,
    Slo,
    Spec,
    Sweep,
    Target,
    Telemetry,
    TokenDistribution,
    Workload,
    cron_expression,
    spec_rules,
)
from .sweep_values import (
    LINEAR_POINTS,
    SWEEP_TYPES,
    SweepError,
    parse_sweep_list,
    sweep_values,
)

__all__ = [
    "API_VERSION",
    "CRON_MACROS",
    "ENDPOINT_TYPES",
    "GROUP",
    "KIND",
    "LINEAR_POINTS",
    "LOAD_MODES",
    "ON_POINT_FAILURE",
    "PLACEMENTS",
    "PLURAL",
    "SHORT_NAMES",
    "SINGULAR",
    "SWEEP_TYPES",
    "VERSION",
    "Cost",
    "Load",
    "OutputTokens",
    "Rule",
    "SecretKeyRef",
    "ServiceRef",
    "Slo",
    "Spec",
    "SpecError",
    "SpecIssue",
    "Sweep",
    "SweepError",
    "Target",
    "Telemetry",
    "TokenDistribution",
    "Workload",
    "cron_expression",
    "parse_sweep_list",
    "spec_rules",
    "sweep_values",
]
