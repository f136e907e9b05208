"""One compile, end to end and pure: the compiler's view, the system prompt before it, then a
provider-valid request with its token figures, what was left out and why, and warnings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from app.domain.compilers.base import Compiler, Item, Snapshot, left_out_by_reason, seq_ranges
from app.domain.errors import DomainError
from app.domain.formats.anthropic import System
from app.domain.messages import JSONObject, Message, TextPart
from app.domain.providers import ProviderProfile, estimate_note
from app.domain.sessions import PromptFragment
from app.domain.tokens import REPLY_PRIMING
from app.domain.validity import repair, shape
from app.domain.validity.anthropic_turns import CONTINUATION, opens_with_assistant

SYSTEM_PROMPT_SECTION = "system_prompt"
# Where the tokens of a turn the provider's shape adds (Anthropic's opening user turn) go.
SHAPE_SECTION = "shape"


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

    @property
    def budget_used_pct(self) -> float:
        return round(100 * self.total / self.context_window, 2)


def system_message(fragments: Sequence[PromptFragment]) -> Message | None:
    """The system prompt as one system message, a text part per fragment (None when empty)."""
    parts = tuple(TextPart(text=f.text) for f in fragments if f.text.strip())
    return Message(role="system", content=parts) if parts else None


def native_response_format(
    response_format: JSONObject | None, output: str
) -> tuple[JSONObject | None, list[str]]:
    """The response format as the provider takes it (OpenAI `response_format`, Anthropic
    `output_format`); stored in OpenAI's form."""
    if response_format is None or output == "openai":
        return response_format, []
    schema = response_format.get("json_schema", {})
    if response_format.get("type") == "json_schema" and isinstance(schema, dict):
        return {"type": "json_schema", "schema": schema.get("schema", {})}, []
    kind = response_format.get("type")
    return None, [f"response_format {kind!r} has no Anthropic equivalent; it is not sent"]


def compile_request(snapshot: Snapshot, compiler: Compiler, target: Target) -> Output:
    """Run ``compiler`` within the target's budget and render a request the provider accepts."""
    system = system_message(target.fragments)
    head = [Item(0, SYSTEM_PROMPT_SECTION, system, snapshot.count(system))] if system else []
    claimed = sum(i.tokens for i in head) + REPLY_PRIMING + target.tools_tokens
    output = target.profile.output
    scoped = replace(
        snapshot, budget=target.context_window, claimed=snapshot.claimed + claimed, target=output
    )
    compiled = compiler(scoped)
    items = [*head, *compiled.items]
    entries, warnings = repair([i.message for i in items], output, frozenset())
    system_out, messages = shape(entries, output, warnings)
    if not messages:
        raise NothingToSend()
    sections: dict[str, int] = {}
    sent: list[Message] = []
    for index, message in entries:
        item = items[index]
        tokens = item.tokens if message is item.message else snapshot.count(message)
        sections[item.section] = sections.get(item.section, 0) + tokens
        sent.append(message)
    if output == "anthropic" and opens_with_assistant(sent):
        sections[SHAPE_SECTION] = snapshot.count(CONTINUATION)
    response_format, format_warnings = native_response_format(target.response_format, output)
    total = sum(sections.values()) + REPLY_PRIMING + target.tools_tokens
    note = estimate_note(target.profile, target.profile.encoding, sent, bool(target.tools_tokens))
    if total > target.context_window:
        warnings.append(f"the request ({total} tokens) exceeds the context window")
    return Output(
        system=system_out, messages=messages, response_format=response_format, total=total,
        sections=sections, context_window=target.context_window, exact=note is None, note=note,
        left_out=_reports(compiled.left_out), warnings=[*compiled.warnings, *warnings,
                                                          *format_warnings],
        seqs=sorted(items[i].seq for i, _ in entries if items[i].seq > 0),
    )  # fmt: skip


def _reports(left_out: Any) -> list[LeftOutReport]:
    return [
        LeftOutReport(reason, len(seqs), seq_ranges(seqs))
        for reason, seqs in left_out_by_reason(left_out).items()
    ]
