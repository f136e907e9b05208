"""The round trimming stopped at, sent reduced to fit the room left rather than dropped.

``token_limit`` keeps the newest rounds that fit and stops at the first that does not: that
round (the boundary) and every older one are dropped, which can leave much of the budget unused
when the boundary round is big. Here it is sent reduced instead, where that makes it fit: its
tool results previewed (head and tail around a pointer to the original, as ``newest.fit_round``
does for the round being answered); where previews are not enough, its assistant text cut to
head and tail as well (measured on the shared transcripts: most rounds that previews cannot fit
are an agent's long narration). Never a call, reasoning or a user's words: a round too big
without them stays dropped. Only the boundary round: older rounds stay dropped, so what is sent
is still a suffix of the rounds trimming may drop, and the round is kept whole (every call with
its result). The largest preview size that fits is searched for on a ladder of sizes (``RUNG``), in
a few tries per kind of reduction, each counting the previews (at most one round's tokens).

Prompt caching: what is sent of the round changes only when the room left falls below its size
on the ladder, every few turns; with ``low_water`` the room stays the same while a conversation
grows within one step, so it does not change at all until the cut moves.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from urllib.parse import quote

from app.domain.compilers.base import Compiled, Item, Snapshot, StepReport, Touched, is_prompt
from app.domain.compilers.newest import capped, previewed
from app.domain.messages import Message, Part, TextPart
from app.domain.recall import pointer_text
from app.domain.tool_payloads.previews import preview

NAME = "token_limit"
Fitted = tuple[list[Item], list[Touched]]


@dataclass(frozen=True)
class Trim:
    """What ``trim_rounds`` kept, and which round kept first it had to leave out."""

    keep: set[int]
    # The first of the rounds kept first (``priorities``) that did not fit whole, and the room
    # left for it beside what must be sent and the rounds kept before it.
    first_left_out: int | None = None
    first_room: int = 0
    # The round the walk stopped at (it did not fit) and the tokens left for it below the target.
    boundary: int | None = None
    room: int = 0


def _text_pointer(snapshot: Snapshot, seq: int) -> Callable[[int], str]:
    """The line between a cut text's head and tail: for a session, where the whole message is,
    the recall tool's call where the compile offers it (a posted history's caller has it: only
    how much was cut, to spend the room on the text)."""
    where = ""
    if snapshot.session_id is not None and seq and snapshot.recall is not None:
        where = f"; the whole message: {pointer_text(snapshot.recall, None, seq)}"
    elif snapshot.session_id is not None and seq:
        where = (
            f"; the whole message: GET /v1/sessions/{quote(snapshot.session_id, safe='')}"
            f"/messages?after_seq={seq - 1}&limit=1"
        )
    return lambda left: f"ctxc: {left:,} characters cut here{where}"


def _cut(snapshot: Snapshot, item: Item, cap: int, counted: dict[str, int]) -> Item:
    """``item`` with each text part over ``cap`` tokens cut to its head and tail (``counted``:
    the tokens of texts counted before, by text)."""
    pointer = _text_pointer(snapshot, item.seq)
    parts: list[Part] = []
    for part in item.message.content:
        # A token is at least one byte: short texts are ruled out without counting.
        if isinstance(part, TextPart) and len(part.text.encode()) > cap:
            if part.text not in counted:
                counted[part.text] = snapshot.count(Message(role="assistant", content=(part,)))
            tokens = counted[part.text]
            text = preview(part.text, tokens, capped(cap), pointer) if tokens > cap else ""
            if 0 < len(text) < len(part.text):  # a short text is never made longer
                part = part.model_copy(update={"text": text})
        parts.append(part)
    if parts == list(item.message.content):
        return item
    return snapshot.refit(item, item.message.model_copy(update={"content": tuple(parts)}))


def _results(snapshot: Snapshot, round_: Sequence[Item], cap: int) -> Fitted:
    return previewed(snapshot, round_, frozenset(range(len(round_))), capped(cap))


Reduce = Callable[[Snapshot, Sequence[Item], int], Fitted]


def _and_texts(roles: frozenset[str] = frozenset({"assistant"})) -> Reduce:
    """The results previewed and the texts of messages of ``roles`` cut, each to the cap (the
    texts counted once for every try)."""
    counted: dict[str, int] = {}

    def reduce(snapshot: Snapshot, round_: Sequence[Item], cap: int) -> Fitted:
        out, touched = _results(snapshot, round_, cap)
        for n, item in enumerate(out):
            if item.message.role not in roles:
                continue
            cut = _cut(snapshot, item, cap, counted)
            if cut.tokens < item.tokens:
                touched.append(Touched(cut.seq, item.tokens - cut.tokens, ()))
                out[n] = cut
        return out, sorted(touched, key=lambda t: t.seq)

    return reduce


# Preview caps come from a fixed ladder, each about 10% above the one before: as a conversation
# grows and the room left shrinks turn by turn, the largest cap that fits stays on one rung for
# several turns, so what is sent of the round (and the prompt prefix) stays byte-stable between
# them, for up to a tenth of the room left unused.
RUNG = 1.1


def _ladder(high: int) -> list[int]:
    """The caps of the ladder below ``high``, ascending."""
    caps: list[int] = []
    cap = 1.0
    while cap < high:
        if not caps or int(cap) > caps[-1]:
            caps.append(int(cap))
        cap *= RUNG
    return caps or [1]


def _largest(
    reduce: Reduce, snapshot: Snapshot, round_: Sequence[Item], room: int
) -> Fitted | None:
    """The reduction with the largest cap of the ladder (a smaller cap never makes the round
    bigger) that fits ``round_`` in ``room`` tokens, or None: a binary search over the rungs
    (tens of them), the smallest tried first (if that does not fit, none does)."""
    caps = _ladder(max(i.tokens for i in round_))
    best: Fitted | None = None
    low, high = 0, len(caps) - 1  # rung indexes: below low fits, above high does not
    while low <= high:
        rung = low if best is None else (low + high + 1) // 2
        out, touched = reduce(snapshot, round_, caps[rung])
        if sum(i.tokens for i in out) <= room:
            best, low = (out, touched), rung + 1
        elif best is None:
            return None
        else:
            high = rung - 1
    return best


def fit_boundary(snapshot: Snapshot, round_: Sequence[Item], room: int) -> Fitted | None:
    """``round_`` reduced to fit ``room`` tokens: its tool results previewed; where that is not
    enough, its assistant text cut too (never a user's words, a call or reasoning). None when
    neither fits."""
    if room <= 0 or not round_:
        return None
    results = any(i.message.tool_results for i in round_)
    for reduce in (_results, _and_texts()) if results else (_and_texts(),):
        fitted = _largest(reduce, snapshot, round_, room)
        if fitted is not None:
            return fitted
    return None


def fit_first(snapshot: Snapshot, round_: Sequence[Item], room: int) -> Fitted | None:
    """A round kept first (``priorities``: the prompt the newest round answers, the opening
    task) reduced to fit ``room`` tokens: its tool results previewed and its texts cut to head
    and tail, the user's words included, each around a pointer to the whole message. None when
    that does not fit either."""
    if room <= 0 or not round_:
        return None
    return _largest(_and_texts(frozenset({"assistant", "user"})), snapshot, round_, room)


def first_warning(round_: Sequence[Item], room: int, touched: Sequence[Touched]) -> str:
    """What token_limit says of a round kept first that it sent reduced."""
    seq = next(i.seq for i in round_ if is_prompt(i))
    return (
        f"token_limit: the prompt at seq {seq} ({sum(i.tokens for i in round_)} tokens with its "
        f"round) did not fit the {room} tokens left beside what must be sent; it is sent cut to "
        f"head and tail ({sum(t.tokens_saved for t in touched)} tokens saved)"
    )


def swap_round(
    compiled: Compiled, rounds: list[list[Item]], n: int, fitted: Fitted, warning: str
) -> tuple[Compiled, list[list[Item]]]:
    """``compiled`` and its ``rounds`` with round ``n`` replaced by its reduction ``fitted``,
    reported as a token_limit step with ``warning``."""
    reduced, touched = fitted
    start = sum(len(r) for r in rounds[:n])  # the rounds are the items, in order
    items = compiled.items
    assert items[start] is rounds[n][0]
    done = replace(
        compiled,
        items=(*items[:start], *reduced, *items[start + len(rounds[n]) :]),
        warnings=(*compiled.warnings, warning),
        steps=_report(compiled.steps, touched),
    )
    return done, [*rounds[:n], reduced, *rounds[n + 1 :]]


def _report(steps: Sequence[StepReport], touched: Sequence[Touched]) -> tuple[StepReport, ...]:
    """``steps`` with ``touched`` reported under token_limit, in one entry with the newest
    round's previews when those were made by this token_limit (the step before)."""
    if steps and steps[-1].name == NAME:
        return (*steps[:-1], StepReport(NAME, (*steps[-1].touched, *touched)))
    return (*steps, StepReport(NAME, tuple(touched)))


def _warning(round_: Sequence[Item], room: int, touched: Sequence[Touched]) -> str:
    seqs = [i.seq for i in round_ if i.seq]
    where = f"seq {seqs[0]}" if len(seqs) == 1 else f"seqs {seqs[0]}-{seqs[-1]}"
    results = any(t.omitted for t in touched)
    texts = any(not t.omitted for t in touched)
    what = " and ".join(
        w for w, done in (("its tool results previewed", results), ("its text cut", texts)) if done
    )
    return (
        f"token_limit: the oldest round sent ({where}, {sum(i.tokens for i in round_)} tokens) "
        f"did not fit the {room} tokens left; it is sent with {what} "
        f"({sum(t.tokens_saved for t in touched)} tokens saved)"
    )


def reduce_boundary(
    snapshot: Snapshot, compiled: Compiled, rounds: list[list[Item]], trim: Trim
) -> tuple[Compiled, list[list[Item]], Trim]:
    """``compiled``, its ``rounds`` and what ``trim`` keeps, with the round the walk stopped at
    kept, reduced to fit the room left (``fit_boundary``), reported as a token_limit step with a
    warning; all as given when it cannot be made to fit."""
    if trim.boundary is None:
        return compiled, rounds, trim
    round_ = rounds[trim.boundary]
    fitted = fit_boundary(snapshot, round_, trim.room)
    if fitted is None:
        return compiled, rounds, trim
    warning = _warning(round_, trim.room, fitted[1])
    done, regrouped = swap_round(compiled, rounds, trim.boundary, fitted, warning)
    return done, regrouped, replace(trim, keep=trim.keep | {trim.boundary}, boundary=None)
