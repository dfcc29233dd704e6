"""The values of a sweep, from ``start:end[:step]`` or an explicit list: pure, no I/O.

Why here and not in the runner: the resource model (:class:`llmbench.api.Sweep`) must say
which ranges it accepts, and the CLI's ``--sweep-range``/``--sweep-list`` must give the very same
points, so both read this one function. It imports nothing but the standard library.

Rules (GenAI-Perf's, kept as they were):

* ``concurrency`` without a step: ``start``, the powers of two between, and ``end``
  (``1:256`` -> 1, 2, 4, ..., 256; ``3:20`` -> 3, 4, 8, 16, 20);
* other types without a step: :data:`LINEAR_POINTS` evenly spaced values from ``start`` to
  ``end`` (rounded to whole tokens for the sequence-length types, duplicates dropped);
* with a step: ``start, start + step, ...`` up to ``end`` (inclusive when it lands on it), at
  most 10 000 points.

Concurrency and sequence lengths are whole numbers >= 1; request rates are > 0. Every error is a
``ValueError`` whose text starts with the flag and the text given (``--sweep-range '8:1': ...``),
or with nothing when ``flag`` is empty (the resource model adds its own field path).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal, get_args

__all__ = [
    "INTEGER_SWEEP_TYPES",
    "LINEAR_POINTS",
    "MAX_RANGE_POINTS",
    "SWEEP_TYPES",
    "SweepError",
    "SweepType",
    "parse_sweep_list",
    "parse_workloads",
    "sweep_values",
]

#: The quantity a sweep varies; the CLI's ``--sweep-type`` values.
SweepType = Literal[
    "concurrency", "request_rate", "input_sequence_length", "output_sequence_length"
]
SWEEP_TYPES: tuple[str, ...] = get_args(SweepType)
#: Sweep types whose values are counts (whole numbers >= 1).
INTEGER_SWEEP_TYPES: tuple[str, ...] = (
    "concurrency",
    "input_sequence_length",
    "output_sequence_length",
)
#: Default number of points of a stepless, non-concurrency range.
LINEAR_POINTS = 8
#: A stepped range giving more points than this is refused (a typo, not a benchmark).
MAX_RANGE_POINTS = 10_000


class SweepError(Exception):
    """A sweep cannot start or continue (bad checkpoint, mismatched resume)."""


def _prefix(flag: str, text: str) -> str:
    """The start of every message: which flag and what was given (nothing without a flag)."""
    return f"{flag} {text!r}: " if flag else ""


def _number(text: str, flag: str, whole: str) -> float:
    """One number of a range or list; a finite float or a ValueError naming the flag."""
    try:
        v = float(text)
    except ValueError:
        raise ValueError(f"{_prefix(flag, whole)}{text!r} is not a number") from None
    if not math.isfinite(v):
        raise ValueError(f"{_prefix(flag, whole)}{text!r} is not a finite number")
    return v


def _check_value(v: float, sweep_type: str, flag: str, whole: str) -> float:
    """A value the sweep type allows: counts whole and >= 1, rates > 0."""
    p = _prefix(flag, whole)
    if sweep_type in INTEGER_SWEEP_TYPES:
        if not float(v).is_integer():
            raise ValueError(f"{p}{sweep_type} values must be whole numbers, got {v:g}")
        if v < 1:
            raise ValueError(f"{p}{sweep_type} values must be at least 1, got {v:g}")
        return float(int(v))
    if not v > 0:
        raise ValueError(f"{p}{sweep_type} values must be greater than 0, got {v:g}")
    return float(v)


def parse_sweep_list(text: str, flag: str = "--sweep-list") -> list[float]:
    """Parses ``"2,4,6"`` into ``[2.0, 4.0, 6.0]``.

    Args:
        text: Comma-separated numbers.
        flag: The option named in error messages.

    Returns:
        The numbers, in the order given (not yet checked against a sweep type).

    Raises:
        ValueError: An item is empty or not a finite number.
    """
    items = [t.strip() for t in text.split(",")]
    if not text.strip() or any(not t for t in items):
        raise ValueError(f"{_prefix(flag, text)}expected comma-separated numbers, e.g. 1,2,4,8")
    return [_number(t, flag, text) for t in items]


def parse_workloads(text: str, flag: str = "--sweep-workloads") -> list[dict[str, int]]:
    """Parses ``"128:512,1024:128"`` (ISL:OSL pairs) into ``sweep.workloads`` mappings.

    Example: ``parse_workloads("128:512")`` -> ``[{"inputTokens": 128, "outputTokens": 512}]``.

    Raises:
        ValueError: A pair is not two whole numbers of at least 1; the message names the flag
            and shows the form.
    """
    out: list[dict[str, int]] = []
    for item in text.split(","):
        parts = [p.strip() for p in item.split(":")]
        if len(parts) != 2 or not all(p.isdigit() and int(p) >= 1 for p in parts):
            raise ValueError(
                f"{_prefix(flag, text)}{item.strip()!r} is not ISL:OSL; give whole token "
                "counts of at least 1, e.g. 128:512,1024:128"
            )
        out.append({"inputTokens": int(parts[0]), "outputTokens": int(parts[1])})
    return out


def _linspace(start: float, end: float, num: int) -> list[float]:
    """``num`` evenly spaced floats from start to end inclusive, as ``numpy.linspace`` gives.

    Why not numpy: the API package imports only the standard library and pydantic. The
    arithmetic is numpy's (``i * step + start``, the last value exactly ``end``), so the
    points are bit-for-bit those the runner produced before.
    """
    div = num - 1
    delta = end - start
    step = delta / div
    if step == 0:  # denormal spacing: numpy scales by the fraction first
        values = [(i / div) * delta + start for i in range(num)]
    else:
        values = [i * step + start for i in range(num)]
    values[-1] = end
    return values


def _powers_of_two(start: float, end: float) -> list[float]:
    """``start``, the powers of two strictly between, and ``end`` (GenAI-Perf's default)."""
    values = [start]
    k = 1
    while k <= end:
        if start < k < end:
            values.append(float(k))
        k *= 2
    if end > start:
        values.append(end)
    return values


def _parse_range(text: str, sweep_type: str, flag: str) -> list[float]:
    """The points of ``start:end[:step]`` for one sweep type."""
    parts = text.strip().split(":")
    if len(parts) not in (2, 3) or any(not p.strip() for p in parts):
        raise ValueError(f"{_prefix(flag, text)}expected start:end or start:end:step")
    start = _check_value(_number(parts[0], flag, text), sweep_type, flag, text)
    end = _check_value(_number(parts[1], flag, text), sweep_type, flag, text)
    if start > end:
        raise ValueError(f"{_prefix(flag, text)}start {start:g} is greater than end {end:g}")
    if len(parts) == 3:
        step = _number(parts[2], flag, text)
        if not step > 0:
            raise ValueError(f"{_prefix(flag, text)}step must be greater than 0, got {step:g}")
        n = int(math.floor((end - start) / step + 1e-9)) + 1
        if n > MAX_RANGE_POINTS:
            raise ValueError(f"{_prefix(flag, text)}{n} points is too many; use a larger step")
        return [_check_value(round(start + i * step, 9), sweep_type, flag, text) for i in range(n)]
    if sweep_type == "concurrency":
        return _powers_of_two(start, end)
    if start == end:
        return [start]
    raw = _linspace(start, end, LINEAR_POINTS)
    if sweep_type in INTEGER_SWEEP_TYPES:
        out: list[float] = []
        for v in raw:
            r = float(round(v))
            if r not in out:
                out.append(r)
        return out
    return [float(round(v, 6)) for v in raw]


def sweep_values(
    sweep_type: str,
    range_text: str | None,
    values: Sequence[float] | None,
    flag: str = "--sweep-range",
) -> list[float]:
    """The points of a sweep, in run order.

    Args:
        sweep_type: One of :data:`SWEEP_TYPES`.
        range_text: ``start:end[:step]``, or None when ``values`` is given.
        values: Explicit points, or None when ``range_text`` is given.
        flag: The option named in messages (``--sweep-range``; the list is then
            ``--sweep-list``); empty for no prefix, as the resource model uses it.

    Returns:
        The points as floats (whole numbers for the count types).

    Raises:
        ValueError: Unknown type, both or neither of range and values, or a value the type
            does not allow; the message says what is accepted.
    """
    if sweep_type not in SWEEP_TYPES:
        raise ValueError(f"--sweep-type {sweep_type!r}: expected one of {', '.join(SWEEP_TYPES)}")
    if range_text is not None and values is not None:
        raise ValueError("--sweep-range and --sweep-list: give only one")
    if values is not None:
        list_flag = "--sweep-list" if flag else ""
        shown = ",".join(f"{v:g}" for v in values)
        if not values:
            raise ValueError(f"{_prefix(list_flag, shown)}the list is empty")
        out = [_check_value(float(v), sweep_type, list_flag, shown) for v in values]
        if len(set(out)) != len(out):
            raise ValueError(f"{_prefix(list_flag, shown)}values repeat")
        return out
    if range_text is None:
        raise ValueError("give --sweep-range start:end[:step] or --sweep-list a,b,c")
    return _parse_range(range_text, sweep_type, flag)
