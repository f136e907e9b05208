"""The request bodies, as the keyword arguments of the client's methods (named after the API's
schemas). A key left out is not sent, so the server's default applies."""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from ctxc_client.models import Format, Shape

Json = dict[str, Any]


class PromptFragment(TypedDict):
    name: str
    text: str
    lifecycle: NotRequired[Literal["static", "dynamic"]]


class DynamicFragment(TypedDict):
    name: str
    text: str


class Usage(TypedDict, total=False):
    prompt_tokens: int | None
    completion_tokens: int | None
    cache_read_tokens: int | None
    cache_write_tokens: int | None


class ProfileOverrides(TypedDict, total=False):
    context_window: int | None
    encoding: Literal["o200k_base", "cl100k_base"] | None
    output: Shape | None
    prompt_cache: bool | None
    session_resumption: bool | None


class SessionUpdate(TypedDict, total=False):
    provider: str | None
    system_prompt: list[PromptFragment] | None
    metadata: Json | None
    resume_key: str | None
    context_window: int | None
    compiler: Json | None
    compaction: Json | None
    profile: ProfileOverrides | None
    response_format: Json | None


class SessionCreate(SessionUpdate, total=False):
    id: str | None


class Append(TypedDict, total=False):
    format: Format
    section: str
    system: str | list[Json] | Json | None
    instructions: str | None
    metadata: Json


class CompileRequest(TypedDict, total=False):
    format: Format
    provider: str | None
    context_window: int | None
    system: str | list[Json] | Json | None
    instructions: str | None
    tools: list[Json] | None
    ephemeral: list[Any]
    ephemeral_format: Format
    compiler: Json | None
    execution_id: str | None
    metadata: Json
    response_format: Json | None


class SessionCompileRequest(TypedDict, total=False):
    execution_id: str | None
    fragments: list[DynamicFragment]
    ephemeral: list[Any]
    ephemeral_format: Format
    compiler: Json | None
    compaction: Json | None
    context_window: int | None
    provider: str | None
    tools: list[Json] | None
    usage: Usage | None
    error_kind: Literal["prompt_too_long"] | None


class CursorAcknowledge(TypedDict, total=False):
    provider_session_id: str | None
    through_seq: int | None
    usage: Usage | None
    error_kind: Literal["prompt_too_long", "error"] | None


class Recall(TypedDict, total=False):
    format: Shape | None
    tool_call_id: str | None
    name: str
    max_tokens: int


class CompactRequest(TypedDict, total=False):
    policy: Json | None
    steps: list[Any] | None


class TokenCount(TypedDict, total=False):
    format: Format
    provider: str | None
    encoding: Literal["o200k_base", "cl100k_base"] | None
    system: str | list[Json] | Json | None
    instructions: str | None
    tools: list[Json] | None
