"""Bodies of the sessions and messages API, the export document, and what every request body
shares (``Body``: strict, no unknown fields)."""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.api.timestamps import StorableTime
from app.domain.formats.convert import Format
from app.domain.formats.targets import Target
from app.domain.providers import ProfileOverrides
from app.domain.sessions import SECTION_PATTERN, SESSION_ID_PATTERN, PromptFragment

JSONObject = dict[str, Any]
NO_NUL = r"^[^\x00]*$"  # Postgres text cannot hold NUL
INSTRUCTIONS = "OpenAI Responses' `instructions`, its system prompt (format responses only)."
# The system prompt a posted history gives beside its messages, in its format's own field.
SystemPrompt = str | list[JSONObject] | JSONObject | None
SYSTEM = (
    "Anthropic's top-level system prompt, or Gemini's `systemInstruction` (`{parts: [{text}]}`) "
    "(formats anthropic and gemini only)."
)


class Body(BaseModel):
    # Strict: a value of another JSON type than documented is a 422 (`1` is not `true`, `"5"`
    # and `true` are not integers), not silently converted.
    model_config = ConfigDict(extra="forbid", strict=True)


def unique_fragment_names(fragments: list[PromptFragment] | None) -> list[PromptFragment] | None:
    names = [f.name for f in fragments or []]
    if len(names) != len(set(names)):
        raise ValueError("fragment names must be unique")
    return fragments


class SessionCreate(Body):
    id: str | None = Field(
        None,
        pattern=SESSION_ID_PATTERN,
        description="Your id for the session; generated if absent.",
    )
    metadata: JSONObject = Field(default_factory=dict)
    system_prompt: list[PromptFragment] = Field(default_factory=list)
    response_format: JSONObject | None = None
    provider: str | None = Field(
        None, description="Provider profile or model (GET /v1/providers, GET /v1/models)."
    )
    profile: ProfileOverrides | None = Field(
        None, description="The session's own profile: fields that replace its provider's."
    )
    resume_key: str | None = Field(None, max_length=1024, pattern=NO_NUL)
    context_window: int | None = Field(None, ge=1, le=100_000_000)
    compiler: JSONObject | None = None
    compaction: JSONObject | None = None

    _fragments = field_validator("system_prompt")(unique_fragment_names)


class SessionUpdate(Body):
    """Only the fields present change; null clears a nullable field."""

    metadata: JSONObject | None = None
    system_prompt: list[PromptFragment] | None = None
    response_format: JSONObject | None = None
    provider: str | None = None
    profile: ProfileOverrides | None = None
    resume_key: str | None = Field(None, max_length=1024, pattern=NO_NUL)
    context_window: int | None = Field(None, ge=1, le=100_000_000)
    compiler: JSONObject | None = None
    compaction: JSONObject | None = None

    _fragments = field_validator("system_prompt")(unique_fragment_names)

    @field_validator("metadata", "system_prompt", "provider")
    @classmethod
    def _not_null(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("may not be null")
        return value


class SessionRead(BaseModel):
    id: str
    metadata: JSONObject
    system_prompt: list[PromptFragment]
    response_format: JSONObject | None
    provider: str
    profile: ProfileOverrides | None
    encoding: str
    session_resumption: bool = Field(description="Whether the session's profile resumes sessions.")
    resume_key: str | None
    context_window: int | None
    compiler: JSONObject | None
    compaction: JSONObject | None
    message_count: int
    last_seq: int
    tokens: int = Field(description="Stored message tokens in the provider's encoding.")
    cursor_seq: int | None
    provider_session_id: str | None
    created_at: datetime
    updated_at: datetime


class SessionPage(BaseModel):
    items: list[SessionRead]
    next_after: str | None = Field(
        description="Pass as `after` for the next page; null at the end."
    )


class MessagesAppend(Body):
    format: Format = Field("openai", description="Shape of `messages`.")
    section: str = Field("messages", pattern=SECTION_PATTERN)
    messages: list[Any] = Field(min_length=1, max_length=10_000)
    system: SystemPrompt = Field(None, description=SYSTEM)
    instructions: str | None = Field(None, description=INSTRUCTIONS)
    metadata: JSONObject = Field(
        default_factory=dict,
        description="Merged into every message's metadata (the message's own keys win).",
    )


class AppendedMessage(BaseModel):
    seq: int
    tokens: int


class AppendResult(BaseModel):
    session_id: str
    section: str
    first_seq: int
    last_seq: int
    encoding: str
    messages: list[AppendedMessage]
    tokens: int


class MessageItem(BaseModel):
    seq: int
    section: str
    tokens: int
    created_at: datetime
    message: JSONObject


class CanonicalPage(BaseModel):
    format: Literal["canonical"] = "canonical"
    items: list[MessageItem]
    next_after_seq: int | None


class ProviderPage(BaseModel):
    """A page in a provider's shape; ``seqs[i]`` is the stored seq of ``messages[i]``."""

    format: Target
    system: str | list[JSONObject] | JSONObject | None = Field(
        None, description="Anthropic's `system`, Gemini's `systemInstruction`."
    )
    instructions: str | None = Field(None, description="Responses: the system prompt.")
    messages: list[JSONObject] = Field(
        description="Messages, turns, contents, or Responses input items."
    )
    seqs: list[int]
    next_after_seq: int | None


class ExportedSession(Body):
    id: str = Field(pattern=SESSION_ID_PATTERN)
    metadata: JSONObject = Field(default_factory=dict)
    system_prompt: list[PromptFragment] = Field(default_factory=list)
    response_format: JSONObject | None = None
    provider: str
    profile: ProfileOverrides | None = None
    resume_key: str | None = Field(None, max_length=1024, pattern=NO_NUL)
    context_window: int | None = Field(None, ge=1, le=100_000_000)
    compiler: JSONObject | None = None
    compaction: JSONObject | None = None
    created_at: StorableTime
    updated_at: StorableTime

    _fragments = field_validator("system_prompt")(unique_fragment_names)


class ExportedMessage(Body):
    seq: int = Field(ge=1, le=2**63 - 1)
    section: str = Field(pattern=SECTION_PATTERN)
    created_at: StorableTime
    message: JSONObject = Field(description="The canonical message.")


class SessionExport(Body):
    """A session's whole context as one document; importing it recreates the session."""

    format: Literal["ctxc.session/v1"] = "ctxc.session/v1"
    session: ExportedSession
    messages: list[ExportedMessage] = Field(max_length=1_000_000)

    @field_validator("messages")
    @classmethod
    def _increasing(cls, messages: list[ExportedMessage]) -> list[ExportedMessage]:
        seqs = [m.seq for m in messages]
        if any(a >= b for a, b in pairwise(seqs)):
            raise ValueError("seq must increase strictly")
        return messages
