"""The figures of one sweep point, declared once for everything that sizes, judges or compares.

Why one model: the knee and SLO rules (``results.PointMetrics``), the run digest and the
status (``status.PointStatus``), fixed baseline numbers (``spec.BaselinePoint``) and
``llmbench compare`` all speak of the same seven numbers of a point. Declared four times they
drifted (``ttft_p99_ms`` here, ``ttft_p99`` there, ``j_per_token`` beside
``joules_per_output_token``) and were copied field by field at every hand-over. Each of those
models now *is* a :class:`PointFigures` (it inherits the fields), so a hand-over is
``Other(**figures.figures(), ...)`` and a new figure is one line here.

The field names are the CRD's (``ttftP99Ms``, ``joulesPerOutputToken`` once camelCased by the
inheriting model's alias generator): ``status.points`` and ``spec.baseline.values.points`` are
user-facing API. Figures are never negative; ``llmbench compare``'s metric keys (``ttft_p99``,
``j_per_token``) are tolerance names, mapped onto these fields in one table there.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, Field

from .spec.types import Float

__all__ = ["FIGURE_NAMES", "PointFigures"]


class PointFigures(BaseModel):
    """One swept value and its figures (``None``: not measured); p99s in milliseconds.

    No model config of its own: the inheriting model's (camelCase for the API, the file's keys
    for results) applies to these fields too.
    """

    # The order is the analysis file's (``metrics`` of each point), which stays byte-identical.
    value: Float = Field(description="The swept value (concurrency, rate, ISL or OSL).")
    ttft_p99_ms: Float | None = Field(default=None, ge=0, description="p99 TTFT (ms).")
    itl_p99_ms: Float | None = Field(default=None, ge=0, description="p99 ITL (ms).")
    e2e_p99_ms: Float | None = Field(default=None, ge=0, description="p99 request latency (ms).")
    ott: Float | None = Field(default=None, ge=0, description="Output token throughput (tok/s).")
    rps: Float | None = Field(default=None, ge=0, description="Request throughput (req/s).")
    goodput: Float | None = Field(
        default=None, ge=0, description="Requests meeting every SLO per s."
    )
    joules_per_output_token: Float | None = Field(
        default=None, ge=0, description="GPU energy per output token (J), over the kept GPUs."
    )

    def figures(self) -> dict[str, float | None]:
        """Just these fields (``value`` included), keyed by field name."""
        return {name: getattr(self, name) for name in ("value", *FIGURE_NAMES)}

    @classmethod
    def of(cls, figures: PointFigures, **fields: Any) -> Self:
        """This model with the figures of another (a status point from the analysis' metrics,
        from fixed baseline numbers) and its own ``fields``, validated.

        Example: ``PointStatus.of(baseline_point, name="8", state="Succeeded")``.

        Raises:
            TypeError: a name in ``fields`` is not a field of this model (a typo would
                otherwise vanish in models that ignore unknown keys).
        """
        unknown = sorted(set(fields) - set(cls.model_fields))
        if unknown:
            raise TypeError(f"{cls.__name__} has no field {', '.join(unknown)}")
        return cls.model_validate({**figures.figures(), **fields})


#: The measured figures (every field but ``value``), in declaration order.
FIGURE_NAMES: tuple[str, ...] = tuple(n for n in PointFigures.model_fields if n != "value")
