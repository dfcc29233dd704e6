"""Flag value parsers shared by the subcommands: every bad value is an error naming its flag."""

from __future__ import annotations

import argparse
import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from llmbench.runner.point.metrics import SLO_KEYS

__all__ = [
    "GOODPUT_NAMES",
    "SLO_KEYS",
    "non_negative_int",
    "normalize_endpoint",
    "normalize_url",
    "on_off",
    "parse_extra_inputs",
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


def non_negative_float(flag: str) -> Callable[[str], float]:
    """An argparse ``type`` accepting finite numbers ≥ 0."""

    def parse(text: str) -> float:
        v = float(_number(flag, float, text))
        if not 0 <= v < math.inf:
            raise argparse.ArgumentTypeError(f"{flag} must be 0 or more, got {text}")
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


#: GenAI-Perf's ``--goodput`` names → ours (``-g request_latency:300`` is ``e2e:300``).
GOODPUT_NAMES = {
    "time_to_first_token": "ttft",
    "inter_token_latency": "itl",
    "request_latency": "e2e",
    "time_to_second_token": "ttst",
    "output_token_throughput_per_user": "otpu",
}


def parse_slo(items: Sequence[str], flag: str = "--goodput") -> dict[str, float]:
    """``ttft:300 itl:20 e2e:5000`` → {"ttft": 300.0, ...}: per-request limits.

    GenAI-Perf's names are accepted too (``time_to_first_token:300``,
    ``output_token_throughput_per_user:600``); both spell the same limit. Latencies are in
    milliseconds; ``otpu`` (output tokens per second per request, 1000 / ITL ms) is a floor.
    """
    keys = (*SLO_KEYS, *GOODPUT_NAMES)
    parsed = parse_limits(items, flag, keys, "a number")
    out: dict[str, float] = {}
    for key, value in parsed.items():
        ours = GOODPUT_NAMES.get(key, key)
        if ours in out:
            raise ValueError(f"{flag}: {key} repeats a limit already given for {ours}")
        out[ours] = value
    return out


def _typed(value: str) -> bool | int | float | str:
    """A ``key:value`` value typed as GenAI-Perf types it.

    ``true``/``false`` (any case) → bool; only digits → int; one ``.`` with digits around it
    → float; anything else stays a string (so ``-1`` and ``1e-3`` are strings, as in
    GenAI-Perf: give them in the JSON form to send numbers).
    """
    if value.lower() in ("true", "false"):
        return value.lower() == "true"
    if value.isdigit():
        return int(value)
    if value.count(".") == 1 and value != "." and value.replace(".", "").isdigit():
        return float(value)
    return value


def parse_extra_inputs(items: Sequence[str]) -> dict[str, Any]:
    """``--extra-inputs`` items, parsed exactly as GenAI-Perf 0.0.16 parses them.

    Three forms, merged in order into one mapping sent with every request:

    * a JSON object, ``'{"ignore_eos": true, "temperature": 0}'`` (starts with ``{`` and ends
      with ``}``): merged as is, a later key overriding an earlier one;
    * ``name:value`` with exactly one ``:``: the value typed by :func:`_typed`
      (``ignore_eos:true`` → ``True``, ``max_tokens:256`` → ``256``, ``temperature:0.7`` →
      ``0.7``); a name already given (in any form) is an error, as in GenAI-Perf;
    * a bare ``name`` (no ``:``): sent as ``"name": null``, GenAI-Perf's "input as a flag".

    Anything else (an empty name or value, two ``:``, a JSON object that does not parse or is
    not an object) is a ValueError naming ``--extra-inputs``.

    Example::

        parse_extra_inputs(["ignore_eos:true", '{"stop": ["END"], "seed": -1}', "echo"])
        # -> {"ignore_eos": True, "stop": ["END"], "seed": -1, "echo": None}
    """
    out: dict[str, Any] = {}
    for item in items:
        if item.startswith("{") and item.endswith("}"):
            try:
                obj = json.loads(item)
            except json.JSONDecodeError as exc:
                raise ValueError(
                    f"--extra-inputs {item!r}: not valid JSON ({exc.msg} at column {exc.colno})"
                ) from None
            if not isinstance(obj, dict):
                raise ValueError(f"--extra-inputs {item!r}: expected a JSON object")
            out.update(obj)
            continue
        colons = item.count(":")
        if colons == 0:
            if not item.strip():
                raise ValueError("--extra-inputs '': expected NAME, NAME:VALUE or a JSON object")
            out[item] = None
            continue
        if colons > 1:
            raise ValueError(
                f"--extra-inputs {item!r}: expected NAME:VALUE with one ':' (GenAI-Perf's "
                f"form); for a value containing ':' pass a JSON object, e.g. "
                f"'{{\"name\": \"a:b\"}}'"
            )
        name, value = item.split(":", 1)
        if not name or not value:
            raise ValueError(
                f"--extra-inputs {item!r}: the name or the value is empty; expected NAME, "
                "NAME:VALUE or a JSON object"
            )
        if name in out:
            raise ValueError(f"--extra-inputs {item!r}: {name} is already given")
        out[name] = _typed(value)
    return out


def normalize_endpoint(path: str | None) -> str | None:
    """``--endpoint`` in GenAI-Perf's form (``v1/chat/completions``) or ours (with ``/``).

    GenAI-Perf joins the URL and the endpoint with a ``/``, so both spellings name the same
    path; the spec stores it with its leading ``/``.
    """
    if path is None:
        return None
    stripped = path.strip()
    if not stripped:
        raise ValueError("--endpoint: empty; give a path such as v1/chat/completions")
    if "://" in stripped:
        raise ValueError(
            f"--endpoint {path!r}: a path such as v1/chat/completions, not a URL "
            "(the server goes in -u/--url)"
        )
    return "/" + stripped.lstrip("/")


def normalize_url(url: str) -> str:
    """``-u localhost:8000`` (GenAI-Perf's form, no scheme) means ``http://localhost:8000``."""
    u = url.strip()
    return u if "://" in u else f"http://{u}"


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


def on_off(flag: str) -> Any:
    """GenAI-Perf's ``type=bool`` flags: bare, or with true/false (1/0, yes/no)."""

    def parse(text: str) -> bool:
        word = text.strip().lower()
        if word in ("true", "1", "yes", "on"):
            return True
        if word in ("false", "0", "no", "off"):
            return False
        raise argparse.ArgumentTypeError(f"{flag} expects true or false, got {text!r}")

    return parse
