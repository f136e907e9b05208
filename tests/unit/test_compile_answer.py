"""A compile's answer (app/api/routes/compilation.py ``encoded``) is the JSON pydantic makes of
it, byte for byte, though its messages are encoded by orjson: over generated messages of JSON
values (what messages hold), system prompts and omitted fields, and with an integer orjson
refuses."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st

from app.api.compile_schemas import CompileResult, CompileTokens
from app.api.routes.compilation import ID_FIELD, encoded
from tests.unit.strategies import json_objects, json_values

OMITTABLE = ("system", "instructions", "tools")


def result(messages: list[dict[str, Any]], system: Any, tools: Any) -> CompileResult:
    tokens = CompileTokens(
        total=12,
        sections={"messages": 12},
        context_window=128_000,
        budget_used_pct=0.01,
        encoding="o200k_base",
        exact=False,
        note="estimated with o200k_base",
        count="estimated",
    )
    return CompileResult(
        compile_id="c-1",
        provider="openai",
        format="openai",
        system=system,
        messages=messages,
        response_format=None,
        tokens=tokens,
        left_out=[],
        warnings=["w"],
        seq_range=(1, 2),
        steps=[],
        compactions=[],
        tools=tools,
    )


@settings(max_examples=300)
@given(
    messages=st.lists(json_objects, max_size=5),
    system=st.none() | st.text(max_size=8) | json_objects,
    tools=st.none() | st.lists(json_objects, max_size=2),
    omit=st.sets(st.sampled_from(OMITTABLE)),
    huge=st.booleans(),
)
@example(
    messages=[{"x": 1.5e300, "y": -0.0, "z": 1e-7}], system=None, tools=None, omit=set(), huge=False
)
def test_the_answer_is_what_pydantic_makes_of_it(
    messages: list[dict[str, Any]],
    system: Any,
    tools: list[dict[str, Any]] | None,
    omit: set[str],
    huge: bool,
) -> None:
    if huge:  # beyond 64 bits: orjson refuses it, and pydantic encodes the whole answer
        messages = [*messages, {"role": "tool", "content": [{"n": 2**80, "m": -(2**70)}]}]
    made = result(messages, system, tools)
    answer = encoded(made, omit)
    assert answer == made.model_dump_json(exclude=omit or None).encode()
    assert answer.startswith(ID_FIELD)  # what the answer cache keys on


@given(value=json_values)
def test_any_json_value_in_a_message_encodes_alike(value: Any) -> None:
    made = result([{"role": "user", "content": value}], None, None)
    assert encoded(made, set()) == made.model_dump_json().encode()
