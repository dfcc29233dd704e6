"""Flag value parsers shared by the subcommands: every bad value is an error naming its flag."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path

from llmbench.runner.point.metrics import SLO_KEYS

__all__ = [
    "SLO_KEYS",
    "non_negative_int",
    "parse_headers",
    "parse_limits",
    "parse_slo",
    "positive_float",
    "positive_int",
    "read_api_key",
]

def _number(flag: str, kind: type[int] | type[float], text: str) -> int | float:
    try:
        return kind(text)
    except ValueError:
        noun = "an integer" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"{flag} expects {noun}, got {text!r}") from None


def positive_int(flag: str) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers ≥ 1."""

    def parse(text: str) -> int:
        v = int(_number(flag, int, text))
        if v < 1:
            raise argparse.ArgumentTypeError(f"{flag} must be at least 1, got {v}")
        return v

    return parse


def non_negative_int(flag: str) -> Callable[[str], int]:
    """An argparse ``type`` accepting integers ≥ 0."""

    def parse(text: str) -> int:
        v = int(_number(flag, int, text))
        if v < 0:
            raise argparse.ArgumentTypeError(f"{flag} must be 0 or more, got {v}")
        return v

    return parse


def positive_float(flag: str) -> Callable[[str], float]:
    """An argparse ``type`` accepting finite numbers > 0."""

    def parse(text: str) -> float:
        v = float(_number(flag, float, text))
        if not 0 < v < math.inf:
            raise argparse.ArgumentTypeError(f"{flag} must be greater than 0, got {text}")
        return v

    return parse


def parse_limits(
    items: Sequence[str], flag: str, keys: Sequence[str], unit: str = "a number"
) -> dict[str, float]:
    """``KEY:VALUE`` items with KEY from ``keys`` and VALUE > 0 (``--goodput``, ``--slo``).

    Errors are ValueErrors that name ``flag``, the item and what would be accepted.
    """
    out: dict[str, float] = {}
    for item in items:
        key, sep, raw = item.partition(":")
        key = key.strip().lower()
        if not sep or key not in keys:
            raise ValueError(
                f"{flag} item {item!r}: expected KEY:VALUE with KEY one of {', '.join(keys)}"
            )
        try:
            value = float(raw)
        except ValueError:
            raise ValueError(f"{flag} item {item!r}: {raw!r} is not {unit}") from None
        if not value > 0:
            raise ValueError(f"{flag} item {item!r}: the limit must be greater than 0")
        out[key] = value
    return out


def parse_slo(items: Sequence[str], flag: str = "--goodput") -> dict[str, float]:
    """``ttft:300 itl:20 e2e:5000`` → {"ttft": 300.0, ...}: per-request limits in ms."""
    return parse_limits(items, flag, SLO_KEYS, "a number of milliseconds")


def parse_headers(items: Sequence[str]) -> dict[str, str]:
    """``-H NAME:VALUE`` items; header values may be secrets, so they are never echoed."""
    headers: dict[str, str] = {}
    for h in items:
        k, sep, v = h.partition(":")
        if not sep or not k.strip():
            raise ValueError(f"-H/--header {h!r}: expected NAME:VALUE")
        headers[k.strip()] = v.strip()
    return headers


def read_api_key(args: argparse.Namespace) -> str | None:
    """The API key from ``--api-key-env`` or ``--api-key-file``; never from the command line,
    where it would land in shell history and ``ps``."""
    if args.api_key_env and args.api_key_file:
        raise ValueError("--api-key-env and --api-key-file: give only one")
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            raise ValueError(
                f"--api-key-env {args.api_key_env}: that environment variable is not set"
            )
        return key
    if args.api_key_file:
        try:
            return Path(args.api_key_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise ValueError(f"--api-key-file {args.api_key_file}: {exc.strerror}") from None
    return None
