"""Request and response bodies of the API (pydantic), shared by the handlers and OpenAPI."""

from __future__ import annotations

import dataclasses
import math
from typing import Annotated, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictFloat,
    StrictInt,
    field_validator,
)

from reactive_rag.run import Budget

__all__ = ["BUDGET_FIELDS", "RunRequest"]

CollectionName = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")]

BUDGET_FIELDS: dict[str, type] = {
    f.name: type(f.default) for f in dataclasses.fields(Budget)
}
"""Budget fields a request may override, and whether each is a bool, an int or a float."""

_BUDGET_MAX = 1_000_000


class RunRequest(BaseModel):
    """Body of ``POST /v1/runs``."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    question: Annotated[str, Field(min_length=1, max_length=4000)]
    mode: Literal["agent", "rag"] = "agent"
    collections: Annotated[list[CollectionName], Field(max_length=16)] | None = None
    budget: Annotated[dict[str, StrictBool | StrictInt | StrictFloat],
                      Field(max_length=len(BUDGET_FIELDS))] = Field(default_factory=dict)

    @field_validator("question")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the question is blank")
        if "\x00" in value:
            raise ValueError("the question contains a NUL character")
        return value

    @field_validator("budget")
    @classmethod
    def _budget(cls, value: dict[str, bool | int | float]) -> dict[str, bool | int | float]:
        for name, limit in value.items():
            kind = BUDGET_FIELDS.get(name)
            if kind is None:
                raise ValueError(f"unknown budget field {name[:40]!r}; known: "
                                 f"{sorted(BUDGET_FIELDS)}")
            if (kind is bool) != isinstance(limit, bool):
                raise ValueError(f"budget {name} must be "
                                 f"{'true or false' if kind is bool else 'a number'}")
            if kind is bool:
                continue
            if kind is int and not isinstance(limit, int):
                raise ValueError(f"budget {name} must be an integer")
            if not math.isfinite(limit) or not 0 < limit <= _BUDGET_MAX:
                raise ValueError(f"budget {name} must be > 0 and <= {_BUDGET_MAX}")
        return value
