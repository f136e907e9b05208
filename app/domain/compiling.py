"""One compile, end to end and pure: the compiler's view, the system prompt before it, then a
provider-valid request with its token figures, what was left out and why, and warnings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.domain.calibration import Calibration
from app.domain.compilers.base import (
    Compiler,
    Item,
    NeedsHistory,
    Snapshot,
    StepReport,
    is_prompt,
    left_out_by_reason,
)
from app.domain.compilers.recalling import tools_tokens
from app.domain.errors import DomainError, InvalidInput
from app.domain.messages import DEFAULT_SECTION, SUMMARY_SECTION, JSONObject, Message, TextPart
from app.domain.providers import ProviderProfile, estimate_note
from app.domain.sessions import PromptFragment
from app.domain.tokens import REPLY_PRIMING
from app.domain.validity import repair, shape
from app.domain.validity.anthropic_turns import CONTINUATION, opens_with_assistant
from app.domain.validity.shaping import System

SYSTEM_PROMPT_SECTION = "system_prompt"
# Dynamic fragments sent to a resumed provider session, as user messages (seeds/004).
SYSTEM_CONTEXT_SECTION = "system_context"
SYSTEM_CONTEXT_PREFIX = "[System Context]: "
# Where the tokens of a turn the provider's shape adds (Anthropic's opening user turn) go.
SHAPE_SECTION = "shape"
# What an agent sends every turn beside its conversation (with system messages, tools and
# the reply priming): the request's fixed part.
FIXED_SECTIONS = frozenset({SYSTEM_PROMPT_SECTION, SYSTEM_CONTEXT_SECTION})


class NothingToSend(DomainError):
    """The compiled view holds nothing a provider would accept."""

    def __init__(self) -> None:
        super().__init__("nothing to send: the compiled view has no message the provider accepts")


@dataclass(frozen=True)
class Target:
    """Where the compile goes: the profile, its context window and what surrounds the history."""

    profile: ProviderProfile
    context_window: int
    fragments: tuple[PromptFragment, ...] = ()
    response_format: JSONObject | None = None
    tools_tokens: int = 0
    # A resumed provider session (delta mode): fragments sent as user messages instead of a
    # system prompt, and the tool calls the provider already holds.
    context: tuple[Message, ...] = ()
    prior_call_ids: frozenset[str] = frozenset()
    # Learnt from the provider's reported counts (a private tokenizer): token_limit trims to the
    # estimated tokens whose calibrated count fits its budget, and the total is calibrated.
    calibration: Calibration | None = None


@dataclass(frozen=True)
class LeftOutReport:
    reason: str
    count: int
    seq_ranges: list[tuple[int, int]]


@dataclass(frozen=True)
class Output:
    """A compiled request in the target provider's shape."""

    system: System
    messages: list[JSONObject]
    response_format: JSONObject | None
    total: int
    sections: dict[str, int]
    context_window: int
    exact: bool
    note: str | None
    left_out: list[LeftOutReport]
    warnings: list[str]
    seqs: list[int]  # the stored seqs included
    steps: tuple[StepReport, ...] = ()  # what each compaction step did
    tools: tuple[JSONObject, ...] = ()  # tool definitions the compiler added (``recall``)
    estimate: int = 0  # the raw estimate ``total`` is (or, calibrated, was made from)
    instructions: str | None = None  # Responses: the system prompt (``messages``: the input)
    # Of ``estimate``: the fixed part (the system prompt and system messages, tool definitions,
    # the reply priming), which compaction cannot make smaller; the rest is the history.
    fixed: int = 0
    # The stored messages sent (system messages aside), each with its tokens as sent.
    sent_tokens: tuple[tuple[int, int], ...] = ()

    @property
    def history_tokens(self) -> int:
        """The estimated tokens of the history as sent (the fixed part aside)."""
        return self.estimate - self.fixed

    @property
    def budget_used_pct(self) -> float:
        return round(100 * self.total / self.context_window, 2)


def system_message(fragments: Sequence[PromptFragment]) -> Message | None:
    """The system prompt as one system message, a text part per fragment (None when empty)."""
    parts = tuple(TextPart(text=f.text) for f in fragments if f.text.strip())
    return Message(role="system", content=parts) if parts else None


def with_request_fragments(
    fragments: Sequence[PromptFragment], given: Sequence[PromptFragment]
) -> tuple[PromptFragment, ...]:
    """The session's fragments with the request's dynamic ones: a fragment of the same name is
    replaced in place, a new name is added at the end. A static fragment cannot be replaced."""
    static = {f.name for f in fragments if f.lifecycle == "static"}
    problems = [
        (("fragments", n, "name"), f"the session's fragment {f.name!r} is static")
        for n, f in enumerate(given)
        if f.name in static
    ]
    if problems:
        raise InvalidInput(problems)
    by_name = {f.name: f for f in given}
    out = [by_name.pop(f.name, f) for f in fragments]
    return (*out, *by_name.values())


def context_messages(fragments: Sequence[PromptFragment]) -> tuple[Message, ...]:
    """Fragments for a resumed provider session: each a user message ``[System Context]: ...``."""
    return tuple(
        Message(role="user", content=(TextPart(text=SYSTEM_CONTEXT_PREFIX + f.text),))
        for f in fragments
        if f.text.strip()
    )


def native_response_format(
    response_format: JSONObject | None, output: str
) -> tuple[JSONObject | None, list[str]]:
    """The response format as the provider takes it: OpenAI's `response_format`, Anthropic's
    `output_config` (structured outputs: `{"format": {"type": "json_schema", "schema": ...}}`),
    Gemini's `generationConfig` fields (`{"responseMimeType": "application/json",
    "responseJsonSchema": ...}`), Responses' `text` (`{"format": {"type": "json_schema",
    "name", "schema", "strict"}}`, or `{"format": {"type": "json_object"}}`); stored in
    OpenAI's form."""
    if response_format is None or output == "openai":
        return response_format, []
    if output == "responses":
        return _responses_text(response_format)
    schema = response_format.get("json_schema", {})
    if output == "gemini":
        return _gemini_response_format(response_format, schema)
    if response_format.get("type") == "json_schema" and isinstance(schema, dict):
        return {"format": {"type": "json_schema", "schema": schema.get("schema", {})}}, []
    kind = response_format.get("type")
    return None, [f"response_format {kind!r} has no Anthropic equivalent; it is not sent"]


def _gemini_response_format(
    response_format: JSONObject, schema: Any
) -> tuple[JSONObject | None, list[str]]:
    kind = response_format.get("type")
    if kind == "json_schema" and isinstance(schema, dict):
        found = {"responseMimeType": "application/json"}
        return found | {"responseJsonSchema": schema.get("schema", {})}, []
    if kind == "json_object":
        return {"responseMimeType": "application/json"}, []
    if kind == "text":
        return {"responseMimeType": "text/plain"}, []
    return None, [f"response_format {kind!r} has no Gemini equivalent; it is not sent"]


def _responses_text(response_format: JSONObject) -> tuple[JSONObject | None, list[str]]:
    kind = response_format.get("type")
    schema = response_format.get("json_schema")
    if kind == "json_schema" and isinstance(schema, dict):
        # Responses flattens Chat Completions' json_schema object into the format itself.
        return {"format": {"type": "json_schema", **schema}}, []
    if kind in ("json_object", "text"):
        return {"format": {"type": kind}}, []
    return None, [f"response_format {kind!r} has no Responses equivalent; it is not sent"]


def compile_request(snapshot: Snapshot, compiler: Compiler, target: Target) -> Output:
    """Run ``compiler`` within the target's budget and render a request the provider accepts."""
    frame = _framed(snapshot, target)
    compiled = compiler(frame.scoped)
    if compiled.pending is not None:  # no trimming step dropped the older part: it is sent
        raise NeedsHistory()
    items = frame.arranged(compiled.items)
    output = target.profile.output
    entries, warnings = repair([i.message for i in items], output, target.prior_call_ids)
    system_out, messages = shape(entries, output, warnings)
    if not messages:
        raise NothingToSend()
    counted = _counted(snapshot, items, entries)
    size = _sized(snapshot, target, counted, tools_tokens(snapshot.count, compiled.tools))
    if size.total > target.context_window:
        warnings.append(f"the request ({size.total} tokens) exceeds the context window")
    response_format, format_warnings = native_response_format(target.response_format, output)
    seqs = sorted(items[i].seq for i, _ in entries if items[i].seq > 0)
    instructions = system_out if output == "responses" and isinstance(system_out, str) else None
    return Output(
        system=None if output == "responses" else system_out,
        messages=messages,
        response_format=response_format,
        total=size.total,
        sections=counted.sections,
        context_window=target.context_window,
        exact=size.note is None,
        note=size.note,
        left_out=_reports(compiled.left_out),
        warnings=[*compiled.sent_warnings(set(seqs)), *warnings, *format_warnings],
        seqs=seqs,
        steps=tuple(step.within(set(seqs)) for step in compiled.steps),
        tools=compiled.tools,
        estimate=size.estimate,
        instructions=instructions,
        fixed=counted.fixed + size.around,
        sent_tokens=tuple(sorted(counted.stored.items())),
    )


@dataclass(frozen=True)
class _Frame:
    """What surrounds the compiled history: the system prompt (``head``) and the resumed
    session's context messages, and the snapshot scoped to the target's budget less them."""

    head: list[Item]
    context: list[Item]
    scoped: Snapshot

    def arranged(self, compiled: Sequence[Item]) -> list[Item]:
        """The request's items: the system prompt, the compiled view with the results that
        answer calls the provider holds first (before the context), the context, the rest."""
        view = _system_prompt_first(compiled)
        lead = len(_continued(self.scoped, view))
        return [*self.head, *view[:lead], *self.context, *view[lead:]]


def _framed(snapshot: Snapshot, target: Target) -> _Frame:
    system = system_message(target.fragments)
    head = [Item(0, SYSTEM_PROMPT_SECTION, system, snapshot.count(system))] if system else []
    context = [Item(0, SYSTEM_CONTEXT_SECTION, m, snapshot.count(m)) for m in target.context]
    claimed = sum(i.tokens for i in [*head, *context]) + REPLY_PRIMING + target.tools_tokens
    scoped = replace(
        snapshot,
        budget=target.context_window,
        claimed=snapshot.claimed + claimed,
        target=target.profile.output,
        prior_call_ids=target.prior_call_ids,
        calibration=target.calibration,
    )
    return _Frame(head, context, scoped)


@dataclass(frozen=True)
class _Size:
    estimate: int  # the request's tokens as counted
    total: int  # as the provider will count them (calibrated)
    around: int  # reply priming and tool definitions
    note: str | None  # why the count is an estimate


def _sized(snapshot: Snapshot, target: Target, counted: _Counted, added_tools: int) -> _Size:
    """The request's size: its sections (the continuation an opening assistant message needs
    added to them), reply priming and tools; calibrated when the target learnt how."""
    output = target.profile.output
    if output in ("anthropic", "gemini") and opens_with_assistant(counted.sent):
        counted.sections[SHAPE_SECTION] = snapshot.count(CONTINUATION)
    around = REPLY_PRIMING + target.tools_tokens + added_tools
    estimate = sum(counted.sections.values()) + around
    total = estimate if target.calibration is None else target.calibration.count(estimate)
    with_tools = bool(target.tools_tokens or added_tools)
    note = estimate_note(target.profile, target.profile.encoding, counted.sent, with_tools)
    return _Size(estimate, total, around, note)


@dataclass
class _Counted:
    sections: dict[str, int]  # tokens by section, as sent
    sent: list[Message]
    fixed: int  # the system prompt, system context and system messages
    stored: dict[int, int]  # tokens by stored seq, as sent


def _counted(
    snapshot: Snapshot, items: Sequence[Item], entries: Sequence[tuple[int, Message]]
) -> _Counted:
    """The tokens of the repaired ``entries`` (indexes into ``items``) as sent."""
    out = _Counted({}, [], 0, {})
    for index, message in entries:
        item = items[index]
        tokens = snapshot.refit(item, message).tokens
        out.sections[item.section] = out.sections.get(item.section, 0) + tokens
        out.sent.append(message)
        if item.section in FIXED_SECTIONS or message.role == "system":
            out.fixed += tokens
        elif item.seq > 0:
            out.stored[item.seq] = out.stored.get(item.seq, 0) + tokens
    return out


def _system_prompt_first(items: Sequence[Item]) -> list[Item]:
    """The view with the system prompt a history carries (the system messages that open its
    conversation) first, then its opening task (with the system messages right after it) when
    a compaction summary follows it, before a summary or buffer the section order put ahead of
    them: the Anthropic shape sends the system prompt first anyway, and the agent's task stays
    as it sent it, never merged behind a summary (the summary comes after it)."""
    opening = _opening(items)
    if not opening or all(a is b for a, b in zip(items, opening, strict=False)):
        return list(items)
    moved = {id(item) for item in opening}
    return [*opening, *(item for item in items if id(item) not in moved)]


def _opening(items: Sequence[Item]) -> list[Item]:
    """The leading system messages of the conversation, its opening task when no compaction
    summary is older than it but one stands in the view, and the system messages right after
    that task."""
    ours = [item for item in items if item.section == DEFAULT_SECTION]
    # Only the summaries ctxc's compactions wrote: a caller's own summary section keeps the
    # inference order it asked for.
    summaries = [
        item.seq
        for item in items
        if item.section == SUMMARY_SECTION and "compaction_id" in item.message.metadata
    ]
    opening: list[Item] = []
    task_seen = False
    for item in ours:
        if item.message.role == "system":
            opening.append(item)
            continue
        older = any(seq < item.seq for seq in summaries)
        if task_seen or not summaries or older or not is_prompt(item):
            break
        opening.append(item)
        task_seen = True
    return opening


def _continued(snapshot: Snapshot, items: Sequence[Item]) -> list[Item]:
    """The leading items that continue a round whose calls were sent before (none without such
    calls, or when the view opens with an assistant turn)."""
    if not snapshot.prior_call_ids or not items or items[0].message.role == "assistant":
        return []
    return snapshot.rounds(items)[0]


def _reports(left_out: Any) -> list[LeftOutReport]:
    return [
        LeftOutReport(reason, sum(last - first + 1 for first, last in ranges), ranges)
        for reason, ranges in left_out_by_reason(left_out).items()
    ]
