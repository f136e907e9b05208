"""API rounds and the trimming decorators: token_limit (with hysteresis) and window."""

from __future__ import annotations

from dataclasses import replace

import pytest

from app.domain.compilers.base import LeftOut, api_rounds, left_out_by_reason, seq_ranges
from app.domain.compilers.builtins import all_sections, current_tool_trace
from app.domain.compilers.context import inject, providers
from app.domain.compilers.decorators import BudgetTooSmall, token_limit, trim_target, window
from app.domain.errors import DomainError, InvalidInput
from app.domain.validity import Target
from tests.unit.compiler_builders import (
    assistant,
    items,
    left,
    results,
    seqs,
    snapshot,
    system,
    texts,
    tool,
    user,
)

BASE = all_sections()


def rounds_of(*entries: object, target: Target | None = None) -> list[list[int]]:
    grouped = api_rounds(items(*entries), target)  # type: ignore[arg-type]
    return [[i.seq for i in r] for r in grouped]


# --- API rounds -------------------------------------------------------------------------------


def test_a_tool_call_and_its_tool_messages_form_one_round() -> None:
    grouped = rounds_of(user(), assistant("", "a", "b"), tool("a"), tool("b"), assistant("done"))
    assert grouped == [[1], [2, 3, 4], [5]]


def test_tool_results_in_a_user_turn_join_their_round() -> None:
    assert rounds_of(user(), assistant("", "a", "b"), results("a", "b"), user()) == [
        [1],
        [2, 3],
        [4],
    ]


def test_results_stay_in_the_round_the_repairs_read_them_in() -> None:
    # A second result and a result for no call are not the trimming's business: the repairs
    # drop them within this round, so grouping them apart could only orphan them.
    assert rounds_of(assistant("", "a"), tool("a"), tool("a"), tool("z")) == [[1, 2, 3, 4]]
    assert rounds_of(assistant("", "a", "a"), tool("a"), tool("a"), user()) == [[1, 2, 3], [4]]


def test_a_system_message_ends_a_round_for_openai_but_not_for_anthropic() -> None:
    # Anthropic moves system messages out of the turns, so the result still answers its call.
    history = (assistant("", "a"), system("note"), tool("a"))
    assert rounds_of(*history, target="openai") == [[1], [2], [3]]
    assert rounds_of(*history, target="anthropic") == [[1, 2, 3]]


def test_a_round_ends_at_the_first_message_that_is_not_an_answer() -> None:
    assert rounds_of(assistant("", "a", "b"), tool("a"), user(), tool("b")) == [[1, 2], [3], [4]]


def test_a_call_with_no_result_is_a_round_of_its_own() -> None:
    assert rounds_of(user(), assistant("", "a")) == [[1], [2]]


# --- left-out reporting -----------------------------------------------------------------------


def test_left_out_seqs_come_per_reason_and_as_ranges() -> None:
    entries = [LeftOut("trace", (5, 2)), LeftOut("token_limit", (1,)), LeftOut("trace", (3, 2))]
    assert left_out_by_reason(entries) == {"trace": [(2, 3), (5, 5)], "token_limit": [(1, 1)]}
    assert seq_ranges([7, 1, 2, 3, 5, 6, 9]) == [(1, 3), (5, 7), (9, 9)]


# --- token_limit ------------------------------------------------------------------------------


def test_a_tool_round_is_kept_or_dropped_whole() -> None:
    stored = items(user("q"), assistant("", "a"), tool("a"), user("next"), tokens=10)
    # Not reduced: the builders' count leaves tool results out, so any preview would "fit".
    compiled = token_limit(BASE, keep_task=False, max_tokens=25, reduce=False)(snapshot(stored))
    assert seqs(compiled) == [4]
    assert left(compiled, "token_limit") == [1, 2, 3]


def test_pinned_messages_are_kept_first_even_when_old() -> None:
    stored = items(user("rules", pinned=True), user("a"), user("b"), user("c"), tokens=10)
    compiled = token_limit(BASE, max_tokens=30)(snapshot(stored))
    assert texts(compiled) == ["rules", "b", "c"]


def test_a_pinned_message_keeps_its_whole_round() -> None:
    stored = items(assistant("", "a"), tool("a", pinned=True), user("x"), user("y"), tokens=10)
    assert seqs(token_limit(BASE, max_tokens=30)(snapshot(stored))) == [1, 2, 4]


def test_the_summary_section_is_kept_first() -> None:
    stored = items(user("a"), user("b"), ("summary", user("summary")), user("c"), tokens=10)
    compiled = token_limit(current_tool_trace(), max_tokens=20)(snapshot(stored))
    assert texts(compiled) == ["summary", "c"]


def test_output_keeps_the_inner_compilers_order() -> None:
    stored = items(user("a"), ("summary", user("s")), user("b", pinned=True), user("c"), tokens=5)
    assert texts(token_limit(current_tool_trace(), max_tokens=15)(snapshot(stored))) == [
        "s",
        "b",
        "c",
    ]


def test_a_newest_round_that_cannot_fit_is_budget_too_small_with_the_figures() -> None:
    stored = items(user("pinned", pinned=True), user("old"), user("huge"), tokens=[30, 5, 80])
    with pytest.raises(BudgetTooSmall) as caught:
        token_limit(BASE, max_tokens=100)(snapshot(stored))
    assert (caught.value.needed, caught.value.budget) == (110, 100)
    assert isinstance(caught.value, DomainError)
    assert "110" in str(caught.value) and "100" in str(caught.value)


def test_an_old_round_that_does_not_fit_is_only_dropped() -> None:
    stored = items(user("huge old"), user("pinned new", pinned=True), tokens=[500, 10])
    assert texts(token_limit(BASE, max_tokens=50)(snapshot(stored))) == ["pinned new"]


def test_the_budget_defaults_to_the_snapshot_budget_minus_the_reserve() -> None:
    stored = items(*(user(f"m{n}") for n in range(20)), tokens=1000)
    compiled = token_limit(BASE, keep_task=False)(snapshot(stored, budget=18096))
    assert len(compiled.items) == 14
    limit = token_limit(BASE, keep_task=False, reserve=0)
    assert len(limit(snapshot(stored, budget=18096)).items) == 18


def test_a_window_smaller_than_four_reserves_keeps_three_quarters_of_it_by_default() -> None:
    stored = items(*(user(f"m{n}") for n in range(10)), tokens=1000)
    compiled = token_limit(BASE, keep_task=False)(snapshot(stored, budget=8000))
    assert len(compiled.items) == 6  # a reserve of 2000 tokens, a quarter of the window


def test_a_reserve_that_leaves_no_budget_is_refused_by_name() -> None:
    stored = items(user("a"), tokens=10)
    with pytest.raises(InvalidInput) as caught:
        token_limit(BASE, reserve=4096)(snapshot(stored, budget=3594))
    message = caught.value.problems[0][1]
    assert "reserve (4096 tokens)" in message and "3594" in message and "-" not in message


def test_without_any_budget_nothing_is_trimmed_and_a_warning_says_so() -> None:
    stored = items(user("a"), user("b"))
    compiled = token_limit(BASE)(snapshot(stored))
    assert seqs(compiled) == [1, 2]
    assert compiled.warnings == ("token_limit: no budget; kept all",)


def test_claimed_tokens_such_as_the_system_prompt_count_against_the_budget() -> None:
    stored = items(user("a"), user("b"), user("c"), tokens=10)
    assert seqs(
        token_limit(BASE, keep_task=False, max_tokens=30)(snapshot(stored, claimed=10))
    ) == [2, 3]


def test_injected_messages_count_when_the_limit_wraps_them() -> None:
    stored = items(user("a"), user("b"), user("c"), tokens=10)
    snap = snapshot(stored, ephemeral=(user("one two three four five six"),))  # 10 tokens
    compiled = token_limit(inject(BASE), keep_task=False, max_tokens=30)(snap)
    assert [i.seq for i in compiled.items] == [0, 2, 3]


def test_injected_messages_are_claimed_when_they_wrap_the_limit() -> None:
    stored = items(user("a"), user("b"), user("c"), tokens=10)
    snap = snapshot(stored, ephemeral=(user("one two three four five six"),))
    compiled = inject(token_limit(BASE, keep_task=False, max_tokens=30))(snap)
    assert [i.seq for i in compiled.items] == [0, 2, 3]
    assert compiled.tokens == 30


def test_provider_messages_are_claimed_when_they_wrap_the_limit() -> None:
    stored = items(user("a"), user("b"), user("c"), tokens=10)
    compiled = providers(token_limit(BASE, max_tokens=40), ["identity"])(snapshot(stored))
    assert compiled.tokens <= 40
    assert [i.section for i in compiled.items] == ["provider", "messages", "messages", "messages"]


# --- hysteresis -------------------------------------------------------------------------------


def test_trim_target_without_low_water_is_the_budget() -> None:
    assert trim_target(1500, 1000, None) == 1000


def test_trim_target_with_low_water_trims_in_steps() -> None:
    assert trim_target(1001, 1000, 0.8) == 801
    assert trim_target(1150, 1000, 0.8) == 950
    assert trim_target(1201, 1000, 0.8) == 801


def test_low_water_trims_a_whole_step_below_the_budget_on_the_first_trim() -> None:
    stored = items(*(user(f"m{n}") for n in range(11)), tokens=10)  # 110 tokens
    compiled = token_limit(BASE, max_tokens=100, low_water=0.5)(snapshot(stored))
    assert compiled.tokens == 60  # 110 minus one step of 50


def cuts(low_water: float | None, turns: int = 60) -> list[int]:
    """The first kept seq after each appended message of a growing conversation."""
    found = []
    for n in range(1, turns + 1):
        stored = items(*(user(f"m{k}") for k in range(n)), tokens=10)
        compiled = token_limit(BASE, max_tokens=200, keep_task=False, low_water=low_water)(
            snapshot(stored)
        )
        found.append(compiled.items[0].seq)
    return found


def test_low_water_moves_the_cut_in_large_steps_as_the_conversation_grows() -> None:
    plain, stepped = cuts(None), cuts(0.75)
    assert plain == sorted(plain) and stepped == sorted(stepped)
    assert len(set(plain)) == 41  # the cut moves on every turn once the budget is reached
    assert len(set(stepped)) == 9  # the cut moves every 5 turns (50 tokens)


def test_low_water_still_keeps_a_newest_round_above_low_water() -> None:
    stored = items(user("old"), user("big new"), tokens=[50, 80])
    assert texts(token_limit(BASE, max_tokens=100, low_water=0.5)(snapshot(stored))) == ["big new"]


# --- window -----------------------------------------------------------------------------------


def test_window_keeps_the_last_n_rounds() -> None:
    stored = items(user("q"), assistant("", "a"), tool("a"), user("r"), assistant("done"))
    compiled = window(BASE, keep_task=False, rounds=2)(snapshot(stored))
    assert seqs(compiled) == [4, 5]
    assert left(compiled, "window") == [1, 2, 3]


def test_window_of_messages_never_splits_a_round() -> None:
    stored = items(user("q"), assistant("", "a", "b"), tool("a"), tool("b"), user("r"))
    assert seqs(window(BASE, keep_task=False, messages=3)(snapshot(stored))) == [5]
    assert seqs(window(BASE, keep_task=False, messages=4)(snapshot(stored))) == [2, 3, 4, 5]


def test_window_keeps_a_newest_round_larger_than_the_window_and_warns() -> None:
    stored = items(user("q"), assistant("", "a", "b"), tool("a"), tool("b"))
    compiled = window(BASE, keep_task=False, messages=2)(snapshot(stored))
    assert seqs(compiled) == [2, 3, 4]
    assert "3 messages" in compiled.warnings[0]


def test_window_keeps_pinned_summary_and_injected_messages_outside_the_count() -> None:
    stored = items(("summary", user("s")), user("p", pinned=True), user("a"), user("b"))
    snap = snapshot(stored, ephemeral=(user("doc"),))
    compiled = window(inject(current_tool_trace()), messages=1)(snap)
    assert texts(compiled) == ["doc", "s", "p", "b"]


def test_window_needs_exactly_one_of_messages_or_rounds() -> None:
    with pytest.raises(InvalidInput):
        window(BASE)
    with pytest.raises(InvalidInput):
        window(BASE, messages=1, rounds=1)


# --- the system prompt and the opening task ---------------------------------------------------


def test_system_messages_are_kept_at_any_budget_like_pinned_ones() -> None:
    stored = items(system("rules"), user("task"), user("a"), user("b"), user("c"), tokens=10)
    compiled = token_limit(BASE, max_tokens=30, keep_task=False)(snapshot(stored))
    assert texts(compiled) == ["rules", "b", "c"]
    assert left(compiled, "token_limit") == [2, 3]


def test_the_opening_task_is_kept_where_the_budget_allows() -> None:
    stored = items(system("rules"), user("task"), user("a"), user("b"), user("c"), tokens=10)
    assert texts(token_limit(BASE, max_tokens=30)(snapshot(stored))) == ["rules", "task", "c"]
    assert texts(token_limit(BASE, max_tokens=40)(snapshot(stored))) == [
        "rules",
        "task",
        "b",
        "c",
    ]


def test_an_opening_task_that_does_not_fit_is_left_out_with_a_warning() -> None:
    stored = items(system("rules"), user("task"), user("a"), user("now"), tokens=[10, 50, 5, 10])
    compiled = token_limit(BASE, max_tokens=30)(snapshot(stored))
    assert texts(compiled) == ["rules", "a", "now"]
    assert "opening task (seq 2" in compiled.warnings[0]


def test_the_opening_task_is_the_first_user_prompt_after_a_greeting() -> None:
    stored = items(assistant("hello"), user("task"), assistant("", "a"), tool("a"), tokens=10)
    assert seqs(token_limit(BASE, max_tokens=35)(snapshot(stored))) == [2, 3, 4]
    assert seqs(token_limit(BASE, max_tokens=25)(snapshot(stored))) == [3, 4]


def test_a_summary_older_than_the_first_prompt_means_the_task_was_summarised() -> None:
    stored = items(user("a"), user("b"), tokens=10)
    summarised = (*stored, replace(stored[0], seq=0, section="summary"))
    summary = replace(summarised[-1], seq=1)
    later = tuple(replace(i, seq=i.seq + 1) for i in stored)
    compiled = token_limit(current_tool_trace(), max_tokens=20)(snapshot((summary, *later)))
    assert seqs(compiled) == [1, 3]


def test_when_the_system_messages_alone_do_not_fit_the_error_says_what_they_need() -> None:
    stored = items(system("rules"), user("a"), tokens=[40, 10])
    with pytest.raises(BudgetTooSmall) as caught:
        token_limit(BASE, max_tokens=30)(snapshot(stored))
    assert "system messages 40" in str(caught.value)
    assert "the newest API round 10" in str(caught.value)


def test_window_keeps_the_system_prompt_and_the_opening_task_outside_the_count() -> None:
    stored = items(system("rules"), user("task"), user("a"), user("b"), user("c"))
    assert texts(window(BASE, messages=1)(snapshot(stored))) == ["rules", "task", "c"]
    assert texts(window(BASE, messages=1, keep_task=False)(snapshot(stored))) == ["rules", "c"]
