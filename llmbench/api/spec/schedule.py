"""When a benchmark runs again: the cron schedule, its time zone and what a tick does to a run.

The schedule is checked three ways, cheapest first: its syntax and numeric ranges in CEL (the
API server refuses them at admission), then, in Python only, whether it fires at all (day 30 of
February) and whether its named ranges run forwards, which need a calendar: cronsim.
"""

from __future__ import annotations

import re
import zoneinfo
from datetime import datetime
from typing import Annotated, Literal

import cronsim
from pydantic import Field, Strict

from ..rules import FieldRules, Rule, cel_string, re2_matches

__all__ = [
    "CRON_MACROS",
    "CRON_PATTERN",
    "ConcurrencyPolicy",
    "Schedule",
    "TimeZone",
    "cron_expression",
]

_MONTHS = "JAN|FEB|MAR|APR|MAY|JUN|JUL|AUG|SEP|OCT|NOV|DEC"
_DAYS = "SUN|MON|TUE|WED|THU|FRI|SAT"


def _cron_field(value: str) -> str:
    """One cron field: ``*`` or a value or a range, each with an optional ``/step``, listed."""
    term = rf"(?:\*|{value}(?:-{value})?)(?:/[1-9][0-9]?)?"
    return rf"{term}(?:,{term})*"


_CRON_FIELDS = [
    _cron_field(r"(?:[0-5]?[0-9])"),  # minute 0-59
    _cron_field(r"(?:[01]?[0-9]|2[0-3])"),  # hour 0-23
    _cron_field(r"(?:0?[1-9]|[12][0-9]|3[01])"),  # day of month 1-31
    _cron_field(rf"(?:0?[1-9]|1[0-2]|{_MONTHS})"),  # month 1-12
    _cron_field(rf"(?:0?[0-7]|{_DAYS})"),  # day of week 0-7 (0 and 7 are Sunday)
]
#: Five cron fields with their value ranges, or a macro; names case-insensitive.
CRON_PATTERN = (
    r"(?i)^(?:@(?:yearly|annually|monthly|weekly|daily|hourly)|[ \t]*"
    + r"[ \t]+".join(_CRON_FIELDS)
    + r"[ \t]*)$"
)
_CRON_RANGE = r"[0-9]+-[0-9]+"
#: The five-field form of each macro (cronsim reads only fields).
CRON_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def cron_expression(schedule: str) -> str:
    """The five-field form of a schedule (a macro expanded), as ``cronsim.CronSim`` takes it."""
    text = schedule.strip()
    return CRON_MACROS.get(text.lower(), text)


def _cron_ranges_ascending(schedule: str) -> bool:
    """Every numeric ``a-b`` range has a <= b (Python's form of the CEL ``findAll`` rule)."""
    pairs = (r.split("-") for r in re.findall(_CRON_RANGE, schedule))
    return all(int(lo) <= int(hi) for lo, hi in pairs)


def _cron_fires(schedule: str) -> bool:
    """True when cronsim accepts the schedule (days that exist, ranges in order)."""
    try:
        cronsim.CronSim(cron_expression(schedule), datetime(2000, 1, 1))
    except cronsim.CronSimError:
        return False
    return True


def _zone_exists(name: str) -> bool:
    """True for an IANA time zone name this Python knows (``Europe/Berlin``, ``UTC``)."""
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


TimeZone = Annotated[
    str,
    Strict(),
    Field(min_length=1, max_length=64),
    FieldRules(
        (
            Rule(
                name="spec.time-zone-exists",
                message="timeZone must be an IANA time zone name, e.g. Europe/Berlin or UTC",
                cel=None,
                python_only="needs the time zone database (CronJob's own timeZone is checked "
                "by the controller, not at admission, for the same reason)",
                check=_zone_exists,
            ),
        )
    ),
]

ConcurrencyPolicy = Literal["Forbid", "Replace"]


Schedule = Annotated[
    str,
    Strict(),
    Field(max_length=128),
    FieldRules(
        (
            Rule(
                name="spec.schedule-syntax",
                message="schedule must be 5 cron fields (minute 0-59, hour 0-23, day 1-31, "
                'month 1-12 or JAN-DEC, weekday 0-7 or SUN-SAT), e.g. "0 2 * * *", or '
                "@hourly, @daily, @weekly, @monthly, @yearly",
                cel=f"self.matches({cel_string(CRON_PATTERN)})",
                check=lambda v: re2_matches(CRON_PATTERN, v),
            ),
            Rule(
                name="spec.schedule-ranges-ascending",
                message="schedule ranges must run from low to high, e.g. 1-5, not 5-1",
                cel=f"!self.matches({cel_string(CRON_PATTERN)}) || "
                f"self.findAll({cel_string(_CRON_RANGE)})"
                ".all(r, int(r.split('-')[0]) <= int(r.split('-')[1]))",
                check=lambda v: not re2_matches(CRON_PATTERN, v) or _cron_ranges_ascending(v),
            ),
            Rule(
                name="spec.schedule-fires",
                message="schedule never fires or has a named range running backwards "
                '(e.g. day 30 in "0 0 30 2 *", or FRI-MON); pick days that exist and ranges '
                "from low to high",
                cel=None,
                python_only="needs a calendar (which months have a day 30) and the name tables "
                "of months and weekdays; checked with cronsim",
                # Only once the CEL rules hold, so one mistake is reported once.
                check=lambda v: (
                    not re2_matches(CRON_PATTERN, v)
                    or not _cron_ranges_ascending(v)
                    or _cron_fires(v)
                ),
            ),
        )
    ),
]
