"""The cache-economic gate and the minimum shed (app/domain/compaction/economics.py): the
worked figures, the prices by provider, the expected turns and the policy's early mark."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from app.domain.compaction.economics import (
    MAX_TURNS,
    ROUNDS_KEY,
    Prices,
    expected_turns,
    prices_of,
    rounds_of,
    sheds_enough,
    weigh,
)
from app.domain.compaction.planning import CompactionPolicy
from app.domain.providers import BUILTIN_PROFILES
from tests.unit.compiler_builders import assistant, items, user

ANTHROPIC = Prices(0.1, 1.25)
OPENAI = Prices(0.5, 1.0)


def test_anthropic_a_compaction_pays_once_its_shed_tokens_outweigh_the_cache_it_rewrites() -> None:
    # 40,000 tokens shed over 5 turns at a tenth: 20,000; 30,000 rewritten at 1.15: 34,500.
    refused = weigh(40_000, 30_000, 5, ANTHROPIC)
    assert (refused.saved, refused.cost, refused.applied) == (20_000, 34_500, False)
    paid = weigh(40_000, 30_000, 9, ANTHROPIC)
    assert (paid.saved, paid.applied) == (36_000, True)


def test_openai_has_no_write_premium_so_shed_times_turns_against_the_rewrite() -> None:
    assert weigh(1_000, 3_000, 3, OPENAI).applied is True
    assert weigh(1_000, 3_001, 3, OPENAI).applied is False


def test_without_a_prompt_cache_the_gate_is_off_and_a_full_window_overrides_it() -> None:
    assert weigh(10, 1_000_000, 1, None).applied is True
    assert weigh(10, 1_000_000, 1, ANTHROPIC, forced=True).applied is True


def test_prices_follow_the_profile_and_its_cache() -> None:
    by_name = {p.name: p for p in BUILTIN_PROFILES}
    assert prices_of(by_name["anthropic"]) == ANTHROPIC
    assert prices_of(by_name["gpt-4o"]) == OPENAI
    assert prices_of(by_name["ollama"]) is None  # no prompt cache


def test_expected_turns_are_the_rounds_so_far_within_bounds_unless_the_policy_says() -> None:
    history = items(user("go"), *[assistant(f"step {n}") for n in range(3)], tokens=5)
    assert expected_turns(history, None) == 3
    assert expected_turns(items(user("go"), tokens=5), None) == 1
    long = items(*[assistant(f"step {n}") for n in range(MAX_TURNS + 5)], tokens=1)
    assert expected_turns(long, None) == MAX_TURNS
    assert expected_turns(history, 40) == 40


def test_the_rounds_so_far_include_those_summaries_stand_for() -> None:
    # After two chained compactions the live history is short, but the session is not young:
    # the later summary stands for 12 rounds (its own 7 and the earlier summary's 5).
    summary = user("[Summary of the earlier conversation] ...", **{ROUNDS_KEY: 12})
    history = items(summary, user("go"), assistant("a"), assistant("b"), tokens=5)
    assert rounds_of(history) == 14
    assert expected_turns(history, None) == 14
    # A summary written before summaries carried their rounds counts as none.
    assert rounds_of(items(user("[Summary of the earlier conversation] ..."), tokens=5)) == 0
    assert rounds_of(items(user("x", **{ROUNDS_KEY: "12"}), tokens=5)) == 0


def test_a_compaction_on_the_simulators_billing_pays_exactly_when_the_gate_says() -> None:
    # With a warm cache, turn by turn: without compacting, each turn reads the whole prompt;
    # compacting writes the rewrite once instead of reading it and the shed tokens, then each
    # later turn reads ``shed`` fewer. The difference over ``turns`` turns (the compaction's
    # own included) is the gate's saving minus its cost.
    lead, shed, rewrite, turns = 3_000, 20_000, 9_000, 6
    for prices in (ANTHROPIC, OPENAI):
        without = turns * prices.read * (lead + shed + rewrite)
        first = prices.read * lead + prices.write * rewrite
        with_it = first + (turns - 1) * prices.read * (lead + rewrite)
        figures = weigh(shed, rewrite, turns, prices)
        assert without - with_it == pytest.approx(figures.saved - figures.cost)
        assert figures.applied is (with_it <= without)


def test_the_minimum_shed_is_a_share_of_the_history() -> None:
    assert sheds_enough(1_000, 10_000, 10) and not sheds_enough(999, 10_000, 10)
    assert sheds_enough(0, 10_000, 0)


@given(st.integers(0, 10**6), st.integers(0, 10**6), st.integers(1, 1_000))
def test_more_turns_never_turn_an_applied_compaction_down(
    shed: int, rewrite: int, turns: int
) -> None:
    if weigh(shed, rewrite, turns, ANTHROPIC).applied:
        assert weigh(shed, rewrite, turns + 1, ANTHROPIC).applied


def test_the_early_mark_is_a_percent_of_the_trigger() -> None:
    assert CompactionPolicy(trigger_tokens=10_000).prepare_tokens == 7_000
    assert CompactionPolicy(trigger_tokens=10_000, prepare_pct=100).prepare_tokens == 10_000
    with pytest.raises(ValidationError):
        CompactionPolicy(min_shed_pct=101)
    with pytest.raises(ValidationError):
        CompactionPolicy(prepare_pct=0)
