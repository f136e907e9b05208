"""Summarisation compaction (seeds/003): which stored messages a compaction summarises.

A plan splits a session's stored items into the part to summarise (and archive) and the part
that stays. Compaction works on whole API rounds (``api_rounds``) and never takes: a round
holding a system or pinned message, the opening task (with ``keep_task``), the newest
``preserve_recent_api_rounds`` API rounds (assistant turns with what answers them), the current
user prompt, a tool call still waiting for its result (or a result whose call stays), or what
the default compilers do not show (other sections, traces).
Rounds are taken oldest first; those kept stay where they are, and the summary takes the place
of the last message taken.

Three kinds: ``session`` (request-boundary: above ``trigger_tokens`` with at least
``min_messages``, from the oldest round on until the history is down to ``target_tokens``, the
low-water mark, so the prompt prefix then stays byte-stable for many turns), ``micro`` (the
oldest ``micro_batch_groups`` compactable rounds) and ``full`` (every compactable round).
Reactive compaction picks micro or full from the prompt usage the caller reported.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.domain.compilers.base import Item, api_rounds, is_prompt, must_keep, opening_task
from app.domain.messages import DEFAULT_SECTION, SUMMARY_SECTION
from app.domain.summaries import Reason
from app.domain.summaries.profiles import SummarizerChoice

Kind = Literal["session", "micro", "full"]
Measure = Literal["stored", "sent"]
REASONS: dict[Kind, Reason] = {
    "session": "session_compaction",
    "micro": "reactive_micro",
    "full": "reactive_full",
}
Pct = Annotated[float, Field(gt=0, le=100)]


class CompactionPolicy(BaseModel):
    """A session's compaction settings (the reactive ones with the source's names and defaults)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = Field(True, description="Request-boundary and reactive compaction run.")
    trigger_tokens: int = Field(80_000, ge=1, description="Compact above this many tokens.")
    target_tokens: int | None = Field(
        None,
        ge=1,
        description="Low-water mark compaction goes down to (default: half the trigger).",
    )
    min_messages: int = Field(20, ge=2, description="Only with at least this many messages.")
    summary_tokens: int = Field(2_000, ge=64, description="The summary's token budget.")
    micro_trigger_pct: Pct = 85
    full_trigger_pct: Pct = 92
    preserve_recent_api_rounds: int = Field(2, ge=0)
    micro_batch_groups: int = Field(2, ge=1)
    max_reactive_compactions_per_request: int = Field(3, ge=0, le=10)
    keep_task: bool = Field(
        True,
        description="The opening task (the conversation's first user prompt) stays as "
        "it was, never summarised.",
    )
    background: bool = Field(
        True,
        description="Request-boundary compaction is prepared in the background from "
        "`prepare_pct` of the trigger and swapped in by a compile over the trigger; a compile "
        "compacts inline only when the history does not fit the context window. False: the "
        "compile over the trigger compacts inline.",
    )
    prepare_pct: Pct = Field(
        70,
        description="Percent of `trigger_tokens` from which a "
        "compaction is prepared in the background.",
    )
    min_shed_pct: float = Field(
        10,
        ge=0,
        le=100,
        description="A request-boundary compaction that would shed less than "
        "this percent of the history's tokens is not applied.",
    )
    economic_gate: bool = Field(
        True,
        description="A request-boundary compaction is applied only when the tokens it "
        "sheds over the expected turns outweigh the prompt cache it rewrites (overridden when "
        "the history does not fit the context window).",
    )
    expected_turns: int | None = Field(
        None,
        ge=1,
        le=10_000,
        description="Turns the session is expected to run on, for the "
        "gate (default: its API rounds so far, those compacted away included, 1 to 100).",
    )
    summarizer: SummarizerChoice | None = Field(
        None,
        description="The summariser: a deployment profile, and what changes of it (a "
        "request's `summarizer` replaces the session's whole).",
    )
    measure: Measure = Field(
        "stored",
        description="What `trigger_tokens` and `target_tokens` are compared with: "
        "the stored history (`stored`), or the history as a compile sends it (`sent`: its "
        "previews applied, without the fixed part, which is the system prompt, system "
        "messages and tool definitions). `sent`: a compile whose history passes the trigger, "
        "or does not fit beside the fixed part, compacts first, inline, down to the low-water "
        "mark (both lowered in proportion when the fixed part leaves less room than the "
        "trigger), then compiles (one that fits, not on two compiles in a row); nothing is "
        "prepared in the background.",
    )

    @model_validator(mode="after")
    def _ordered(self) -> CompactionPolicy:
        if self.target_tokens is not None and self.target_tokens >= self.trigger_tokens:
            raise ValueError("target_tokens must be less than trigger_tokens")
        if self.micro_trigger_pct > self.full_trigger_pct:
            raise ValueError("micro_trigger_pct may not exceed full_trigger_pct")
        return self

    @property
    def low_water(self) -> int:
        return self.target_tokens if self.target_tokens is not None else self.trigger_tokens // 2

    @property
    def prepare_tokens(self) -> int:
        """The early mark: past it a compaction is prepared in the background."""
        return int(self.trigger_tokens * self.prepare_pct / 100)


@dataclass(frozen=True)
class Plan:
    """What one compaction takes (in seq order), what it leaves, and the summary's budget (the
    policy's ``summary_tokens``: the summary message, header included, is no longer)."""

    kind: Kind
    taken: tuple[Item, ...]
    left: tuple[Item, ...]
    summary_tokens: int = CompactionPolicy.model_fields["summary_tokens"].default

    @property
    def reason(self) -> Reason:
        return REASONS[self.kind]

    @property
    def tokens_before(self) -> int:
        return sum(i.tokens for i in self.taken) + sum(i.tokens for i in self.left)

    @property
    def tokens_taken(self) -> int:
        return sum(i.tokens for i in self.taken)


Round = list[Item]


# What a compaction may take: the conversation as the default compilers show it. Other sections
# and execution traces stay where they are (summarising them would put into every view what
# the compilers keep out of it).
SCOPE = frozenset({DEFAULT_SECTION, SUMMARY_SECTION})


def _in_scope(item: Item) -> bool:
    return item.section in SCOPE and not item.message.metadata.get("is_trace")


def _current_prompt(rounds: Sequence[Round]) -> int:
    """Index of the round holding the newest user message of the conversation with more than
    tool results (a summary is no prompt: it is folded into the next one)."""
    for n in reversed(range(len(rounds))):
        if any(is_prompt(i) for i in rounds[n]):
            return n
    return len(rounds)


def _recent(rounds: Sequence[Round], keep: int) -> int:
    """Index of the first of the newest ``keep`` API rounds (assistant turns with what answers
    them; a user prompt alone is no API round)."""
    starts = [n for n, r in enumerate(rounds) if r[0].message.role == "assistant"]
    return starts[-keep] if 0 < keep <= len(starts) else (0 if keep else len(rounds))


def _ties(rounds: Sequence[Round]) -> tuple[list[set[int]], set[int]]:
    """The rounds each call ties together (its call and its results: a result answers the
    newest call of its id before it), and the rounds holding a call that has no result yet.
    Ids may repeat across rounds (OpenAI histories reuse them; Gemini calls without an id get
    one per function and turn): each use ties only its own call and results."""
    newest: dict[str, int] = {}  # call id -> the round of its newest call so far
    calls: set[tuple[str, int]] = set()
    answered: set[tuple[str, int]] = set()
    ties: list[set[int]] = []
    for n, round_ in enumerate(rounds):
        for item in round_:
            for call in item.message.tool_calls:
                newest[call.id] = n
                calls.add((call.id, n))
            for result in item.message.tool_results:
                where = newest.get(result.call_id)
                if where is not None:
                    ties.append({where, n})
                    answered.add((result.call_id, where))
    pending = {n for _, n in calls - answered}
    return ties, pending


def _units(rounds: Sequence[Round], free: set[int]) -> list[Round]:
    """The free rounds merged where a call id ties them (a call and its results are taken or kept
    together), without any tied to a round that stays or to a call that has no result."""
    ties, pending = _ties(rounds)
    free = free - pending
    changed = True
    while changed:
        changed = False
        for group in ties:
            if group & free and not group <= free:
                free -= group
                changed = True
    parent = {n: n for n in free}

    def root(n: int) -> int:
        while parent[n] != n:
            n = parent[n]
        return n

    for group in ties:
        members = sorted(group & free)
        for n in members[1:]:
            parent[root(n)] = root(members[0])
    merged: dict[int, Round] = {}
    for n in sorted(free):
        merged.setdefault(root(n), []).extend(rounds[n])
    return [sorted(unit, key=lambda i: i.seq) for unit in merged.values()]


def compactable(items: Sequence[Item], policy: CompactionPolicy) -> tuple[list[Round], list[Round]]:
    """What a compaction may take, as units (rounds, merged where a call id ties them) oldest
    first, and all the history's rounds.

    Never taken: the newest ``preserve_recent_api_rounds`` API rounds, the current user prompt,
    the opening task (with ``keep_task``), rounds holding a system or pinned message or anything
    out of scope (other sections, traces), and rounds tied by a call id to one of those or to a
    call still waiting for its result.
    """
    rounds = api_rounds(items)
    end, prompt = _recent(rounds, policy.preserve_recent_api_rounds), _current_prompt(rounds)
    task = opening_task(rounds) if policy.keep_task else None
    free = {
        n
        for n, r in enumerate(rounds[:end])
        if n not in (prompt, task) and all(_in_scope(i) and not must_keep(i) for i in r)
    }
    return _units(rounds, free), rounds


def _api_rounds(units: Sequence[Round], count: int) -> list[Round]:
    """The oldest of ``units`` up to and including the ``count``-th holding an API round."""
    out: list[Round] = []
    for unit in units:
        if count <= 0:
            break
        out.append(unit)
        count -= any(i.message.role == "assistant" for i in unit)
    return out


def _plan(
    kind: Kind, taken_rounds: Sequence[Round], rounds: Sequence[Round], policy: CompactionPolicy
) -> Plan | None:
    taken = {id(i) for r in taken_rounds for i in r}
    if len(taken) < 2:
        return None  # summarising one message (an earlier summary, say) gains nothing
    every = [i for r in rounds for i in r]
    return Plan(
        kind,
        tuple(i for i in every if id(i) in taken),
        tuple(i for i in every if id(i) not in taken),
        policy.summary_tokens,
    )


def plan_session(
    items: Sequence[Item], policy: CompactionPolicy, now: bool = False, ahead: bool = False
) -> Plan | None:
    """Request-boundary compaction, when the history is over the trigger (or ``now``, when asked
    for): the oldest rounds, until what is left plus the summary is down to the low-water mark.
    ``ahead``: planned before the history reaches the trigger (in the background, past the early
    mark), to be applied when it does: down to the low-water mark less the growth still to come
    until then, so that once applied the history is at the low-water mark, not above it."""
    total = sum(i.tokens for i in items)
    due = total > policy.trigger_tokens and len(items) >= policy.min_messages
    if not (now or (policy.enabled and due)):
        return None
    low_water = policy.low_water
    if ahead:
        low_water -= max(0, policy.trigger_tokens - total)
    free, rounds = compactable(items, policy)
    taken: list[Round] = []
    for round_ in free:
        if total + policy.summary_tokens <= low_water:
            break
        taken.append(round_)
        total -= sum(i.tokens for i in round_)
    return _plan("session", taken, rounds, policy)


def sent_marks(policy: CompactionPolicy, room: int) -> tuple[int, int]:
    """The trigger and low-water mark of a ``sent`` policy for a history with ``room`` tokens
    beside the fixed part: the policy's, both lowered in proportion when the room is smaller
    than the trigger (the fixed part grew since the policy was set)."""
    trigger, low_water = policy.trigger_tokens, policy.low_water
    if 0 < room < trigger:
        return room, max(1, low_water * room // trigger)
    return trigger, low_water


def sent_items(items: Sequence[Item], sent: Mapping[int, int]) -> list[Item]:
    """``items`` counted as a compile sent them (``sent``: tokens by seq): system messages at
    0 (the fixed part); one not sent at its stored count if compaction may take it (trimming
    left it out), else at 0 (another section, a trace)."""
    return [replace(i, tokens=_sent_count(i, sent)) for i in items]


def _sent_count(item: Item, sent: Mapping[int, int]) -> int:
    if item.message.role == "system":
        return 0
    if item.seq in sent:
        return sent[item.seq]
    return item.tokens if _in_scope(item) else 0


def plan_sent(items: Sequence[Item], policy: CompactionPolicy, low_water: int) -> Plan | None:
    """A request-boundary compaction of a history counted as sent (``items``' tokens as the
    compile sends them, the fixed part at 0), down to ``low_water``."""
    return plan_session(items, policy.model_copy(update={"target_tokens": low_water}), now=True)


def plan_micro(items: Sequence[Item], policy: CompactionPolicy) -> Plan | None:
    """The oldest ``micro_batch_groups`` compactable rounds."""
    free, rounds = compactable(items, policy)
    return _plan("micro", _api_rounds(free, policy.micro_batch_groups), rounds, policy)


def plan_full(items: Sequence[Item], policy: CompactionPolicy) -> Plan | None:
    """Every compactable round."""
    free, rounds = compactable(items, policy)
    return _plan("full", free, rounds, policy)


def reactive_kind(
    prompt_tokens: int | None, context_window: int, too_long: bool, policy: CompactionPolicy
) -> Kind | None:
    """Which reactive compaction the reported usage calls for (None: none)."""
    if not policy.enabled:
        return None
    if too_long:
        return "full"
    if prompt_tokens is None:
        return None
    pct = 100 * prompt_tokens / context_window
    if pct >= policy.full_trigger_pct:
        return "full"
    return "micro" if pct >= policy.micro_trigger_pct else None


PLANS = {"session": plan_session, "micro": plan_micro, "full": plan_full}
