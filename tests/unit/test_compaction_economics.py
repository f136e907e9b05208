"""The cache-economic gate and the minimum shed (app/domain/compaction/economics.py): the
worked figures, the prices by provider, the expected turns and the policy's early mark."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from app.domain.compaction.economics import (
    MAX_TURNS,
    Prices,
    expected_turns,
    prices_of,
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
