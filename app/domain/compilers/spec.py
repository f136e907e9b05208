"""The JSON compiler spec: a base compiler and an ordered list of decorators.

``{"base": {"name": "current_tool_trace", "params": {}}, "decorators": [{"name": "token_limit",
"params": {"reserve": 4096}}]}``; a bare name stands for a component with no params. The first
decorator listed wraps the base (innermost), the last one is applied last (outermost).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from app.domain.errors import InvalidInput, Path


class Component(BaseModel):
    """A registered compiler or decorator, by name, with its parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1)
    params: dict[str, Any] = Field(default_factory=dict)


def _named(raw: Any) -> Any:
    return {"name": raw} if isinstance(raw, str) else raw


NamedComponent = Annotated[
    Component, BeforeValidator(_named, json_schema_input_type=Component | str)
]


class CompilerSpec(BaseModel):
    """Which compiler to run: a base compiler and the decorators that wrap it, innermost first."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    base: NamedComponent = Component(name="current_tool_trace")
    decorators: tuple[NamedComponent, ...] = ()


DEFAULT_SPEC = CompilerSpec()


def located(err: ValidationError, prefix: Sequence[str | int]) -> list[tuple[Path, str]]:
    """The validation problems of ``err`` as (field path, message), under ``prefix``."""
    return [((*prefix, *problem["loc"]), problem["msg"]) for problem in err.errors()]


def parse_spec(raw: Any, field: Sequence[str | int] = ("compiler",)) -> CompilerSpec:
    """The spec in a JSON document; a bad shape raises InvalidInput naming each field."""
    try:
        return CompilerSpec.model_validate(raw)
    except ValidationError as err:
        raise InvalidInput(located(err, field)) from None


def dotted(path: Sequence[str | int]) -> str:
    """A field path as text: ``("compiler", "decorators", 1, "name")`` is
    ``compiler.decorators[1].name``."""
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else f".{step}" if text else step
    return text
