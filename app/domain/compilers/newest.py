"""Tool results of one round cut to previews, with the line that says where the whole text is.

Older rounds' oversized results are previewed by ``compact_tool_results``; the round being
answered is left whole by every step, except here: ``compact_tool_results`` previews a result in
it above ``newest_max_tokens``, and ``token_limit`` previews its results when the round does not
fit the budget beside what must be sent (rather than answering 422). A preview keeps the head and
tail of the text around a pointer: for a session, the request that returns the original.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from urllib.parse import quote

from app.domain.compilers.base import Compiled, Item, Snapshot, StepReport, Touched, kept_always
from app.domain.messages import Message, TextPart
from app.domain.recall import pointer_text
from app.domain.tool_payloads.compaction import Compaction
from app.domain.tool_payloads.previews import PreviewRules, preview_oversized

Pointer = Callable[[int, str, int, int], str]
Note = Callable[[int, str], str]
# How many times token_limit halves the previews of a round that still does not fit.
FIT_TRIES = 6
# A preview's head and tail share this part of its cap (the rest: the pointer, rounding).
SHOWN = 0.8


def pointer_line(snapshot: Snapshot, items: Sequence[Item]) -> Pointer:
    """The line between a preview's head and tail; for a session, the request that returns the
    whole result (its message's seq picks the turn where call ids repeat), or the recall tool's
    call when the compile offers it."""
    session_id = snapshot.session_id

    def pointer(index: int, call_id: str, tokens: int, left: int) -> str:
        seq = items[index].seq
        if snapshot.recall is not None and seq:
            where = pointer_text(snapshot.recall, call_id, seq)
        elif session_id is None or not seq:
            where = "it is in the posted history"
        else:
            where = (
                f"GET /v1/sessions/{quote(session_id, safe='')}/tool-calls/"
                f"{quote(call_id, safe='')}?seq={seq}"
            )
        return (
            f"ctxc: {left:,} characters of this {tokens:,}-token tool result (call {call_id}) "
            f"are omitted here; the whole text: {where}"
        )

    return pointer


def recall_note(snapshot: Snapshot, items: Sequence[Item]) -> Note | None:
    """What a compaction placeholder of item ``index`` adds when the compile offers the recall
    tool: the call that returns the original (None without the tool)."""
    name = snapshot.recall
    if name is None:
        return None

    def note(index: int, call_id: str) -> str:
        seq = items[index].seq
        return f" The original: {pointer_text(name, call_id, seq)}" if seq else ""

    return note


def result_counter(
    snapshot: Snapshot, items: Sequence[Item]
) -> Callable[[int], Callable[[str], int]]:
    """How to count a result text of item ``n``: a message holding only the result counts as
    the item (plus a few tokens of overhead), with no second tokenisation of a large text."""

    def count(n: int) -> Callable[[str], int]:
        if len(items[n].message.content) == 1:
            return lambda _: items[n].tokens
        return lambda text: snapshot.count(Message(role="user", content=(TextPart(text=text),)))

    return count


def previewed(
    snapshot: Snapshot, items: Sequence[Item], only: frozenset[int], rules: PreviewRules
) -> tuple[list[Item], list[Touched]]:
    """``items`` with the oversized results of the items at ``only`` previewed, where that
    makes them smaller, and what each lost."""
    keep = frozenset(range(len(items))) - only
    pointer = pointer_line(snapshot, items)
    done: Compaction = preview_oversized(
        [i.message for i in items], rules, result_counter(snapshot, items), pointer, keep
    )
    out = list(items)
    touched = []
    for n, lost in sorted(done.omitted.items()):
        after = snapshot.refit(items[n], done.messages[n])
        if after.tokens < items[n].tokens:
            out[n] = after
            touched.append(Touched(items[n].seq, items[n].tokens - after.tokens, lost))
    return out, touched


def capped(cap: int) -> PreviewRules:
    """Previews of results over ``cap`` tokens, their head and tail within it."""
    shown = max(1, int(cap * SHOWN) // 2)
    return PreviewRules(max(cap, 1), shown, shown)


def fit_round(
    snapshot: Snapshot, items: Sequence[Item], round_: frozenset[int], excess: int
) -> tuple[list[Item], list[Touched]] | None:
    """``items`` with the results of the items at ``round_`` previewed until the round is
    ``excess`` tokens smaller, or None when previews cannot make it so (its other content is
    too big, or its results are previews already)."""
    size = sum(items[n].tokens for n in round_)
    room = size - excess
    results = [n for n in round_ if items[n].message.tool_results]
    if room <= 0 or not results:
        return None
    cap = room // len(results)
    for _ in range(FIT_TRIES):
        out, touched = previewed(snapshot, items, round_, capped(cap))
        if sum(out[n].tokens for n in round_) <= room:
            return out, touched
        cap //= 2
    return None


def fit_newest(
    snapshot: Snapshot, compiled: Compiled, rounds: Sequence[Sequence[Item]], excess: int
) -> Compiled | None:
    """``compiled`` with the results of its newest round (the last of ``rounds``) previewed to
    save ``excess`` tokens, reported as a ``token_limit`` step; None when that cannot be done
    (the round is one trimming always keeps, or previews cannot make it small enough)."""
    if not rounds or kept_always(rounds[-1]):
        return None
    ids = {id(item) for item in rounds[-1]}
    newest = frozenset(n for n, item in enumerate(compiled.items) if id(item) in ids)
    fitted = fit_round(snapshot, compiled.items, newest, excess)
    if fitted is None:
        return None
    items, touched = fitted
    return compiled.then(items, steps=[StepReport("token_limit", tuple(touched))])
