"""The API's answers, named after its schemas (`SessionRead` is `Session` here).

Fields the client does not know yet (a newer server) are kept, in ``model_extra``, not refused.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

# The provider shapes a history is read and compiled in, and the formats it is posted in.
Shape = Literal["openai", "anthropic", "gemini", "responses"]
Format = Literal[Shape, "canonical"]
CompactionKind = Literal["session", "micro", "full", "tool_payloads"]


class Model(BaseModel):
    """An answer: read-only, tolerant of fields added by newer servers."""

    model_config = ConfigDict(extra="allow", frozen=True)


class FieldError(Model):
    path: str
    message: str


class PromptFragment(Model):
    name: str
    text: str
    lifecycle: Literal["static", "dynamic"] = "static"


class ProfileOverrides(Model):
    context_window: int | None = None
    encoding: str | None = None
    output: str | None = None
    prompt_cache: bool | None = None
    session_resumption: bool | None = None


class Session(Model):
    id: str
    metadata: dict[str, Any]
    system_prompt: list[PromptFragment]
    response_format: dict[str, Any] | None
    provider: str
    profile: ProfileOverrides | None
    encoding: str
    session_resumption: bool
    resume_key: str | None
    context_window: int | None
    compiler: dict[str, Any] | None
    compaction: dict[str, Any] | None
    message_count: int
    last_seq: int
    tokens: int
    cursor_seq: int | None
    provider_session_id: str | None
    created_at: datetime
    updated_at: datetime


class SessionPage(Model):
    items: list[Session]
    next_after: str | None


class AppendedMessage(Model):
    seq: int
    tokens: int


class AppendResult(Model):
    session_id: str
    section: str
    first_seq: int
    last_seq: int
    encoding: str
    messages: list[AppendedMessage]
    tokens: int


class MessageItem(Model):
    """A stored message in the canonical shape, with its seq, section and token count."""

    seq: int
    section: str
    tokens: int
    created_at: datetime
    message: dict[str, Any]


class CanonicalPage(Model):
    format: Literal["canonical"] = "canonical"
    items: list[MessageItem]
    next_after_seq: int | None


class ProviderPage(Model):
    """A page as one provider document; ``seqs`` maps each message to its stored seq."""

    format: Shape
    messages: list[dict[str, Any]]
    seqs: list[int]
    system: str | list[dict[str, Any]] | dict[str, Any] | None = None
    instructions: str | None = None
    next_after_seq: int | None


class CountError(Model):
    tokens: int
    share: float


class Calibration(Model):
    """How a calibrated total was learnt: from the session's reported counts, or the profile's."""

    factor: float
    samples: int
    scope: Literal["session", "profile"]
    estimate: int
    last_error: CountError


class CompileTokens(Model):
    total: int
    sections: dict[str, Any]
    context_window: int
    budget_used_pct: float
    encoding: str
    exact: bool
    note: str | None
    count: Literal["exact", "estimated", "calibrated"] | None = None  # None: an older server
    calibration: Calibration | None = None


class LeftOut(Model):
    reason: str
    count: int
    seq_ranges: list[list[int]]


class Omitted(Model):
    call_id: str
    seq: int
    side: Literal["arguments", "result"]
    field: str
    bytes: int
    sha256: str


class Step(Model):
    name: str
    tokens_saved: int
    call_ids: list[str]
    seqs: list[int]
    omitted: list[Omitted]


class Compaction(Model):
    id: str
    kind: CompactionKind
    reason: str
    seq_from: int | None
    seq_to: int | None
    summary_seq: int | None
    messages: int
    tokens_before: int
    tokens_after: int
    tokens_removed: int
    summary_tokens: int
    cache_rewrite_tokens: int
    resets_provider_session: bool
    summarizer: str | None
    # Why the summariser the policy names did not write it: fallback, summarizer_unavailable,
    # nothing_to_summarize, not_summarized (None: it did).
    summarizer_reason: str | None = None
    created_at: datetime
    prepared_at: datetime | None = None  # prepared in the background, then swapped in
    economics: dict[str, Any] | None = None  # the cache-economic gate's figures


class ArchivedMessage(Model):
    """A message a compaction moved to the archive, exactly as it was stored."""

    seq: int
    section: str
    tokens: dict[str, Any]
    created_at: datetime
    message: dict[str, Any]


class CompactionDetail(Compaction):
    archived: list[ArchivedMessage]
    loss: dict[str, Any] | None = None  # what the summary kept, merged, replaced and dropped


class CompileResult(Model):
    compile_id: str
    provider: str
    format: Shape
    mode: Literal["full", "delta"] = "full"
    after_seq: int | None = None
    system: str | list[dict[str, Any]] | dict[str, Any] | None = None
    instructions: str | None = None
    messages: list[dict[str, Any]]
    response_format: dict[str, Any] | None
    tokens: CompileTokens
    left_out: list[LeftOut]
    warnings: list[str]
    seq_range: list[int] | None
    steps: list[Step] = []
    compactions: list[Compaction] = []
    tools: list[dict[str, Any]] | None = None  # with the recall decorator: the tools to send


class Cursor(Model):
    cursor_seq: int | None
    provider_session_id: str | None
    advanced: bool


class FieldDigest(Model):
    bytes: int
    sha256: str


class ToolResult(Model):
    seq: int
    content: str | list[dict[str, Any]]
    is_error: bool | None
    fields: dict[str, FieldDigest] | None


class ToolCall(Model):
    """A stored tool call and its result, whole (what compaction left out of a view)."""

    call_id: str
    seq: int | None
    name: str | None
    arguments: dict[str, Any] | str | None
    argument_fields: dict[str, FieldDigest] | None
    result: ToolResult | None
    turns: list[int]


class Payload(Model):
    sha256: str
    bytes: int
    value: Any


class RecallPage(Model):
    offset: int
    chars: int
    total_chars: int
    next_offset: int | None


class RecallResult(Model):
    """The recall tool's answer: ``result`` is the tool result to append, in ``format``."""

    format: Shape
    result: dict[str, Any]
    is_error: bool
    page: RecallPage | None


class TokenCountResult(Model):
    provider: str
    encoding: str
    exact: bool
    note: str | None
    messages: list[int]
    tools: int
    reply_priming: int
    total: int


class Provider(Model):
    name: str
    output: Shape
    encoding: str
    exact: bool
    context_window: int
    session_resumption: bool
    prompt_cache: bool
    description: str


class ProviderList(Model):
    items: list[Provider]
    default: str


class EventData(Model):
    """What a compaction event says (README "Events"); fields a type does not send are None."""

    kind: str | None = None
    reason: str | None = None
    compaction_id: str | None = None
    tokens_before: int | None = None
    messages_before: int | None = None
    budget_used_pct: float | None = None
    outcome: str | None = None
    tokens_after: int | None = None
    messages_after: int | None = None
    summary_tokens: int | None = None
    resets_provider_session: bool | None = None
    skipped: str | None = None
    detail: str | None = None
    start_event_id: int | None = None


class Event(Model):
    """One message of a session's event stream: `context_compaction_start`,
    `context_compaction_end` or `compaction`."""

    id: int
    type: str
    data: EventData
