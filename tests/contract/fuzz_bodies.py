"""Bodies schemathesis rarely hits on its own: conversations the server accepts (the schema of
`messages` is open, so random ones are nearly always refused), with odd text and tool call ids,
and compile options that make the compilers and compaction work."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

# Any text, NUL and astral characters included (lone surrogates are not valid JSON text).
TEXT = st.text(max_size=300)
CALL_ID = st.text(min_size=1, max_size=40)
TOOL = st.sampled_from(["read_file", "run_tests", "write_file", "search"])
ARGS = st.dictionaries(st.sampled_from(["path", "query", "content"]), TEXT, max_size=3)
SESSION_ID = st.from_regex(r"\Afz[A-Za-z0-9._:-]{1,30}\Z")
SPECS = st.sampled_from(
    [
        None,
        {"decorators": ["token_limit"]},
        {"decorators": ["compact_tool_results", "token_limit"]},
        {
            "decorators": [
                {"name": "tool_compaction", "params": {"dedupeIdenticalResults": True}},
                "compact_tool_results",
                "token_limit",
            ]
        },
    ]
)


@st.composite
def _tool_round(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = draw(st.lists(CALL_ID, min_size=1, max_size=3, unique=True))
    calls = [
        {
            "id": i,
            "type": "function",
            "function": {"name": draw(TOOL), "arguments": json.dumps(draw(ARGS))},
        }
        for i in ids
    ]
    results = [{"role": "tool", "tool_call_id": i, "content": draw(TEXT)} for i in ids]
    return [{"role": "assistant", "content": None, "tool_calls": calls}, *results]


@st.composite
def conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An OpenAI-format history: user and assistant turns and answered tool calls."""
    turns = draw(
        st.lists(
            st.one_of(
                st.builds(lambda t: [{"role": "user", "content": t}], TEXT),
                st.builds(lambda t: [{"role": "assistant", "content": t}], TEXT),
                _tool_round(),
            ),
            min_size=1,
            max_size=6,
        )
    )
    system = draw(st.lists(st.builds(lambda t: {"role": "system", "content": t}, TEXT), max_size=1))
    return [*system, *(m for turn in turns for m in turn)]


@st.composite
def _anthropic_round(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = draw(st.lists(CALL_ID, min_size=1, max_size=3, unique=True))
    uses = [{"type": "tool_use", "id": i, "name": draw(TOOL), "input": draw(ARGS)} for i in ids]
    results = [
        {
            "type": "tool_result",
            "tool_use_id": i,
            "content": draw(TEXT),
            "is_error": draw(st.booleans()),
        }
        for i in ids
    ]
    return [{"role": "assistant", "content": uses}, {"role": "user", "content": results}]


@st.composite
def anthropic_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An Anthropic-format history: text turns and answered tool uses."""
    turns = draw(
        st.lists(
            st.one_of(
                st.builds(lambda t: [{"role": "user", "content": t}], TEXT),
                st.builds(
                    lambda t: [{"role": "assistant", "content": [{"type": "text", "text": t}]}],
                    TEXT,
                ),
                _anthropic_round(),
            ),
            min_size=1,
            max_size=6,
        )
    )
    return [m for turn in turns for m in turn]


@st.composite
def _gemini_round(draw: st.DrawFn) -> list[dict[str, Any]]:
    names = draw(st.lists(TOOL, min_size=1, max_size=3))
    ids = draw(st.none() | st.lists(CALL_ID, min_size=len(names), max_size=len(names)))
    calls = [
        {"functionCall": {"name": n, "args": draw(ARGS), **({"id": ids[k]} if ids else {})}}
        for k, n in enumerate(names)
    ]
    responses = [
        {
            "functionResponse": {
                "name": n,
                "response": {"output": draw(TEXT)},
                **({"id": ids[k]} if ids else {}),
            }
        }
        for k, n in enumerate(names)
    ]
    return [{"role": "model", "parts": calls}, {"role": "user", "parts": responses}]


@st.composite
def gemini_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """A Gemini-format history: text turns and answered function calls."""
    text = st.builds(lambda t: [{"text": t}], TEXT)
    turns = draw(
        st.lists(
            st.builds(lambda p: [{"role": "user", "parts": p}], text)
            | st.builds(lambda p: [{"role": "model", "parts": p}], text)
            | _gemini_round(),
            min_size=1,
            max_size=6,
        )
    )
    return [m for turn in turns for m in turn]


@st.composite
def _responses_round(draw: st.DrawFn) -> list[dict[str, Any]]:
    ids = draw(st.lists(CALL_ID, min_size=1, max_size=3, unique=True))
    calls = [
        {
            "type": "function_call",
            "call_id": i,
            "name": draw(TOOL),
            "arguments": json.dumps(draw(ARGS)),
        }
        for i in ids
    ]
    outputs = [{"type": "function_call_output", "call_id": i, "output": draw(TEXT)} for i in ids]
    return [*calls, *outputs]


@st.composite
def responses_conversations(draw: st.DrawFn) -> list[dict[str, Any]]:
    """An OpenAI Responses input: messages and answered function calls."""
    turns = draw(
        st.lists(
            st.one_of(
                st.builds(lambda t: [{"role": "user", "content": t}], TEXT),
                st.builds(
                    lambda t: [
                        {
                            "type": "message",
                            "role": "assistant",
                            "content": [{"type": "output_text", "text": t}],
                        }
                    ],
                    TEXT,
                ),
                _responses_round(),
            ),
            min_size=1,
            max_size=6,
        )
    )
    return [m for turn in turns for m in turn]


def _histories() -> st.SearchStrategy[dict[str, Any]]:
    """``messages`` (and their ``format``) in any provider's shape."""
    return st.one_of(
        st.builds(lambda m: {"messages": m}, conversations()),
        st.builds(
            lambda m, s: {"format": "anthropic", "messages": m, **s},
            anthropic_conversations(),
            st.fixed_dictionaries({}, optional={"system": TEXT}),
        ),
        st.builds(
            lambda m, s: {"format": "gemini", "messages": m, **s},
            gemini_conversations(),
            st.fixed_dictionaries(
                {}, optional={"system": st.builds(lambda t: {"parts": [{"text": t}]}, TEXT)}
            ),
        ),
        st.builds(
            lambda m, s: {"format": "responses", "messages": m, **s},
            responses_conversations(),
            st.fixed_dictionaries({}, optional={"instructions": TEXT}),
        ),
    )


def _options() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            "provider": st.sampled_from(
                [
                    "gpt-4o",
                    "claude-sonnet-4",
                    "openai",
                    "anthropic",
                    "gemini",
                    "gemini-2.5-flash",
                    "openai-responses",
                ]
            ),
            "context_window": st.integers(1, 300_000),
            "compiler": SPECS,
        },
    )


def bodies(operation: str, export: dict[str, Any]) -> st.SearchStrategy[Any] | None:
    """Accepted-looking bodies for ``operation`` (``METHOD path``), or None."""
    match operation:
        case "POST /v1/tokens/count" | "POST /v1/sessions/{session_id}/messages":
            return _histories()
        case "POST /v1/compile":
            return st.builds(lambda h, o: {**h, **o}, _histories(), _options())
        case "POST /v1/sessions/{session_id}/compile":
            return _options()
        case "POST /v1/sessions/{session_id}/compact":
            return st.fixed_dictionaries({"kind": st.just("tool_payloads")})
        case "POST /v1/sessions/import":
            return st.builds(
                lambda sid: {**export, "session": {**export["session"], "id": sid}}, SESSION_ID
            )
    return None
