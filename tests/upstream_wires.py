"""The upstream stub's steps and what its two providers' formats share (tests/upstreams.py serves
them; tests/upstream_openai.py and tests/upstream_anthropic.py are the formats).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, Protocol

Provider = Literal["openai", "anthropic", "responses"]
ErrorKind = Literal["overflow", "rate_limit", "server", "overloaded"]
Json = dict[str, Any]

DEFAULT_TEXT = "Done: the task is complete."
FILLER = "The quick brown fox jumps over the lazy dog. "
TEXT_PIECE = 16  # characters of text per streamed delta
ARGUMENTS_PIECE = 8  # characters of tool-call arguments per streamed delta
EXAMPLES: Json = {"string": "example", "integer": 1, "number": 1, "boolean": True, "array": []}


@dataclass(frozen=True)
class Text:
    """Answer ``text``, or ``chars`` characters of filler when given."""

    text: str = DEFAULT_TEXT
    chars: int | None = None
    provider: Provider | None = None

    def content(self) -> str:
        if self.chars is None:
            return self.text
        return (FILLER * (self.chars // len(FILLER) + 1))[: self.chars]


@dataclass(frozen=True)
class ToolCall:
    """Call tool ``name`` (default: the request's first) with ``arguments`` (default: from its
    schema)."""

    name: str | None = None
    arguments: dict[str, Any] | None = None
    provider: Provider | None = None


@dataclass(frozen=True)
class Error:
    """Answer the provider's own error of this kind (429s carry ``retry-after``). With
    ``after_chunks``, a streaming request gets a 200 stream that breaks off after that many chunks
    with the error as the provider's own mid-stream error event."""

    kind: ErrorKind
    retry_after: float = 1.0
    after_chunks: int | None = None
    provider: Provider | None = None


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` before answering (``then``, or the default agent's answer)."""

    seconds: float
    then: Step | None = None
    provider: Provider | None = None


@dataclass(frozen=True)
class Stall:
    """Send ``after_chunks`` chunks, sleep ``seconds``, then finish the answer."""

    after_chunks: int
    seconds: float
    then: Step | None = None
    provider: Provider | None = None


@dataclass(frozen=True)
class Drop:
    """Send ``after_chunks`` chunks, then close the connection without ending the answer."""

    after_chunks: int
    then: Step | None = None
    provider: Provider | None = None


Step = Text | ToolCall | Error | Delay | Stall | Drop
Answer = Text | ToolCall | Error


@dataclass(frozen=True)
class Usage:
    """Prompt tokens (the whole count), the cached and newly cached parts, and output tokens."""

    prompt: int
    cached: int
    created: int
    output: int


@dataclass
class Reply:
    """An HTTP answer: one part for JSON, one per event for a stream."""

    status: int
    headers: dict[str, str]
    parts: list[bytes]
    stream: bool = False


def json_reply(status: int, body: Json, headers: dict[str, str]) -> Reply:
    return Reply(status, {"content-type": "application/json", **headers}, [dumps(body).encode()])


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def pieces(text: str, size: int) -> list[str]:
    """``text`` in pieces of ``size`` characters (at least two when it has two characters)."""
    size = min(size, max(1, len(text) // 2))
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def example_arguments(schema: Any) -> Json:
    """A small object a tool's JSON schema accepts: its required properties (or all of them)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return {}
    required = [name for name in schema.get("required", []) if name in properties]
    return {name: example(properties[name]) for name in required or properties}


def example(schema: Any) -> Any:
    """A value of a property's schema type (its first, when it lists several)."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    kind = kind[0] if isinstance(kind, list) and kind else kind
    return EXAMPLES.get(kind, {}) if isinstance(kind, str) else "example"


class Wire(Protocol):
    """One provider's formats: refusals, errors, answers and the default agent's choice."""

    def refuse(
        self, headers: dict[str, str], body: Json, parsed: bool, api_key: str | None, n: int
    ) -> Reply | None: ...
    def error(self, error: Error, body: Json, count: int, window: int, n: int) -> Reply: ...
    def reply(self, answer: Text | ToolCall, body: Json, usage: Usage, n: int) -> Reply: ...
    def default_answer(self, body: Json) -> Text | ToolCall: ...
    def tool(self, answer: ToolCall, body: Json) -> tuple[str, Json]: ...
    def stream_error(self, error: Reply) -> bytes: ...


def output_text(wire: Wire, answer: Text | ToolCall, body: Json) -> str:
    """What the answer's output tokens are counted over."""
    if isinstance(answer, Text):
        return answer.content()
    name, arguments = wire.tool(answer, body)
    return name + dumps(arguments)


def chosen_tool(answer: ToolCall, tools: list[Json], schema: str) -> tuple[str, Json]:
    """The tool a call names (the first offered when it names none) and its arguments (the
    step's, or an example its schema accepts)."""
    named = [tool for tool in tools if tool.get("name") == answer.name]
    chosen = named[0] if named else tools[0] if tools and answer.name is None else {}
    name = answer.name or chosen.get("name", "tool")
    if answer.arguments is not None:
        return name, answer.arguments
    return name, example_arguments(chosen.get(schema))


def bearer(headers: dict[str, str]) -> str:
    """The token of an ``Authorization: Bearer`` header ("" when there is none)."""
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


def retry_after(seconds: float) -> str:
    return str(int(seconds)) if seconds == int(seconds) else str(seconds)
