"""Canonical, provider-neutral messages.

A stored message is one provider message: converters map OpenAI Chat Completions, OpenAI
Responses, Anthropic Messages and Gemini shapes onto these values and back without loss.
Provider-only details (cache_control, refusals, fields we do not model) live under the reserved
metadata keys ``openai``, ``responses``, ``anthropic`` and ``gemini``; everything else in
``metadata`` belongs to the caller (``is_trace``, ``execution_id``, ``pinned``, ...).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.domain.memo import per_value

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[Role, ...] = ("system", "user", "assistant", "tool")

DEFAULT_SECTION = "messages"
BUFFER_SECTION = "buffer"
SUMMARY_SECTION = "summary"
INFERENCE_ORDER: tuple[str, ...] = (SUMMARY_SECTION, BUFFER_SECTION, DEFAULT_SECTION)

# Metadata keys that hold provider-only fields; they never reach another provider's output.
PROVIDER_KEYS: tuple[str, ...] = ("openai", "anthropic", "gemini", "responses")

JSONObject = dict[str, Any]


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Value):
    """Plain text."""

    type: Literal["text"] = "text"
    text: str
    metadata: JSONObject = Field(default_factory=dict)


class ImagePart(_Value):
    """An image by URL, or inline base64 data with its media type."""

    type: Literal["image"] = "image"
    url: str | None = None
    data: str | None = None
    media_type: str | None = None
    detail: str | None = None
    metadata: JSONObject = Field(default_factory=dict)

    @model_validator(mode="after")
    def _one_source(self) -> ImagePart:
        if (self.url is None) == (self.data is None):
            raise ValueError("an image needs exactly one of url or data")
        if self.data is not None and not self.media_type:
            raise ValueError("base64 image data needs a media_type")
        return self


class ToolCallPart(_Value):
    """A tool call: ``arguments`` is the parsed JSON object when valid, else the raw string."""

    type: Literal["tool_call"] = "tool_call"
    id: str
    name: str
    arguments: JSONObject | str
    metadata: JSONObject = Field(default_factory=dict)


class ReasoningPart(_Value):
    """Model reasoning: thinking text with its signature, or redacted data."""

    type: Literal["reasoning"] = "reasoning"
    text: str | None = None
    signature: str | None = None
    redacted_data: str | None = None
    metadata: JSONObject = Field(default_factory=dict)


class OpaquePart(_Value):
    """A provider block we do not model (documents, server tool results...), kept verbatim."""

    type: Literal["opaque"] = "opaque"
    provider: Literal["openai", "anthropic", "gemini", "responses"]
    data: JSONObject
    metadata: JSONObject = Field(default_factory=dict)


ResultItem = Annotated[TextPart | ImagePart | OpaquePart, Field(discriminator="type")]


class ToolResultPart(_Value):
    """The result of the tool call ``call_id``."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    content: str | tuple[ResultItem, ...]
    is_error: bool | None = None
    metadata: JSONObject = Field(default_factory=dict)


Part = Annotated[
    TextPart | ImagePart | ToolCallPart | ToolResultPart | ReasoningPart | OpaquePart,
    Field(discriminator="type"),
]


class Message(_Value):
    """One message: a role, its content parts, an optional name and free metadata."""

    role: Role
    content: tuple[Part, ...] = ()
    name: str | None = None
    metadata: JSONObject = Field(default_factory=dict)

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return _parts_of(self, ToolCallPart)  # type: ignore[return-value]

    @property
    def tool_results(self) -> tuple[ToolResultPart, ...]:
        return _parts_of(self, ToolResultPart)  # type: ignore[return-value]

    @property
    def text(self) -> str:
        """The text parts joined by newlines (what a human would read)."""
        return "\n".join(p.text for p in self.content if isinstance(p, TextPart))

    def to_json(self) -> JSONObject:
        """The canonical JSON document of this message (unset optional fields left out)."""
        return self.model_dump(mode="json", exclude_none=True)


@per_value
def _parts_of(message: Message, kind: type[Part]) -> tuple[Part, ...]:
    """The parts of ``message`` of one ``kind``, in order."""
    return tuple(p for p in message.content if isinstance(p, kind))


def result_text(result: ToolResultPart) -> str:
    """The textual content of a tool result."""
    if isinstance(result.content, str):
        return result.content
    return "\n".join(p.text for p in result.content if isinstance(p, TextPart))


def provider_meta(metadata: JSONObject, provider: str) -> JSONObject:
    """The provider-only fields stored under ``metadata[provider]`` (empty when none)."""
    value = metadata.get(provider)
    return value if isinstance(value, dict) else {}


def with_provider_meta(metadata: JSONObject, provider: str, fields: JSONObject) -> JSONObject:
    """``metadata`` with ``fields`` stored under the provider key (dropped when empty)."""
    out = {k: v for k, v in metadata.items() if k != provider}
    if fields:
        out[provider] = fields
    return out
