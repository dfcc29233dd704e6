"""Rule machinery of the resource model: one declaration, enforced twice, reported readably.

Why: the API server (through the CRD) and the runner (through pydantic) must refuse the same
specs with the same words, or a Job starts for a spec that can only fail. So a cross-field rule
is a :class:`Rule` record: a CEL expression that the CRD carries as an
``x-kubernetes-validations`` entry, a Python predicate that the model's validator runs, one
message for both, and the field the message points at. The two expressions sit side by side in
the declaration, and the e2e test feeds the same invalid specs to both.

The other half is reporting: pydantic's :class:`~pydantic.ValidationError` is turned into
:class:`SpecIssue` records that name the manifest path (``spec.load.requestRate``, camelCase as
written), say what is accepted, and suggest the closest key for an unknown one.
"""

from __future__ import annotations

import difflib
import re
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from types import MappingProxyType
from typing import Annotated, Any, ClassVar, Literal, Self, Union, get_args, get_origin

from pydantic import (
    BaseModel,
    ConfigDict,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

__all__ = [
    "RULES_DEFERRED",
    "ApiModel",
    "FieldRules",
    "Rule",
    "RuleViolations",
    "SpecError",
    "SpecIssue",
    "camel",
    "cel_string",
    "field_rules",
    "issues_from_validation_error",
    "model_type",
    "re2_matches",
    "rule_issues",
]


@dataclass(frozen=True)
class SpecIssue:
    """One problem in a spec: where it is (the manifest path) and how to fix it."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


class SpecError(ValueError):
    """Every issue found in a spec, one per line, each naming its field path.

    Attributes:
        issues: The problems, in the order found.
    """

    def __init__(self, issues: list[SpecIssue]) -> None:
        self.issues = issues
        super().__init__("\n".join(str(i) for i in issues))


@dataclass(frozen=True)
class Rule:
    """A cross-field rule, declared once and enforced by both the API server and Python.

    Attributes:
        name: A stable identifier (``target.url-scheme``), used in docs and tests.
        message: What is wrong and how to fix it; the CEL rule's ``message`` and the Python
            issue's text are this same string.
        check: The Python predicate: true when the object obeys the rule. It is handed the
            validated model instance, so every field already has its type and default.
        cel: The CEL expression (``self`` is the object the rule sits on), or None when CEL
            cannot say it; then ``python_only`` says why.
        field_path: The field the message points at, relative to the object (``.range``), or
            None for the object itself. It becomes the CEL ``fieldPath`` and the issue path.
        python_only: Why the rule has no CEL form (None for rules that have one).
    """

    name: str
    message: str
    check: Callable[[Any], bool]
    cel: str | None
    field_path: str | None = None
    python_only: str | None = None

    def __post_init__(self) -> None:
        if (self.cel is None) == (self.python_only is None):
            raise ValueError(f"rule {self.name}: give a CEL expression or say why there is none")
        if self.field_path is not None and not self.field_path.startswith("."):
            raise ValueError(f"rule {self.name}: fieldPath must start with '.'")

    def validation(self) -> dict[str, str]:
        """The ``x-kubernetes-validations`` entry of this rule (CEL rules only)."""
        if self.cel is None:
            raise ValueError(f"rule {self.name} has no CEL form: {self.python_only}")
        out = {"rule": self.cel, "message": self.message}
        if self.field_path is not None:
            out["fieldPath"] = self.field_path
        return out


class RuleViolations(ValueError):
    """The broken rules of one object, raised by its model validator.

    Why one exception for all of them: a pydantic validator reports one error per raise, and a
    user should see every broken rule at once. :func:`issues_from_validation_error` unpacks it.

    Attributes:
        failures: ``(field_path, message)`` pairs; field_path is relative (``.range``) or "".
    """

    def __init__(self, failures: list[tuple[str, str]]) -> None:
        self.failures = failures
        super().__init__("; ".join(f"{p.lstrip('.') or 'object'}: {m}" for p, m in failures))


def camel(name: str) -> str:
    """The manifest key of a Python field: ``e2e_p99_ms`` -> ``e2eP99Ms``.

    Why not pydantic's ``to_camel``: it capitalises after digits (``e2EP99Ms``), which is not
    how the resource spells its keys.
    """
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


#: Validation context that defers every rule to :func:`rule_issues` (the API server's order:
#: the schema first, then all rules at once).
RULES_DEFERRED: Mapping[str, bool] = MappingProxyType({"llmbench.api/defer-rules": True})


def _deferred(info: ValidationInfo) -> bool:
    context = info.context
    return isinstance(context, Mapping) and bool(context.get("llmbench.api/defer-rules"))


def _schema_extra(schema: dict[str, Any], cls: type[Any]) -> None:
    """Adds the class's CEL rules to its JSON schema (pydantic's ``json_schema_extra`` hook)."""
    rules: tuple[Rule, ...] = getattr(cls, "RULES", ())
    cel = [r.validation() for r in rules if r.cel is not None]
    if cel:
        schema["x-kubernetes-validations"] = cel


class ApiModel(BaseModel):
    """Base of every resource type: camelCase keys, no unknown fields, rules enforced.

    Python code may use snake_case names (``Load(request_rate=2)``); manifests are validated by
    alias only (see :meth:`llmbench.api.Spec.from_manifest`), as the API server reads them.
    """

    model_config = ConfigDict(
        extra="forbid",
        alias_generator=camel,
        validate_by_alias=True,
        validate_by_name=True,
        json_schema_extra=_schema_extra,
    )

    #: The cross-field rules of this object, in the order they are reported.
    RULES: ClassVar[tuple[Rule, ...]] = ()

    @model_validator(mode="after")
    def _enforce_rules(self, info: ValidationInfo) -> Self:
        """Runs every rule of the object and reports all that fail, not just the first.

        Skipped under :data:`RULES_DEFERRED`, where :func:`rule_issues` checks the whole tree
        afterwards; a model built in code is checked here, at construction.
        """
        if _deferred(info):
            return self
        failures = self._rule_failures()
        if failures:
            raise RuleViolations(failures)
        return self

    def _rule_failures(self) -> list[tuple[str, str]]:
        """The object's broken rules, then (when none is broken) its Python-only residue."""
        failures = [(r.field_path or "", r.message) for r in self.RULES if not r.check(self)]
        return failures or self._after_rules()

    def _after_rules(self) -> list[tuple[str, str]]:
        """Python-only checks that need the object to obey its declared rules first."""
        return []


@dataclass(frozen=True)
class FieldRules:
    """Rules on one field's value, as ``Annotated`` metadata: ``Annotated[str, FieldRules(...)]``.

    Why not on the object: a rule that reads one field should be reported even when a sibling
    field is invalid (an object's own rules run only once all its fields parsed). The CEL lands
    on the field's schema (``self`` is the value); the Python check is handed the value.
    """

    rules: tuple[Rule, ...]

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        """The field's own schema, then the rules (pydantic's hook for Annotated metadata)."""
        return core_schema.with_info_after_validator_function(self._enforce, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        """The field's JSON schema with the rules' CEL, which the CRD keeps where it lands."""
        out = handler(schema)
        out["x-kubernetes-validations"] = [r.validation() for r in self.rules if r.cel]
        return out

    def _enforce(self, value: Any, info: ValidationInfo) -> Any:
        """Runs every rule on the parsed value; all failures are reported together."""
        if _deferred(info):
            return value
        failures = [(r.field_path or "", r.message) for r in self.rules if not r.check(value)]
        if failures:
            raise RuleViolations(failures)
        return value


def field_rules(info: FieldInfo) -> tuple[Rule, ...]:
    """The :class:`FieldRules` of a field, found in its metadata or inside ``X | None``."""

    def inside(annotation: Any) -> list[Rule]:
        found: list[Rule] = []
        for arg in get_args(annotation):
            found.extend(arg.rules if isinstance(arg, FieldRules) else inside(arg))
        return found

    direct = [r for m in info.metadata if isinstance(m, FieldRules) for r in m.rules]
    return tuple(direct + inside(info.annotation))


def model_type(annotation: Any) -> type[ApiModel] | None:
    """The resource type a field holds (``Sweep`` for ``Sweep | None``), or None for scalars."""
    for candidate in (annotation, *get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, ApiModel):
            return candidate
    return None


def rule_issues(model: ApiModel, path: str) -> list[SpecIssue]:
    """Every broken rule in a parsed tree, each with its manifest path.

    Why a walk instead of the validators: pydantic stops at an object whose child failed, so
    a cross-object rule would go unreported beside a broken nested rule; the API server, and
    this walk, check all of them. Order: an object's own rules, then its fields in order.
    """
    issues: list[SpecIssue] = []
    issues.extend(SpecIssue(path + p, m) for p, m in model._rule_failures())
    for name, info in type(model).model_fields.items():
        value = getattr(model, name)
        if value is None:
            continue
        sub = f"{path}.{info.alias or name}"
        issues.extend(
            SpecIssue(sub + (r.field_path or ""), r.message)
            for r in field_rules(info)
            if not r.check(value)
        )
        if isinstance(value, ApiModel):
            issues.extend(rule_issues(value, sub))
    return issues


def cel_string(text: str) -> str:
    """``text`` as a CEL single-quoted string literal (backslashes and quotes escaped)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


@cache
def _re2_compile(pattern: str) -> re.Pattern[str]:
    # RE2's ``$`` (without the m flag) matches only at the very end of the text; Python's also
    # matches before a final newline. Our patterns use ``$`` only as the final anchor.
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def re2_matches(pattern: str, text: str) -> bool:
    """What CEL's ``text.matches(pattern)`` answers, for the patterns this package uses.

    CEL's ``matches`` is an unanchored RE2 search; our patterns anchor themselves with ``^``
    and ``$`` and stay within the syntax RE2 and Python share (no ``\\s``, whose classes
    differ; explicit ``[ \\t]`` instead).
    """
    return _re2_compile(pattern).search(text) is not None


# ----------------------------------------------------------------------------------------------
# pydantic errors -> SpecIssue
# ----------------------------------------------------------------------------------------------

_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "dict_type": "a mapping",
    "list_type": "a list",
    "literal_error": "one of the listed values",
}


def _unwrap(tp: Any) -> Any:
    """``X | None`` -> ``X``; anything else unchanged."""
    if get_origin(tp) in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _field_by_key(model: type[BaseModel], key: Any) -> FieldInfo | None:
    """The field of ``model`` whose manifest key (alias) is ``key``."""
    for name, info in model.model_fields.items():
        if (info.alias or name) == key:
            return info
    return None


#: What a list's items are, in a message (``must be a list of strings``).
_ITEM_NAMES: dict[Any, str] = {float: "numbers", int: "integers", str: "strings",
                               bool: "true/false values", dict: "mappings"}


def _list_of(annotation: Any) -> str:
    """``a list of <items>`` for a ``list[...]`` field's annotation (``a list`` when the
    items are not named here)."""
    args = get_args(annotation)
    item = args[0] if get_origin(annotation) is list and args else None
    while get_origin(item) is Annotated:
        item = get_args(item)[0]
    if isinstance(item, type) and issubclass(item, BaseModel):
        return "a list of mappings"
    name = _ITEM_NAMES.get(get_origin(item) or item)
    return f"a list of {name}" if name else "a list"


def _walk(root: type[BaseModel], loc: Iterable[Any]) -> tuple[type[BaseModel] | None, Any]:
    """Follows a pydantic ``loc`` from ``root``: the innermost model and the last field type."""
    model: type[BaseModel] | None = root
    annotation: Any = root
    for key in loc:
        if model is None:
            return None, None
        info = _field_by_key(model, key)
        if info is None:
            return model, None
        annotation = _unwrap(info.annotation)
        inner = get_origin(annotation) or annotation
        model = annotation if isinstance(inner, type) and issubclass(inner, BaseModel) else None
    return model, annotation


def _enum_values(annotation: Any) -> tuple[str, ...]:
    """The allowed values of a ``Literal`` annotation (possibly wrapped in ``Annotated``)."""
    while get_origin(annotation) is not None and get_origin(annotation) is not Literal:
        args = get_args(annotation)
        if not args:
            break
        annotation = args[0]
    if get_origin(annotation) is Literal:
        return tuple(str(a) for a in get_args(annotation))
    return ()


def _path(prefix: str, loc: Iterable[Any]) -> str:
    """``('sweep', 'values', 1)`` -> ``spec.sweep.values[1]``."""
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out = f"{out}.{part}" if out else str(part)
    return out


def _unknown_field(root: type[BaseModel], loc: tuple[Any, ...]) -> str:
    """'unknown field' with the closest known key, or the list of keys when none is close."""
    model, _ = _walk(root, loc[:-1])
    key = str(loc[-1])
    if model is None:
        return "unknown field"
    known = [info.alias or name for name, info in model.model_fields.items()]
    by_name = {name: info.alias or name for name, info in model.model_fields.items()}
    if key in by_name:  # a snake_case Python name written into a manifest
        return f"unknown field; did you mean {by_name[key]}?"
    near = difflib.get_close_matches(key, known, n=1)
    return (
        f"unknown field; did you mean {near[0]}?"
        if near
        else (f"unknown field; known: {', '.join(known)}")
    )


def _number(value: Any) -> str:
    """A bound as the old messages showed it (``0``, ``0.5``, ``1``)."""
    return f"{value:g}" if isinstance(value, (int, float)) else str(value)


def _message(root: type[BaseModel], err: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The (relative path suffix, message) pairs of one pydantic error."""
    kind: str = err["type"]
    raw = err.get("input")
    ctx: Mapping[str, Any] = err.get("ctx") or {}
    loc: tuple[Any, ...] = tuple(err["loc"])
    if kind == "value_error" and isinstance(ctx.get("error"), RuleViolations):
        return list(ctx["error"].failures)
    if kind == "value_error":
        return [("", str(ctx.get("error", err["msg"])))]
    if kind == "missing":
        return [("", "required")]
    if kind == "extra_forbidden":
        return [("", _unknown_field(root, loc))]
    if kind in ("model_type", "model_attributes_type"):
        if raw is None:
            return [("", "must be a mapping, not null")]
        return [("", f"expected a mapping, got {type(raw).__name__}")]
    if kind == "literal_error":
        _, annotation = _walk(root, loc)
        allowed = _enum_values(annotation) or (ctx.get("expected", ""),)
        return [("", f"{raw!r}: expected one of {', '.join(allowed)}")]
    if kind == "greater_than_equal":
        return [("", f"{raw!r}: must be at least {_number(ctx['ge'])}")]
    if kind == "greater_than":
        return [("", f"{raw!r}: must be greater than {_number(ctx['gt'])}")]
    if kind == "less_than_equal":
        return [("", f"{raw!r}: must be at most {_number(ctx['le'])}")]
    if kind == "less_than":
        return [("", f"{raw!r}: must be less than {_number(ctx['lt'])}")]
    if kind == "finite_number":
        return [("", f"must be a finite number, got {raw!r}")]
    if kind == "string_pattern_mismatch":  # the field's description says what is allowed
        model, _ = _walk(root, loc[:-1])
        info = _field_by_key(model, loc[-1]) if model is not None and loc else None
        hint = f": {info.description}" if info is not None and info.description else ""
        return [("", f"{raw!r} does not match {ctx['pattern']}{hint}")]
    if kind == "string_too_short":
        return [("", "must not be empty")]
    if kind == "string_too_long":
        return [("", f"must be at most {ctx['max_length']} characters")]
    if kind == "too_short":
        return [("", f"must have at least {ctx['min_length']} item(s)")]
    if kind == "too_long" and isinstance(raw, str):
        return [("", f"must be at most {ctx['max_length']} characters")]
    if kind == "too_long":
        return [("", f"must have at most {ctx['max_length']} items")]
    if kind in _TYPE_NAMES:
        what = _list_of(_walk(root, loc)[1]) if kind == "list_type" else _TYPE_NAMES[kind]
        if raw is None:
            return [("", f"must be {what}, not null")]
        return [("", f"must be {what}, got {raw!r}")]
    return [("", str(err["msg"]))]  # pragma: no cover - a pydantic error we do not map


def issues_from_validation_error(
    err: ValidationError, root: type[BaseModel], prefix: str = "spec"
) -> list[SpecIssue]:
    """Every problem of a failed validation as :class:`SpecIssue` records with manifest paths.

    Args:
        err: What pydantic raised validating ``root`` by alias.
        root: The model validated (its fields resolve the paths and the "did you mean" hints).
        prefix: Path of ``root`` in the manifest (``spec``).

    Returns:
        One issue per problem (a :class:`RuleViolations` gives one per broken rule), in
        pydantic's order, duplicates dropped.
    """
    out: list[SpecIssue] = []
    for e in err.errors(include_url=False):
        loc = tuple(e["loc"])
        if e["type"] == "invalid_key" or (loc and loc[-1] == "[key]"):
            # a mapping key that is not a string: name the mapping, not a made-up child
            parent = loc[:-1] if e["type"] == "invalid_key" else loc[:-2]
            issue = SpecIssue(_path(prefix, parent), f"keys must be strings, got {e['input']!r}")
            if issue not in out:
                out.append(issue)
            continue
        base = _path(prefix, loc)
        for suffix, message in _message(root, e):
            issue = SpecIssue(base + suffix if base else suffix.lstrip("."), message)
            if issue not in out:
                out.append(issue)
    return out
