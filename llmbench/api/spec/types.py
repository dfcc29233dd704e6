"""Shared field types of the spec: scalars strict as a manifest is, the URL pattern, CEL helpers.

Why strict: the API server never turns a string into a number or ``true`` into 1, so neither
does Python; an integral float (``4.0``) is an integer, an integer is a number. The CEL helpers
write the expressions that the rules of several sub-models share.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, AllowInfNan, BeforeValidator, Field, Strict

from ..rules import cel_string

__all__ = [
    "URL_PATTERN",
    "Bool",
    "Float",
    "Int",
    "PositiveInt",
    "Str",
    "cel_value",
    "cel_whole",
    "is_whole",
]

_INT64 = 2**63


def _integral_float(value: Any) -> Any:
    """``4.0`` -> ``4`` (YAML and JSON clients write whole numbers either way); else as is."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _int64(value: int) -> int:
    """Refuses integers the API server cannot store, so Python never accepts more than it."""
    if not -_INT64 <= value < _INT64:
        raise ValueError(f"{value}: out of range (a 64-bit integer, as the API server stores)")
    return value


# The validators come last in each Annotated list, after any bound: pydantic then still writes
# the bound into the JSON schema (``minimum``), even inside ``X | None``.
Int = Annotated[int, Strict(), AfterValidator(_int64), BeforeValidator(_integral_float)]
#: An optional count's type: the bound sits inside, where ``X | None`` keeps it in the schema.
PositiveInt = Annotated[
    int, Strict(), Field(ge=1), AfterValidator(_int64), BeforeValidator(_integral_float)
]
Float = Annotated[float, Strict(), AllowInfNan(False)]
Str = Annotated[str, Strict()]
Bool = Annotated[bool, Strict()]

# ----------------------------------------------------------------------------------------------
# patterns shared by CEL (RE2) and Python; see rules.re2_matches
# ----------------------------------------------------------------------------------------------

#: An http(s) URL with a host and, if any, a port from 1 to 65535 (what target.url and a
#: telemetry URL must start with): ``http://127.0.0.1:99999`` is refused here, naming the field,
#: instead of failing later inside the URL parser.
URL_PATTERN = (
    r"^https?://(?:[^/?#@ \t\n\r\f\v]*@)?(?:\[[0-9A-Fa-f:.]+\]|[^/?#@:\[\] \t\n\r\f\v]+)"
    r"(?::(?:[1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]"
    r"|6553[0-5]))?(?:[/?#]|$)"
)


def cel_value(path: str, default: str) -> str:
    """CEL for a field's value, or its default when the field is absent.

    Why: the API server checks a ``default: {}`` object against its rules *before* it fills
    the nested defaults (and at CRD creation), so a rule may not assume a defaulted field is
    there. ``cel_value("self.load.mode", "concurrency")`` guards every step of the path.
    """
    parts = path.split(".")
    guards = " && ".join(f"has({'.'.join(parts[: i + 1])})" for i in range(1, len(parts)))
    return f"(({guards}) ? {path} : {cel_string(default)})"


def is_whole(x: float) -> bool:
    """x is a whole number; Python's form of the CEL below (doubles >= 2**52 are all whole)."""
    return x >= 2.0**52 or x <= -(2.0**52) or float(int(x)) == x


def cel_whole(x: str) -> str:
    """CEL for "the double x is whole" without overflowing ``int()`` on huge values."""
    return f"({x} >= 4503599627370496.0 || {x} <= -4503599627370496.0 || double(int({x})) == {x})"

