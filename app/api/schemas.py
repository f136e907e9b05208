"""Request and response bodies of the HTTP API."""

from __future__ import annotations

from datetime import datetime
from itertools import pairwise
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from app.api.timestamps import StorableTime
from app.domain.formats.convert import Format
from app.domain.providers import ProfileOverrides
from app.domain.sessions import SECTION_PATTERN, SESSION_ID_PATTERN, PromptFragment

JSONObject = dict[str, Any]
NO_NUL = r"^[^\x00]*$"  # Postgres text cannot hold NUL


class _Body(BaseModel):
    # Strict: a value of another JSON type than documented is a 422 (`1` is not `true`, `"5"`
    # and `true` are not integers), not silently converted.
    model_config = ConfigDict(extra="forbid", strict=True)


def _unique_fragment_names(fragments: list[PromptFragment] | None) -> list[PromptFragment] | None:
    names = [f.name for f in fragments or []]
    if len(names) != len(set(names)):
        raise ValueError("fragment names must be unique")
    return fragments


class SessionCreate(_Body):
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

    _fragments = field_validator("system_prompt")(_unique_fragment_names)


class SessionUpdate(_Body):
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

    _fragments = field_validator("system_prompt")(_unique_fragment_names)

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


class MessagesAppend(_Body):
    format: Format = Field("openai", description="Shape of `messages`.")
    section: str = Field("messages", pattern=SECTION_PATTERN)
    messages: list[Any] = Field(min_length=1, max_length=10_000)
    system: str | list[JSONObject] | None = Field(
        None, description="Anthropic's top-level system prompt (format anthropic only)."
    )
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

    format: Literal["openai", "anthropic"]
    system: str | list[JSONObject] | None = None
    messages: list[JSONObject]
    seqs: list[int]
    next_after_seq: int | None


class TokenCount(_Body):
    format: Format = "openai"
    messages: list[Any] = Field(max_length=100_000)
    system: str | list[JSONObject] | None = None
    provider: str | None = Field(
        None, description="Profile or model whose encoding counts (GET /v1/models)."
    )
    encoding: Literal["o200k_base", "cl100k_base"] | None = Field(
        None, description="Overrides the profile's encoding."
    )
    tools: list[JSONObject] | None = Field(None, description="Tool definitions, counted apart.")


class TokenCountResult(BaseModel):
    provider: str
    encoding: str
    exact: bool
    note: str | None
    messages: list[int] = Field(description="Each message's tokens, overhead included.")
    tools: int
    reply_priming: int
    total: int


class ProviderRead(BaseModel):
    name: str
    output: Literal["openai", "anthropic"]
    encoding: str
    exact: bool = Field(description="False where the tokenizer is not public: counts estimate.")
    context_window: int
    session_resumption: bool
    prompt_cache: bool
    description: str


class ProviderList(BaseModel):
    items: list[ProviderRead]
    default: str


class ExportedSession(_Body):
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

    _fragments = field_validator("system_prompt")(_unique_fragment_names)


class ExportedMessage(_Body):
    seq: int = Field(ge=1, le=2**63 - 1)
    section: str = Field(pattern=SECTION_PATTERN)
    created_at: StorableTime
    message: JSONObject = Field(description="The canonical message.")


class SessionExport(_Body):
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


class _CompileOptions(_Body):
    provider: str | None = Field(
        None, description="Provider profile or model (GET /v1/providers, GET /v1/models)."
    )
    context_window: int | None = Field(None, ge=1, le=100_000_000)
    compiler: JSONObject | None = Field(
        None,
        description='A base compiler and decorators, e.g. {"base": "current_tool_trace", '
        '"decorators": [{"name": "token_limit", "params": {"reserve": 4096}}]}.',
    )
    execution_id: str | None = Field(None, description="The current execution (trace filter).")
    ephemeral: list[Any] = Field(
        default_factory=list,
        max_length=1_000,
        description="Messages injected for this compile only (never stored); an `inject` "
        "decorator places them.",
    )
    ephemeral_format: Format = "openai"
    tools: list[JSONObject] | None = Field(None, description="Tool definitions, counted.")


class CompileRequest(_CompileOptions):
    """A whole history to compile; nothing is stored."""

    format: Format = "openai"
    messages: list[Any] = Field(max_length=1_000_000)
    system: str | list[JSONObject] | None = None
    metadata: JSONObject = Field(default_factory=dict, description="For context providers.")
    response_format: JSONObject | None = Field(None, description="In OpenAI's form.")


class DynamicFragment(_Body):
    name: str = Field(min_length=1, max_length=128)
    text: str


class SessionCompileRequest(_CompileOptions):
    """Options for compiling a stored session (its own settings apply where these are null)."""

    fragments: list[DynamicFragment] = Field(
        default_factory=list,
        max_length=100,
        description="Dynamic prompt fragments for this compile (todo list, response context, "
        "nudges): each replaces the session's dynamic fragment of its name, or is added.",
    )

    compaction: JSONObject | None = Field(
        None, description="Fields over the session's compaction policy, for this compile."
    )
    usage: Usage | None = Field(
        None,
        description="What your previous model call used, when you do not acknowledge compiles "
        "with the cursor: it drives reactive compaction.",
    )
    error_kind: Literal["prompt_too_long"] | None = Field(
        None, description="Your previous model call was refused as too long: a full compaction."
    )

    @field_validator("fragments")
    @classmethod
    def _unique(cls, fragments: list[DynamicFragment]) -> list[DynamicFragment]:
        if len({f.name for f in fragments}) != len(fragments):
            raise ValueError("fragment names must be unique")
        return fragments


class Usage(_Body):
    """Token usage the provider reported for the model call."""

    prompt_tokens: int | None = Field(None, ge=0)
    completion_tokens: int | None = Field(None, ge=0)
    cache_read_tokens: int | None = Field(None, ge=0)
    cache_write_tokens: int | None = Field(None, ge=0)


class CursorAcknowledge(_Body):
    compile_id: str = Field(
        max_length=64, pattern=NO_NUL, description="The compile whose model call ended."
    )
    provider_session_id: str | None = Field(
        None, min_length=1, max_length=256, pattern=NO_NUL,
        description="The provider's own session id (it makes the provider session active).",
    )  # fmt: skip
    through_seq: int | None = Field(
        None, ge=1, le=2**63 - 1,
        description="The provider session also holds the stored messages up to this seq: its "
        "own reply, appended after the compile. The next delta starts after it.",
    )  # fmt: skip
    usage: Usage | None = None
    error_kind: Literal["prompt_too_long", "error"] | None = Field(
        None, description="The model call failed: stored, and the cursor stays."
    )


class CursorRead(BaseModel):
    cursor_seq: int | None = Field(description="The last seq the provider session holds.")
    provider_session_id: str | None
    advanced: bool = Field(description="Whether this request moved the cursor.")


class CompileTokens(BaseModel):
    total: int
    sections: dict[str, int]
    context_window: int
    budget_used_pct: float
    encoding: str
    exact: bool
    note: str | None


class LeftOutRead(BaseModel):
    reason: str
    count: int
    seq_ranges: list[tuple[int, int]]


class OmittedRead(BaseModel):
    call_id: str
    seq: int = Field(description="The message it was taken out of.")
    side: Literal["arguments", "result"]
    field: str
    bytes: int
    sha256: str = Field(description="GET /v1/sessions/{id}/payloads/{sha256} returns it.")


class StepRead(BaseModel):
    name: str = Field(description="The compaction step (`tool_compaction`, ...).")
    tokens_saved: int
    call_ids: list[str] = Field(description="The tool calls it compacted, as sent.")
    seqs: list[int] = Field(description="The stored messages it rewrote in the view.")
    omitted: list[OmittedRead] = Field(description="Each field it took out of the view.")


class CompactionRead(BaseModel):
    id: str
    kind: Literal["session", "micro", "full", "tool_payloads"]
    reason: str
    seq_from: int | None = Field(description="The first and last seq it summarised.")
    seq_to: int | None
    summary_seq: int | None = Field(description="The summary message's seq.")
    messages: int = Field(description="How many stored messages it archived.")
    tokens_before: int
    tokens_after: int
    tokens_removed: int
    summary_tokens: int
    cache_rewrite_tokens: int = Field(
        description="Prompt tokens a provider's prompt cache writes again: all after the "
        "first change."
    )
    resets_provider_session: bool = Field(
        description="A session-stateful provider starts a new session: the next compile is full."
    )
    summarizer: str | None
    created_at: datetime


class CompileResult(BaseModel):
    compile_id: str
    provider: str
    format: Literal["openai", "anthropic"]
    mode: Literal["full", "delta"] = Field(
        "full",
        description="`delta`: a resumed provider session gets only the dynamic fragments and "
        "the messages after the cursor.",
    )
    after_seq: int | None = Field(None, description="Delta mode: the cursor it starts after.")
    system: str | list[JSONObject] | None = Field(
        None,
        description="Anthropic's `system`, present only when there is a system prompt (an "
        "OpenAI answer carries it as its first message).",
    )
    messages: list[JSONObject]
    response_format: JSONObject | None = Field(
        description="Native form: the value of OpenAI's `response_format`, or of Anthropic's "
        '`output_config` (`{"format": {"type": "json_schema", "schema": ...}}`).'
    )
    tokens: CompileTokens
    left_out: list[LeftOutRead]
    warnings: list[str]
    seq_range: tuple[int, int] | None = Field(description="First and last stored seq included.")
    steps: list[StepRead] = Field(
        default_factory=list,
        description="What each compaction step did; originals stay retrievable (GET "
        "/v1/sessions/{id}/tool-calls/{call_id} and /payloads/{sha256}).",
    )
    compactions: list[CompactionRead] = Field(
        default_factory=list,
        description="Compactions this compile ran first (over the trigger, or as your reported "
        "usage called for).",
    )


class FieldDigest(BaseModel):
    bytes: int = Field(description="Its size as compaction measures it.")
    sha256: str = Field(description="The sha256 of its JSON: GET .../payloads/{sha256}.")


class ToolResultRead(BaseModel):
    seq: int
    content: str | list[JSONObject] = Field(description="As stored (canonical parts).")
    is_error: bool | None
    fields: dict[str, FieldDigest] | None = Field(
        description="Its fields (a JSON object's keys, else `content`); null for a result with "
        "more than text."
    )


class ToolCallRead(BaseModel):
    call_id: str
    seq: int | None = Field(description="The assistant message holding the call.")
    name: str | None
    arguments: JSONObject | str | None = Field(description="As stored.")
    argument_fields: dict[str, FieldDigest] | None
    result: ToolResultRead | None
    turns: list[int] = Field(
        description="The seq of every assistant message calling this id (ids may repeat; "
        "`?seq=` picks one)."
    )


class PayloadRead(BaseModel):
    sha256: str
    bytes: int
    value: Any = Field(description="The original field value, exactly as stored.")


class ArchivedMessage(BaseModel):
    seq: int
    section: str
    tokens: dict[str, int]
    created_at: datetime
    message: JSONObject = Field(description="Exactly as it was stored (canonical shape).")


class CompactionDetail(CompactionRead):
    archived: list[ArchivedMessage]


class CompactionList(BaseModel):
    items: list[CompactionRead]


class CompactRequest(_Body):
    kind: Literal["session", "micro", "full", "tool_payloads"] = Field(
        description="`session`: the oldest rounds down to the low-water mark; `micro`: the "
        "oldest `micro_batch_groups` rounds; `full`: every round that may be summarised; "
        "`tool_payloads`: the tool-payload `steps`, persisted in the stored messages."
    )
    policy: JSONObject | None = Field(
        None, description="Fields over the session's compaction policy, for this run."
    )
    steps: list[Any] | None = Field(
        None,
        description="For `tool_payloads`: `tool_compaction` and/or `compact_tool_results`, "
        "with params, as in a compiler spec (default: both, with their defaults).",
    )
