"""Invariants of compiles over generated histories, budgets and specs (hypothesis)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.compilers.base import (
    Compiled,
    Compiler,
    Item,
    api_rounds,
    is_prompt,
    kept_always,
)
from app.domain.compilers.builtins import all_sections, current_tool_trace
from app.domain.compilers.decorators import BudgetTooSmall, token_limit
from app.domain.compilers.priorities import first_kept, split_answered
from app.domain.compilers.registry import build
from app.domain.compilers.spec import parse_spec
from app.domain.messages import Message
from tests.unit.compiler_builders import assistant, results, snapshot, tool, user

SECRET = "sk-proj-AbCdEfGhIjKlMnOpQrStUv12"
words = st.sampled_from(["fix", "the", "bug", "in", "main.py", SECRET, "Bearer 1234567890abcdef"])
texts = st.lists(words, min_size=1, max_size=6).map(" ".join)
traces = st.sampled_from([{}, {}, {"is_trace": True, "execution_id": "e1"}, {"is_trace": True}])
sections = st.sampled_from(["messages"] * 6 + ["summary", "buffer", "notes"])


@st.composite
def rounds(draw: st.DrawFn, n: int) -> list[tuple[str, Message]]:
    """One generated round: a plain message, or a tool round (possibly dangling or odd)."""
    meta: dict[str, Any] = {**draw(traces)}
    if draw(st.integers(0, 9)) == 0:
        meta["pinned"] = True
    kind = draw(st.sampled_from(["user", "assistant", "tools", "anthropic", "dangling", "orphan"]))
    ids = [f"c{n}-{k}" for k in range(draw(st.integers(1, 3)))]
    if kind == "user":
        return [(draw(sections), user(draw(texts), **meta))]
    if kind == "assistant":
        return [("messages", assistant(draw(texts), **meta))]
    call = ("messages", assistant("", *ids, **meta))
    if kind == "tools":
        return [call, *(("messages", tool(i, draw(texts), **meta)) for i in ids)]
    if kind == "anthropic":
        return [call, ("messages", results(*ids, **meta))]
    if kind == "dangling":
        return [call]
    return [("messages", tool("nobody", draw(texts), **meta))]


@st.composite
def histories(draw: st.DrawFn) -> tuple[Item, ...]:
    """Stored items, seq 1..n, with generated token counts."""
    entries = [e for n in range(draw(st.integers(0, 14))) for e in draw(rounds(n))]
    costs = draw(st.lists(st.integers(1, 60), min_size=len(entries), max_size=len(entries)))
    return tuple(
        Item(n + 1, section, message, cost)
        for n, ((section, message), cost) in enumerate(zip(entries, costs, strict=True))
    )


ephemerals = st.lists(texts.map(user), max_size=2).map(tuple)
bases = st.sampled_from(
    [
        "current_tool_trace",
        "all_sections",
        {"name": "selected_sections", "params": {"sections": ["summary", "messages"]}},
        {"name": "selected_sections", "params": {"sections": []}},
    ]
)


def decorators(budget: int) -> st.SearchStrategy[list[Any]]:
    """Random stacks around one token_limit; a rewrite (redact) only before it, since one
    listed after the limit changes messages it has already counted."""
    limit = st.builds(
        lambda low: {"name": "token_limit", "params": {"max_tokens": budget, "low_water": low}},
        st.none() | st.floats(0.3, 0.95),
    )
    window = st.sampled_from([{"messages": 4}, {"rounds": 2}, {"messages": 30}]).map(
        lambda params: {"name": "window", "params": params}
    )
    provider = st.just({"name": "providers", "params": {"names": ["identity"]}})
    before = st.lists(st.sampled_from(["redact", "inject"]) | window | provider, max_size=3)
    after = st.lists(st.just("inject") | window | provider, max_size=2)
    return st.tuples(before, limit, after).map(lambda t: [*t[0], t[1], *t[2]])


def seqs_of(items: Sequence[Item]) -> list[int]:
    return [i.seq for i in items if not i.injected]


def is_subsequence(small: Sequence[int], big: Sequence[int]) -> bool:
    it = iter(big)
    return all(any(s == b for b in it) for s in small)


def check_view(compiled: Compiled, base_view: Compiled) -> None:
    """Order preserved, no round split, newest round kept, pinned and summary kept."""
    kept = set(seqs_of(compiled.items))
    assert is_subsequence(seqs_of(compiled.items), seqs_of(base_view.items))
    # The prompt the newest round answers may be kept without the older turn it closes.
    grouped, _ = split_answered(api_rounds([i for i in base_view.items if not i.injected]))
    for round_ in grouped:
        assert {i.seq in kept for i in round_} in ({True}, {False})
        if kept_always(round_):
            assert {i.seq for i in round_} <= kept
    if grouped:
        assert {i.seq for i in grouped[-1]} <= kept


@settings(max_examples=300, deadline=None)
@given(
    histories(), st.integers(1, 400), bases, st.data(), ephemerals, st.sampled_from([None, "e1"])
)
def test_any_spec_with_a_token_limit_stays_within_budget_and_keeps_rounds_whole(
    stored: tuple[Item, ...],
    budget: int,
    base: Any,
    data: st.DataObject,
    ephemeral: tuple[Message, ...],
    execution: str | None,
) -> None:
    spec = {"base": base, "decorators": data.draw(decorators(budget))}
    snap = snapshot(stored, ephemeral=ephemeral, execution_id=execution)
    base_view = build(parse_spec({"base": base}))(snap)
    try:
        compiled = build(parse_spec(spec))(snap)
    except BudgetTooSmall as err:
        assert err.needed > err.budget == budget
        return
    assert compiled.tokens <= budget
    check_view(compiled, base_view)


def must_keep_and_newest(rounds_: list[list[Item]]) -> int:
    newest = rounds_[-1] if rounds_ and not kept_always(rounds_[-1]) else []
    return sum(i.tokens for r in rounds_ if kept_always(r) for i in r) + sum(
        i.tokens for i in newest
    )


def reduced_by_token_limit(compiled: Compiled) -> set[int]:
    """The seqs token_limit previewed or cut to make a round fit."""
    return {t.seq for s in compiled.steps if s.name == "token_limit" for t in s.touched}


def previewed_newest(compiled: Compiled, grouped: list[list[Item]]) -> bool:
    """Whether token_limit previewed the newest round's results to make it fit."""
    newest = {i.seq for i in grouped[-1]} if grouped else set()
    return bool(reduced_by_token_limit(compiled) & newest)


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(1, 400), st.none() | st.floats(0.3, 0.95), st.integers(0, 50))
def test_token_limit_keeps_the_newest_suffix_that_fits_or_says_the_budget_is_too_small(
    stored: tuple[Item, ...], budget: int, low_water: float | None, claimed: int
) -> None:
    base: Compiler = current_tool_trace()
    snap = snapshot(stored, claimed=claimed)
    view = base(snap)
    grouped = api_rounds(view.items)
    try:
        compiled = token_limit(base, max_tokens=budget, low_water=low_water)(snap)
    except BudgetTooSmall as err:
        assert err.needed == claimed + must_keep_and_newest(grouped) > budget
        return
    assert compiled.tokens + claimed <= budget
    if previewed_newest(compiled, grouped):  # what must be sent fits only so
        assert claimed + must_keep_and_newest(grouped) > budget
        return
    check_view(compiled, view)
    check_priorities(compiled, grouped, budget - claimed - must_keep_and_newest(grouped))


def check_priorities(compiled: Compiled, rounds_: list[list[Item]], room: int) -> None:
    """Beside what must be sent (``room`` tokens left): the prompt the newest round answers,
    then the opening task, each kept whole where it fits, else cut where that fits (never
    dropped while a lower one is kept); then the rest, a suffix, newest first."""
    grouped, firsts = first_kept(rounds_, keep_task=True)
    if not grouped:
        return
    sent = set(seqs_of(compiled.items))
    cut = reduced_by_token_limit(compiled)
    kept_first = [grouped[n][0].seq in sent for n in firsts]
    for n in firsts:
        size = sum(i.tokens for i in grouped[n])
        if size <= room:  # it fits whole beside what must be sent and those before it
            assert grouped[n][0].seq in sent and not cut & {i.seq for i in grouped[n]}
        room -= size if grouped[n][0].seq in sent else 0
    free = [r for n, r in enumerate(grouped[:-1]) if not kept_always(r) and n not in firsts]
    flags = [r[0].seq in sent for r in free]
    assert flags == sorted(flags)  # dropped rounds are all older than kept ones: a suffix
    # One kept first is sent, or it did not fit even cut and says so; and before the rest.
    for n, kept in zip(firsts, kept_first, strict=True):
        seq = next(i.seq for i in grouped[n] if is_prompt(i))
        assert kept or any(f"(seq {seq}," in w and "left out" in w for w in compiled.warnings)
    firsts_seqs = {i.seq for n in firsts for i in grouped[n]}
    newest = {i.seq for i in grouped[-1]}
    if cut - firsts_seqs - newest:  # only the oldest round sent, which did not fit whole
        oldest = free[flags.index(True)]
        assert cut - firsts_seqs - newest <= {i.seq for i in oldest}


@settings(max_examples=150, deadline=None)
@given(histories(), st.integers(40, 300), st.none() | st.floats(0.3, 0.95))
def test_as_a_conversation_grows_what_was_trimmed_stays_trimmed(
    stored: tuple[Item, ...], budget: int, low_water: float | None
) -> None:
    # Seq order: a message appended to an earlier section would not come last. The opening task
    # comes and goes with the room the newest round leaves, so it is not kept here.
    compiler = token_limit(
        all_sections("seq"), max_tokens=budget, low_water=low_water, keep_task=False
    )
    dropped: set[int] = set()
    answered_before: set[int] = set()
    whole_before = True
    for n in range(1, len(stored) + 1):
        try:
            compiled = compiler(snapshot(stored[:n]))
        except BudgetTooSmall:
            continue
        if previewed_newest(compiled, api_rounds(compiled.items)):  # it did not fit: it is sent
            continue
        # The prompt the newest round answers is kept first where it fits (like the task, it
        # comes and goes with the room the newest round leaves).
        grouped, firsts = first_kept(api_rounds(stored[:n]), keep_task=False)
        answered = {i.seq for f in firsts for i in grouped[f]}
        now_dropped = set(range(1, n + 1)) - set(seqs_of(compiled.items))
        # While it is the same and kept whole: when it changes, or is cut or left out, the room
        # left to the rest changes.
        whole = not any(w.startswith("token_limit: the prompt") for w in compiled.warnings)
        if whole and whole_before and answered == answered_before:
            assert dropped <= now_dropped
        answered_before, whole_before = answered, whole
        dropped = now_dropped


@settings(max_examples=100, deadline=None)
@given(histories(), st.sampled_from([None, "e1"]))
def test_base_compilers_account_for_every_stored_message_once(
    stored: tuple[Item, ...], execution: str | None
) -> None:
    snap = snapshot(stored, execution_id=execution)
    for compiler in (current_tool_trace(), all_sections(), all_sections("seq")):
        compiled = compiler(snap)
        left = [s for entry in compiled.left_out for s in entry.seqs]
        assert sorted(seqs_of(compiled.items) + left) == [i.seq for i in stored]
    assert seqs_of(all_sections("seq")(snap).items) == [i.seq for i in stored]
