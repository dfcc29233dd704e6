"""What every result file shares: the base model whose dump is the file, and reading one back.

See :mod:`llmbench.api.results` for the two rules that keep a file written, read back and
written again byte-identical (required vs optional keys, and the text format).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

__all__ = ["ResultFileError", "ResultModel", "read_result", "validate_result"]

M = TypeVar("M", bound="ResultModel")


class ResultModel(BaseModel):
    """The base of every result model: unknown keys are errors, dumps keep the file's keys."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: aliases as keys, optional keys only when they were set."""
        return self.model_dump(by_alias=True, exclude_unset=True)

    def to_json(self, indent: int | None = None) -> str:
        """The JSON text, formatted by :func:`json.dumps` as the artefacts always were."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def file_location(cls, loc: tuple[int | str, ...]) -> str:
        """Where the field at ``loc`` sits in the file, for error messages (the field path;
        a model whose file nests fields differently says so)."""
        return ".".join(str(p) for p in loc)


class ResultFileError(ValueError):
    """A result file that is missing, not JSON, or not the model; the message names the file
    and, for a model mismatch, each offending field."""


def read_result(cls: type[M], path: Path) -> M:
    """``path`` parsed into ``cls``; :class:`ResultFileError` naming the file and the field."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ResultFileError(f"{path}: cannot read ({exc.strerror or exc})") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ResultFileError(f"{path}: not valid JSON ({exc})") from None
    return validate_result(cls, data, str(path))


def validate_result(cls: type[M], data: Any, source: str) -> M:
    """``data`` (parsed JSON) as ``cls``; :class:`ResultFileError` naming ``source`` and each
    offending field (the first five)."""
    try:
        return cls.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{cls.file_location(tuple(e['loc'])) or '(top level)'}: {e['msg']}"
            for e in exc.errors()[:5]
        )
        more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
        raise ResultFileError(f"{source}: not a {cls.__name__}: {problems}{more}") from None
