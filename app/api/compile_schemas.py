"""Bodies of the compile and cursor API: compile options, the compiled request and its report."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

from app.api.schemas import INSTRUCTIONS, NO_NUL, SYSTEM, Body, JSONObject, SystemPrompt
from app.domain.formats.convert import Format
from app.domain.formats.targets import Target
from app.domain.summaries import SummarizerReason


class _CompileOptions(Body):
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
    system: SystemPrompt = Field(None, description=SYSTEM)
    instructions: str | None = Field(None, description=INSTRUCTIONS)
    metadata: JSONObject = Field(default_factory=dict, description="For context providers.")
    response_format: JSONObject | None = Field(None, description="In OpenAI's form.")


class DynamicFragment(Body):
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


class Usage(Body):
    """Token usage the provider reported for the model call. With a prompt count, it also
    calibrates the estimates of a profile whose tokenizer is not public."""

    prompt_tokens: int | None = Field(
        None,
        ge=0,
        description="As the provider reports it: Anthropic's `input_tokens` (without the cached "
        "prompt), OpenAI's `prompt_tokens` (with it).",
    )
    completion_tokens: int | None = Field(None, ge=0)
    cache_read_tokens: int | None = Field(
        None,
        ge=0,
        description="Anthropic's `cache_read_input_tokens` (added to the prompt), OpenAI's "
        "`cached_tokens` (already in it).",
    )
    cache_write_tokens: int | None = Field(
        None, ge=0, description="Anthropic's `cache_creation_input_tokens` (added to the prompt)."
    )


class CursorAcknowledge(Body):
    compile_id: str = Field(
        max_length=64, pattern=NO_NUL, description="The compile whose model call ended."
    )
    provider_session_id: str | None = Field(
        None,
        min_length=1,
        max_length=256,
        pattern=NO_NUL,
        description="The provider's own session id (it makes the provider session active).",
    )
    through_seq: int | None = Field(
        None,
        ge=1,
        le=2**63 - 1,
        description="The provider session also holds the stored messages up to this seq: its "
        "own reply, appended after the compile. The next delta starts after it.",
    )
    usage: Usage | None = None
    error_kind: Literal["prompt_too_long", "error"] | None = Field(
        None, description="The model call failed: stored, and the cursor stays."
    )


class CursorRead(BaseModel):
    cursor_seq: int | None = Field(description="The last seq the provider session holds.")
    provider_session_id: str | None
    advanced: bool = Field(description="Whether this request moved the cursor.")


class CountError(BaseModel):
    tokens: int = Field(description="The figure ctxc gave minus the reported count.")
    share: float = Field(description="`tokens` as a share of the reported count (signed).")


class CalibrationRead(BaseModel):
    factor: float = Field(
        description="Reported over estimated tokens, learnt from the provider's counts; within "
        "[0.95, 2]: a calibrated total is never more than 5% below the estimate."
    )
    samples: int = Field(description="The reported counts it was learnt from (outliers aside).")
    scope: Literal["session", "profile"] = Field(
        description="Learnt from this session's counts, or (until it has enough) from every "
        "session of yours compiled for the same profile and encoding."
    )
    estimate: int = Field(description="The raw estimate the calibrated `total` was made from.")
    last_error: CountError = Field(
        description="How far the figure given for the scope's last reported compile was from "
        "the provider's count."
    )


class CompileTokens(BaseModel):
    total: int = Field(description="The request's tokens: exact, estimated or calibrated.")
    sections: dict[str, int] = Field(description="Estimated tokens by section (not calibrated).")
    context_window: int
    budget_used_pct: float
    encoding: str
    exact: bool
    note: str | None
    count: Literal["exact", "estimated", "calibrated"] = Field(
        description="`calibrated`: an estimate of a private tokenizer corrected by the counts "
        "the provider reported for earlier compiles (acknowledgements with `usage`, sidecar "
        "turns); the budget trims to it too."
    )
    calibration: CalibrationRead | None = Field(
        None, description="How the total was calibrated (null unless `count` is `calibrated`)."
    )


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


class CompactionEconomics(BaseModel):
    """The cache-economic gate's figures, in units of the provider's input price per token."""

    shed_tokens: int = Field(description="Tokens the compaction removes from every prompt.")
    expected_turns: int = Field(description="Turns the session is expected to run on.")
    rewrite_tokens: int = Field(description="Prompt tokens the provider's cache writes again.")
    saved: float = Field(description="shed_tokens x expected_turns x the cache read price.")
    cost: float = Field(description="rewrite_tokens x (cache write price - read price).")
    applied: bool = Field(description="saved >= cost, or the window was exceeded.")


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
    summarizer: str | None = Field(
        description="The summariser that wrote the summary: backend, model, profile, and why "
        "it fell back when it did (null: no summary was written)."
    )
    summarizer_reason: SummarizerReason | None = Field(
        None,
        description="Why the summariser the policy names did not write the summary (null: it "
        "did): `fallback` (it failed; its fallback wrote it, `summarizer` says why), "
        "`summarizer_unavailable` (this deployment has no such profile; the default one wrote "
        "it), `nothing_to_summarize`, `not_summarized` (tool payloads or the opening task "
        "rewritten in place: no summariser is called).",
    )
    created_at: datetime
    prepared_at: datetime | None = Field(
        None,
        description="When its summary was prepared in the background (null: by the "
        "request that applied it).",
    )
    economics: CompactionEconomics | None = Field(
        None,
        description="The cache-economic gate it passed (request-boundary compactions of "
        "a compile).",
    )


class CompileResult(BaseModel):
    compile_id: str
    provider: str
    format: Target
    mode: Literal["full", "delta"] = Field(
        "full",
        description="`delta`: a resumed provider session gets only the dynamic fragments and "
        "the messages after the cursor.",
    )
    after_seq: int | None = Field(None, description="Delta mode: the cursor it starts after.")
    system: str | list[JSONObject] | JSONObject | None = Field(
        None,
        description="Anthropic's `system`, or Gemini's `systemInstruction` object, present only "
        "when there is a system prompt (an OpenAI answer carries it as its first message).",
    )
    instructions: str | None = Field(
        None,
        description="OpenAI Responses' `instructions`, present only when there is a system "
        "prompt (`messages` are then the `input` items).",
    )
    messages: list[JSONObject]
    response_format: JSONObject | None = Field(
        description="Native form: the value of OpenAI's `response_format`, of Anthropic's "
        '`output_config` (`{"format": {"type": "json_schema", "schema": ...}}`), or of '
        'Responses\' `text` (`{"format": {"type": "json_schema", "name": ...}}`).'
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
    tools: list[JSONObject] | None = Field(
        None,
        description="Present when the compiler adds a tool (the `recall` decorator): the tools "
        "to send, yours (`tools` of the request) with the added ones after them, in the "
        "target's shape; a tool of yours with an added tool's name is replaced. Their tokens "
        "are in `tokens.total`.",
    )
