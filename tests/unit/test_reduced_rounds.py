"""token_limit's reduced round: the round its walk stops at, sent with its tool results previewed
(or its assistant text cut) where that fits the room left, counted with the real tokenizer."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.tokenizers import load_counter
from app.domain.compilers.base import Compiled, Item, NeedsHistory, Snapshot
from app.domain.compilers.builtins import all_sections
from app.domain.compilers.decorators import token_limit, trim_target
from app.domain.compiling import Target
from app.domain.messages import Message, ToolResultPart
from app.domain.providers import PROFILES
from app.domain.tokens import count_message
from app.domain.validity import anthropic_problems, openai_problems
from tests.unit.compiler_builders import NOW, assistant, left, seqs, system, tool, user
from tests.unit.test_compiling_properties import Case, Run, run
from tests.unit.test_elision import digest_of, tail_outcome

ENCODER = load_counter().encoder("o200k_base")
SEEN: Counter[str] = Counter()
BASE = all_sections()


def count(message: Message) -> int:
    return count_message(message, ENCODER)


def stored(*messages: Message) -> tuple[Item, ...]:
    return tuple(Item(n + 1, "messages", m, count(m)) for n, m in enumerate(messages))


def snap(items: Sequence[Item], **fields: Any) -> Snapshot:
    return Snapshot(items=tuple(items), tenant="acme", now=NOW, count=count, **fields)


def log_text(lines: int) -> str:
    """A tool result of ``lines`` distinct lines (about 12 tokens each)."""
    return "\n".join(f"line {i}: value_{i} = compute(alpha_{i % 7}, beta)" for i in range(lines))


def prose(words: int) -> str:
    return " ".join(f"step{i % 50} checks the parser" for i in range(words // 4 + 1))


def tokens(items: Sequence[Item]) -> int:
    return sum(i.tokens for i in items)


def touched(compiled: Compiled) -> list[int]:
    return [t.seq for s in compiled.steps if s.name == "token_limit" for t in s.touched]


LOG = log_text(300)
# Rounds [1], [2, 3] (a call with a result of about 3,600 tokens), [4], [5].
READ_LOG = stored(
    user("fix the build"),
    assistant("", "c1"),
    tool("c1", LOG),
    assistant("I read the log."),
    user("now run the tests"),
)
NEWER = tokens(READ_LOG[3:])


def test_a_boundary_round_with_a_big_result_is_previewed_to_fit_the_room_left() -> None:
    budget = NEWER + 600
    compiled = token_limit(BASE, max_tokens=budget, keep_task=False)(snap(READ_LOG))
    assert seqs(compiled) == [2, 3, 4, 5]
    assert left(compiled, "token_limit") == [1]
    assert budget - 60 <= compiled.tokens <= budget  # the room is used, within a few percent
    call, result = compiled.items[0], compiled.items[1]
    assert call == READ_LOG[1]  # the call whole
    shown = result.message.content[0]
    assert isinstance(shown, ToolResultPart) and isinstance(shown.content, str)
    assert shown.content.startswith("line 0: ") and shown.content.endswith(LOG[-30:])
    assert "tool result (call c1) are omitted here" in shown.content
    assert touched(compiled) == [3]
    (omitted,) = compiled.steps[0].omitted
    assert (omitted.call_id, omitted.value) == ("c1", LOG)
    (warning,) = compiled.warnings
    assert warning.startswith("token_limit: the oldest round sent (seqs 2-3, ")
    assert "its tool results previewed" in warning


def test_reduce_false_drops_the_round_as_before() -> None:
    limit = token_limit(BASE, max_tokens=NEWER + 600, keep_task=False, reduce=False)
    compiled = limit(snap(READ_LOG))
    assert seqs(compiled) == [4, 5]
    assert left(compiled, "token_limit") == [1, 2, 3]
    assert compiled.steps == () and compiled.warnings == ()


def test_a_boundary_round_of_a_users_words_is_dropped_as_before() -> None:
    # A user's words are never cut: the round that does not fit is left out whole.
    history = stored(user("fix it"), user(prose(600)), assistant("done"), user("thanks"))
    budget = tokens(history[2:]) + 300
    compiled = token_limit(BASE, max_tokens=budget, keep_task=False)(snap(history))
    assert seqs(compiled) == [3, 4]
    assert compiled.steps == () and compiled.warnings == ()


def test_a_round_whose_call_alone_is_bigger_than_the_room_is_dropped() -> None:
    history = stored(user("go"), assistant("", "c1"), tool("c1", LOG), user("next"))
    budget = tokens(history[3:]) + 10  # not even the call fits
    compiled = token_limit(BASE, max_tokens=budget, keep_task=False)(snap(history))
    assert seqs(compiled) == [4]
    assert compiled.steps == ()


def test_only_the_boundary_round_older_rounds_stay_dropped() -> None:
    # A round that fits the room the reduced round leaves is older: it stays left out.
    history = stored(user("hi"), assistant("", "c1"), tool("c1", LOG), user("next"))
    compiled = token_limit(BASE, max_tokens=tokens(history[3:]) + 400, keep_task=False)(
        snap(history)
    )
    assert seqs(compiled) == [2, 3, 4]
    assert left(compiled, "token_limit") == [1]


def test_with_low_water_the_round_is_reduced_to_the_trim_target() -> None:
    budget = NEWER + 1_500
    target = trim_target(tokens(READ_LOG), budget, 0.8)
    assert NEWER < target < budget
    compiled = token_limit(BASE, max_tokens=budget, keep_task=False, low_water=0.8)(snap(READ_LOG))
    assert seqs(compiled) == [2, 3, 4, 5]
    assert target - 100 <= compiled.tokens <= target


def test_with_low_water_the_reduced_round_stays_byte_stable_as_the_conversation_grows() -> None:
    # The prompt prefix: within one low_water step, what is sent of the oldest round is the same.
    limit = token_limit(BASE, max_tokens=NEWER + 1_500, keep_task=False, low_water=0.6)
    grown = READ_LOG
    sent = []
    for n in range(6):
        grown = (*grown, *stored(assistant(f"ok {n}"), user(f"and {n}"))[:2])
        grown = tuple(replace(item, seq=k + 1) for k, item in enumerate(grown))
        compiled = limit(snap(grown))
        if seqs(compiled)[0] == 2:
            sent.append(compiled.items[1].message)
    assert len(sent) > 1
    assert all(message == sent[0] for message in sent)


def test_without_low_water_the_reduced_round_changes_only_every_few_turns() -> None:
    # The room left shrinks at every turn; the preview size steps down a ladder, not with it.
    limit = token_limit(BASE, max_tokens=NEWER + 800, keep_task=False)
    grown, sent = READ_LOG, []
    for n in range(16):
        grown = (*grown, *stored(assistant(f"ok {n}"), user(f"and {n}")))
        grown = tuple(replace(item, seq=k + 1) for k, item in enumerate(grown))
        compiled = limit(snap(grown))
        assert compiled.tokens <= NEWER + 800
        if seqs(compiled)[0] == 2:
            sent.append(compiled.items[1].message)
    assert len(sent) == 16
    changes = sum(a != b for a, b in pairwise(sent))
    assert 0 < changes <= 5, changes


def test_assistant_text_is_cut_when_it_alone_does_not_fit() -> None:
    text = prose(1_200)
    history = stored(user("plan it"), assistant(text), user("go on"))
    budget = tokens(history[2:]) + 200
    compiled = token_limit(BASE, max_tokens=budget, keep_task=False)(
        snap(history, session_id="s 1")
    )
    assert seqs(compiled) == [2, 3]
    assert compiled.tokens <= budget
    cut = compiled.items[0].message.text
    assert cut.startswith(text[:40]) and cut.endswith(text[-20:])
    assert "characters cut here; the whole message: GET /v1/sessions/s%201/messages" in cut
    assert "?after_seq=1&limit=1" in cut
    assert touched(compiled) == [2] and compiled.steps[0].omitted == ()
    assert "its text cut" in compiled.warnings[0]
    # With the recall tool offered, the cut names the call that returns the message.
    recalled = token_limit(BASE, max_tokens=budget, keep_task=False)(
        snap(history, session_id="s 1", recall="ctxc_recall")
    )
    line = 'characters cut here; the whole message: ctxc_recall {"seq": 2}'
    assert line in recalled.items[0].message.text


def test_assistant_text_beside_a_call_is_cut_only_when_the_previews_are_not_enough() -> None:
    narration = prose(400)
    history = stored(user("go"), assistant(narration, "c1"), tool("c1", LOG), user("next"))
    newest = tokens(history[3:])
    roomy = token_limit(BASE, max_tokens=newest + 900, keep_task=False)(snap(history))
    assert roomy.items[0].message.text == narration  # previews were enough
    tight_room = tokens(history[1:2]) - 50  # the call's message alone does not fit
    tight = token_limit(BASE, max_tokens=newest + tight_room, keep_task=False)(snap(history))
    assert seqs(tight) == [2, 3, 4]
    assert "characters cut here]" in tight.items[0].message.text
    assert tight.items[0].message.tool_calls == history[1].message.tool_calls


def test_the_opening_task_is_kept_beside_a_reduced_round() -> None:
    history = READ_LOG
    budget = tokens(history[:1]) + NEWER + 500
    compiled = token_limit(BASE, max_tokens=budget)(snap(history))
    assert seqs(compiled) == [1, 2, 3, 4, 5]
    assert compiled.tokens <= budget


# Properties over generated histories with big tool results and long texts, both providers


@st.composite
def big_round(draw: st.DrawFn, n: int) -> list[Message]:
    ids = [f"c{n}-{k}" for k in range(draw(st.integers(1, 3)))]
    kind = draw(st.sampled_from(["tools", "anthropic", "text", "user", "tools"]))
    if kind == "user":
        return [user(prose(draw(st.integers(1, 400))))]
    if kind == "text":
        return [assistant(prose(draw(st.integers(1, 600))))]
    call = assistant(prose(draw(st.integers(0, 200))) if draw(st.booleans()) else "", *ids)
    outputs = [log_text(draw(st.integers(0, 250))) for _ in ids]
    if kind == "tools":
        return [call, *(tool(i, text) for i, text in zip(ids, outputs, strict=True))]
    parts = tuple(ToolResultPart(call_id=i, content=t) for i, t in zip(ids, outputs, strict=True))
    return [call, Message(role="user", content=parts)]


@st.composite
def reduced_cases(draw: st.DrawFn) -> tuple[Case, Case]:
    """One history and budget, compiled with the reduced round and without it."""
    profile = PROFILES[draw(st.sampled_from(["gpt-4o", "anthropic"]))]
    opening = [system("You are careful.")] if draw(st.booleans()) else []
    messages = [*opening, user(prose(draw(st.integers(1, 200))))]
    for n in range(draw(st.integers(1, 8))):
        messages += draw(big_round(n))
    if draw(st.booleans()):
        messages.append(user("next"))
    encoder = load_counter().encoder(profile.encoding)
    counted = tuple(
        Item(n + 1, "messages", m, count_message(m, encoder)) for n, m in enumerate(messages)
    )
    snapshot = Snapshot(
        items=counted, tenant="acme", now=NOW, count=lambda m: count_message(m, encoder)
    )
    window = draw(st.integers(50, tokens(counted) + 100))
    params: dict[str, Any] = {"reserve": 0, "keep_task": draw(st.booleans())}
    low_water = draw(st.none() | st.floats(0.3, 0.95))
    if low_water is not None:
        params["low_water"] = low_water

    def case(reduce: bool) -> Case:
        limit = {"name": "token_limit", "params": {**params, "reduce": reduce}}
        spec = {"base": "current_tool_trace", "decorators": [limit]}
        return Case(profile.name, snapshot, Target(profile, window), "current_tool_trace", spec)

    return case(True), case(False)


def calls_and_words(item: Item) -> tuple[Any, ...]:
    """What reduction never changes: tool calls, and a user's text."""
    words = item.message.text if item.message.role == "user" else None
    return item.message.tool_calls, words


@settings(max_examples=150, deadline=None)
@given(reduced_cases())
def test_a_reduced_round_is_valid_within_budget_whole_and_only_adds_to_what_is_sent(
    cases: tuple[Case, Case],
) -> None:
    on_case, off_case = cases
    on, off = run(on_case), run(off_case)
    if off is None:
        return
    assert on is not None
    output = on.output
    if on_case.target.profile.output == "openai":
        assert openai_problems(output.messages) == []
    else:
        assert anthropic_problems(output.system, output.messages) == []
    assert output.total <= on_case.target.context_window
    assert not any("exceeds the context window" in w for w in output.warnings)
    sent, before = set(output.seqs), set(off.output.seqs)
    assert before <= sent  # never more dropped than without it
    added = [r for r in on.rounds if {i.seq for i in r} & (sent - before)]
    assert len(added) <= 1  # only the round the walk stopped at
    SEEN["reduced" if added else "as before"] += 1
    # With the newest round's previews too, one token_limit step reports both.
    assert sum(step.name == "token_limit" for step in output.steps) <= 1
    for round_ in on.rounds:  # kept whole: each call with its result
        members = {i.seq for i in round_}
        assert members <= sent or members.isdisjoint(sent)
    stored_by_seq = {i.seq: i for i in on_case.snapshot.items}
    for item in on.compiled.items:
        if item.seq and not cut_first(output.warnings, item.seq):
            assert calls_and_words(item) == calls_and_words(stored_by_seq[item.seq])
    check_tail(on_case, on)


def cut_first(warnings: Sequence[str], seq: int) -> bool:
    """Whether token_limit cut the prompt at ``seq`` as a round kept first (the prompt the
    newest round answers, the opening task): only those lose a user's words."""
    return any(w.startswith(f"token_limit: the prompt at seq {seq} ") for w in warnings)


def check_tail(case: Case, whole: Run) -> None:
    """A compile given only the newest part and a digest of the rest answers the same."""
    made = digest_of(case, keep=whole.output.total // 2)
    if made is None:
        return
    digest, ids = made
    tailed = tail_outcome(case, digest, ids)
    SEEN["needs history" if tailed is NeedsHistory else "tail"] += 1
    if tailed is not NeedsHistory:
        assert tailed == whole.output


def test_the_generated_cases_reduce_rounds_and_read_tails() -> None:
    """Not vacuous: run after the property (same module, file order), rounds were reduced and
    tails read."""
    if not SEEN:
        return  # run alone
    assert SEEN["reduced"] > 10, SEEN
    assert SEEN["tail"] > 5, SEEN


@pytest.mark.parametrize("output", ["openai", "anthropic"])
def test_a_tail_compile_with_a_reduced_round_answers_as_the_whole_history(output: str) -> None:
    history = [user("fix it")]
    for n in range(12):
        history += [assistant("", f"c{n}"), tool(f"c{n}", log_text(40 + 7 * n)), user(f"ok {n}")]
    profile = PROFILES["gpt-4o" if output == "openai" else "anthropic"]
    encoder = load_counter().encoder(profile.encoding)
    counted = tuple(
        Item(n + 1, "messages", m, count_message(m, encoder)) for n, m in enumerate(history)
    )
    snapshot = Snapshot(
        items=counted, tenant="acme", now=NOW, count=lambda m: count_message(m, encoder)
    )
    spec = {"decorators": [{"name": "token_limit", "params": {"reserve": 0}}]}
    case = Case(profile.name, snapshot, Target(profile, 2_000), "current_tool_trace", spec)
    whole = run(case)
    assert whole is not None
    assert any(w.startswith("token_limit: the oldest round sent") for w in whole.output.warnings)
    answered = 0
    for keep in (1_000, 2_500, 4_000):
        made = digest_of(case, keep)
        assert made is not None
        tailed = tail_outcome(case, *made)
        if tailed is not NeedsHistory:
            assert tailed == whole.output
            answered += 1
    assert answered
