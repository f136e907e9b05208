"""The values every compiler shares: a session snapshot in, the compiled view out.

A compiler is a plain callable ``Snapshot -> Compiled``. Base compilers select stored items;
decorators wrap a compiler and rewrite, trim or extend what it returns. Nothing here reads a
clock, makes an id or touches storage: the caller passes all of that in the snapshot.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Literal

from app.domain.calibration import Calibration
from app.domain.compilers.replacements import Replaced
from app.domain.formats.targets import Target
from app.domain.messages import DEFAULT_SECTION, SUMMARY_SECTION, JSONObject, Message
from app.domain.tool_payloads.compaction import Omitted
from app.domain.validity.fitting import fit_message
from app.domain.validity.repair import Earlier
from app.domain.validity.untouched import facts

# Injected messages are not stored, so they carry this seq; stored seqs start at 1.
INJECTED_SEQ = 0
EPHEMERAL_SECTION = "ephemeral"
PROVIDER_SECTION = "provider"


@dataclass(frozen=True)
class Item:
    """One message with its place in the store and its token count in the target encoding."""

    seq: int
    section: str
    message: Message
    tokens: int  # per-message overhead included

    @property
    def injected(self) -> bool:
        """True for a message added by the compile itself (never stored)."""
        return self.seq == INJECTED_SEQ

    @property
    def pinned(self) -> bool:
        """True when the caller pinned the message (``metadata.pinned`` truthy)."""
        return bool(self.message.metadata.get("pinned"))


Ranges = tuple[tuple[int, int], ...]  # inclusive (first, last) seq ranges, ascending


class NeedsHistory(Exception):
    """A compile given only the newest part of a long history (``Elided``) would need the part
    it was not given to give the answer a compile of all of it gives: compile all of it."""


@dataclass(frozen=True)
class Elided:
    """What a compile is told instead of being given the older part of the view: every stored
    message below seq ``upto`` but the rounds trimming keeps anyway (system, pinned, summary)
    and the opening task's round, which are among the items.

    What it says is what the base compiler and the repairs made of that part (``digests``),
    recorded when a compile last read it: how many messages it put in the view, what they left
    out, the repairs' warnings (per pass: see ``repair_passes``), and the ``gap``: the rounds of
    the view not given, all older than every given round that trimming may drop. Trimming must
    drop them (it stops at a given round); a compile that would keep one raises
    ``NeedsHistory``.
    """

    upto: int
    view_count: int  # messages the base compiler put in the view below ``upto``
    base_left_out: tuple[LeftOut, ...]
    invalid: Ranges  # what the repairs left out below ``upto``
    gap: Ranges
    gap_tokens: int
    warnings: tuple[tuple[str, ...], ...]  # per repair pass
    # The section of the older part's last message in the view: a newer message of another
    # section could go before older ones in the view (sections come in their order).
    last_section: str | None = None
    earlier: Earlier = field(default_factory=Earlier)


@dataclass(frozen=True, kw_only=True)
class Snapshot:
    """What a compile reads: the stored items and the request's context, all passed in."""

    items: tuple[Item, ...]  # the stored messages, seq order, any section (see ``elided``)
    tenant: str
    now: datetime
    count: Callable[[Message], int]  # tokens of a new message in the target encoding
    metadata: JSONObject = field(default_factory=dict)
    execution_id: str | None = None
    session_id: str | None = None
    ephemeral: tuple[Message, ...] = ()
    budget: int | None = None
    # Tokens already spoken for outside the items: the system prompt, reply priming and the
    # messages that decorators wrapped around a token_limit will add. token_limit subtracts them.
    claimed: int = 0
    # The provider shape the view is compiled for. With one, the view is repaired for it right
    # after the base compiler, and every count is of a message as the target will receive it;
    # None (a compiler run on its own) leaves messages as stored.
    target: Target | None = None
    # Tool calls the provider already holds (a resumed session's delta): the view may open with
    # their results, which form one round with calls sent before.
    prior_call_ids: frozenset[str] = frozenset()
    # The older part of the history, when the items are only the newest part of it.
    elided: Elided | None = None
    # The name of the recall tool the compile offers (the ``recall`` decorator): placeholders
    # and previews name the call that returns their original.
    recall: str | None = None
    # Counts of a private tokenizer corrected from the provider's (app/domain/calibration.py):
    # ``budget`` and token_limit's ``max_tokens`` and ``reserve`` are then the provider's tokens,
    # which the item counts (estimates) are trimmed to once converted.
    calibration: Calibration | None = None

    def claiming(self, tokens: int) -> Snapshot:
        """The same snapshot with ``tokens`` more claimed by an outer decorator."""
        return replace(self, claimed=self.claimed + tokens)

    def rounds(self, items: Sequence[Item]) -> list[list[Item]]:
        """``items`` in the API rounds trimming keeps or drops whole, for this target."""
        return api_rounds(items, self.target, bool(self.prior_call_ids))

    def refit(self, item: Item, message: Message) -> Item:
        """``item`` holding ``message`` (a repair of its own), recounted only when it changed."""
        if message is item.message:
            return item
        return replace(item, message=message, tokens=self.count(message))

    def item(self, message: Message, section: str) -> Item:
        """An injected item for ``message``, counted in the target encoding as the target will
        receive it (the compile's final repair makes the same changes, with their warnings)."""
        sent = message if self.target is None else fit_message(0, message, self.target, [])
        return Item(INJECTED_SEQ, section, message, self.count(sent))


@dataclass(frozen=True)
class LeftOut:
    """Stored messages a step left out of the view, and why (``ranges``: more of them, as
    seq ranges)."""

    reason: str
    seqs: tuple[int, ...]
    ranges: Ranges = ()


@dataclass(frozen=True)
class Touched:
    """One message a compaction step rewrote: the tokens it saved and the originals taken out."""

    seq: int
    tokens_saved: int
    omitted: tuple[Omitted, ...]


@dataclass(frozen=True)
class StepReport:
    """What one compaction step did to the view, message by message."""

    name: str
    touched: tuple[Touched, ...] = ()

    @property
    def tokens_saved(self) -> int:
        return sum(t.tokens_saved for t in self.touched)

    @property
    def omitted(self) -> tuple[Omitted, ...]:
        return tuple(o for t in self.touched for o in t.omitted)

    @property
    def call_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(o.call_id for o in self.omitted))

    @property
    def seqs(self) -> tuple[int, ...]:
        return tuple(t.seq for t in self.touched)

    def within(self, seqs: Container[int]) -> StepReport:
        """The report of what is sent: only the messages at ``seqs`` (and injected ones)."""
        return replace(self, touched=tuple(t for t in self.touched if t.seq in seqs or not t.seq))


@dataclass(frozen=True)
class Compiled:
    """The view to send, in order, with what was left out, warnings and compaction reports."""

    items: tuple[Item, ...]
    left_out: tuple[LeftOut, ...] = ()
    warnings: tuple[str, ...] = ()
    steps: tuple[StepReport, ...] = ()
    # The elided older part of the view (``Elided.gap``), until a trimming step drops it.
    pending: Elided | None = None
    # Tool definitions the compile adds to the request, in the target's shape (``recall``).
    tools: tuple[JSONObject, ...] = ()
    replaced: tuple[Replaced, ...] = ()  # the ``redact`` steps' replacements

    @property
    def tokens(self) -> int:
        """The sum of the items' tokens."""
        return sum(item.tokens for item in self.items)

    @classmethod
    def of(cls, items: Iterable[Item], *left_out: LeftOut) -> Compiled:
        """A first step's result (empty left-outs are not kept)."""
        return cls(()).then(items, *left_out)

    def sent_warnings(self, sent: Container[int]) -> list[str]:
        """The warnings, ``redact``'s of the messages at ``sent`` only (see ``Replaced``)."""
        out: list[str | None] = list(self.warnings)
        for replaced in self.replaced:
            # A plug-in step after it may have rewritten the warnings: then they stay as given.
            if replaced.at < len(out) and (out[replaced.at] or "").startswith("redact: "):
                out[replaced.at] = replaced.warning(sent)
        return [w for w in out if w is not None]

    def then(
        self,
        items: Iterable[Item],
        *left_out: LeftOut,
        warnings: Sequence[str] = (),
        steps: Sequence[StepReport] = (),
        pending: Elided | Literal["kept"] | None = "kept",
    ) -> Compiled:
        """A later step's result: its items, with its left-outs, warnings and reports added
        (``pending``: what is left of the elided part of the view, by default as it was)."""
        dropped = tuple(entry for entry in left_out if entry.seqs or entry.ranges)
        return Compiled(
            tuple(items),
            self.left_out + dropped,
            self.warnings + tuple(warnings),
            self.steps + tuple(steps),
            self.pending if pending == "kept" else pending,
            self.tools,
            self.replaced,
        )


Compiler = Callable[[Snapshot], Compiled]


def left_out_by_reason(left_out: Iterable[LeftOut]) -> dict[str, list[tuple[int, int]]]:
    """The left-out seqs per reason, as sorted ranges without repeats (reasons in the order
    they were first given)."""
    found: dict[str, list[tuple[int, int]]] = {}
    for entry in left_out:
        found.setdefault(entry.reason, []).extend([*((s, s) for s in entry.seqs), *entry.ranges])
    return {reason: merged(ranges) for reason, ranges in found.items()}


def merged(ranges: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
    """Inclusive seq ranges, sorted, with overlapping and adjacent ones joined."""
    out: list[tuple[int, int]] = []
    for first, last in sorted(ranges):
        if out and first <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], last))
        else:
            out.append((first, last))
    return out


def seq_ranges(seqs: Iterable[int]) -> list[tuple[int, int]]:
    """Consecutive runs of seqs as inclusive ``(first, last)`` ranges."""
    return merged((seq, seq) for seq in seqs)


def api_rounds(
    items: Sequence[Item], target: Target | None = None, continuing: bool = False
) -> list[list[Item]]:
    """Items grouped into API rounds, the units trimming keeps or drops whole.

    A round is an assistant message with the messages that answer it: tool messages and user
    messages holding only tool results, up to and including a user message that has other
    content besides results (which closes it); any other message is a round of its own. These
    are the rounds the repairs pair calls and results in (``validity.untouched.boundary``), for
    ``target`` (OpenAI's rules without one), so keeping or dropping whole rounds never orphans a
    call or a result. ``continuing``: the items continue a round whose calls were sent before
    (their leading results are one round).
    """
    rounds: list[list[Item]] = [[]] if continuing else []
    open_ = continuing
    for item in items:
        fact = facts(item.message, target or "openai")
        kind = fact.kind
        if kind == "start":
            rounds.append([item])
        elif open_ and (kind == "none" or fact.results):
            rounds[-1].append(item)
        else:
            rounds.append([item])
        open_ = kind == "start" or (open_ and kind == "none")
    return [round_ for round_ in rounds if round_]


# What trimming and compaction keep


def must_keep(item: Item) -> bool:
    """True for a message trimming and compaction never take: a system message, a pinned one."""
    return item.pinned or item.message.role == "system"


def kept_always(round_: Sequence[Item]) -> bool:
    """True for a round trimming never drops: it holds a system, pinned, summary or injected
    message."""
    # ``must_keep`` and ``injected`` spelt out: trimming asks this of every round, every compile.
    for item in round_:
        if item.seq == INJECTED_SEQ or item.section == SUMMARY_SECTION:
            return True
        if item.message.role == "system" or item.message.metadata.get("pinned"):
            return True
    return False


def is_prompt(item: Item) -> bool:
    """True for a user message of the conversation with more than tool results in it."""
    message = item.message
    return (
        message.role == "user"
        and item.section == DEFAULT_SECTION
        and not item.injected
        and any(part.type != "tool_result" for part in message.content)
    )


def opening_task(rounds: Sequence[Sequence[Item]]) -> int | None:
    """Index of the round holding the opening task: the conversation's first user prompt, unless
    a summary older than it stands in the view (the opening was summarised; none then)."""
    summaries = [i.seq for r in rounds for i in r if i.section == SUMMARY_SECTION]
    oldest_summary = min(summaries, default=None)
    for n, round_ in enumerate(rounds):
        for item in round_:
            if is_prompt(item):
                older = oldest_summary is not None and oldest_summary < item.seq
                return None if older else n
    return None
