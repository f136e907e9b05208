"""Which stored messages a summarisation compaction takes (seeds/003): triggers, the low-water
mark, micro and full, and what is never compacted."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from app.domain.compaction.planning import (
    CompactionPolicy,
    plan_full,
    plan_micro,
    plan_session,
    reactive_kind,
)
from app.domain.compilers.base import Item
from tests.unit.compiler_builders import assistant, items, system, tool, user


def turns(n: int, pinned: int | None = None) -> tuple[Item, ...]:
    """``n`` tool rounds (assistant call + result), each after a user prompt: 3n messages."""
    out = []
    for k in range(n):
        meta = {"pinned": True} if k == pinned else {}
        out += [user(f"do step {k}"), assistant("", f"c{k}", **meta), tool(f"c{k}", "done")]
    return items(*out, tokens=10)


# Without the opening task's protection, so the figures are those of plain rounds.
POLICY = CompactionPolicy(
    trigger_tokens=200,
    target_tokens=150,
    min_messages=10,
    summary_tokens=64,
    preserve_recent_api_rounds=2,
    keep_task=False,
)


def taken(plan: object) -> list[int]:
    assert plan is not None
    return [i.seq for i in plan.taken]  # type: ignore[attr-defined]


def test_nothing_below_the_trigger_or_with_too_few_messages() -> None:
    assert plan_session(turns(6), POLICY) is None  # 180 tokens <= 200
    few = CompactionPolicy(trigger_tokens=200, target_tokens=100, min_messages=100)
    assert plan_session(turns(10), few) is None
    assert plan_session(turns(10), POLICY.model_copy(update={"enabled": False})) is None


def test_over_the_trigger_the_oldest_rounds_go_down_to_the_low_water_mark() -> None:
    history = turns(10)  # 300 tokens
    plan = plan_session(history, POLICY)
    assert plan is not None and plan.kind == "session" and plan.reason == "session_compaction"
    # Each step's user prompt is a round and its call with result another: 10 tokens, 20 tokens.
    left = sum(i.tokens for i in plan.left)
    assert left + POLICY.summary_tokens <= POLICY.low_water
    assert taken(plan) == list(range(1, len(plan.taken) + 1))  # a prefix
    assert plan.tokens_before == 300 and plan.tokens_taken == 300 - left


def test_planned_ahead_it_leaves_room_for_the_growth_until_the_trigger() -> None:
    policy = CompactionPolicy(
        trigger_tokens=400,
        target_tokens=300,
        min_messages=10,
        summary_tokens=64,
        preserve_recent_api_rounds=2,
        keep_task=False,
    )
    history = turns(10)  # 300 tokens: past a 70% mark (280), 100 short of the trigger
    now = plan_session(history, policy, now=True)
    ahead = plan_session(history, policy, now=True, ahead=True)
    assert now is not None and ahead is not None
    assert sum(i.tokens for i in now.left) + 64 <= 300
    # Down to the low-water mark less the 100 tokens still to come before the trigger.
    assert sum(i.tokens for i in ahead.left) + 64 <= 200 < sum(i.tokens for i in now.left) + 64
    assert taken(ahead)[: len(now.taken)] == taken(now) and len(ahead.taken) > len(now.taken)
    # Over the trigger there is no growth to leave room for: the same plan.
    over = turns(14)
    assert taken(plan_session(over, policy, now=True, ahead=True)) == taken(
        plan_session(over, policy, now=True)
    )


def test_the_newest_rounds_the_current_prompt_and_pinned_rounds_are_never_taken() -> None:
    history = turns(10, pinned=1)
    plan = plan_full(history, POLICY)
    seqs = taken(plan)
    assert not {5, 6} & set(seqs)  # the pinned call and its result
    # The newest two API rounds (26-27, 29-30) and the current prompt (28) stay.
    assert max(seqs) == 25
    assert [i.seq for i in plan.left] == [5, 6, 26, 27, 28, 29, 30]  # type: ignore[union-attr]


def test_rounds_reusing_a_call_id_are_taken_independently() -> None:
    # OpenAI histories reuse ids across rounds, and Gemini calls without ids get one per
    # function and turn: a result ties only the newest call of its id before it.
    calls = [m for _ in range(20) for m in (assistant("", "read_0"), tool("read_0", "done"))]
    history = items(user("build it all"), *calls, tokens=10)
    assert taken(plan_full(history, POLICY)) == list(range(2, 38))


def test_a_long_agent_turn_is_compacted_behind_its_prompt() -> None:
    # One prompt, then twenty tool rounds: the rounds after the prompt may go, the prompt stays.
    calls = [m for k in range(20) for m in (assistant("", f"c{k}"), tool(f"c{k}", "done"))]
    history = items(user("build it all"), *calls, tokens=10)
    plan = plan_full(history, POLICY)
    assert taken(plan) == list(range(2, 38))
    assert plan_micro(history, POLICY) is not None


def test_a_result_is_taken_only_with_its_call() -> None:
    # c1's result comes in a later round (after a user turn): both rounds go together, or stay.
    history = items(
        user("go"),
        assistant("", "c0", "c1"),
        tool("c0"),
        user("and?"),
        tool("c1"),
        assistant("", "c2"),
        tool("c2"),
        user("next"),
        assistant("ok"),
        user("done?"),
        assistant("yes"),
        user("bye"),
        tokens=10,
    )
    plan = plan_micro(history, CompactionPolicy(micro_batch_groups=1))
    seqs = taken(plan)
    assert (2 in seqs) == (5 in seqs)


def test_other_sections_and_traces_are_left_where_they_are() -> None:
    history = items(
        user("go"),
        ("notes", user("SECRET in notes")),
        assistant("", "c0", is_trace=True),
        tool("c0", is_trace=True),
        *[i.message for i in turns(6)],
        tokens=10,
    )
    seqs = taken(plan_full(history, POLICY))
    assert not {2, 3, 4} & set(seqs)


def test_a_tool_call_waiting_for_its_result_is_never_taken() -> None:
    history = items(
        user("go"),
        assistant("", "c0"),
        tool("c0"),
        assistant("", "c1"),
        user("meanwhile"),
        assistant("ok"),
        user("next"),
        assistant("fine"),
        user("and"),
        tokens=10,
    )
    plan = plan_full(history, CompactionPolicy(preserve_recent_api_rounds=0))
    assert 4 not in taken(plan)


def test_micro_takes_the_oldest_groups_and_full_every_compactable_round() -> None:
    history = turns(10)
    policy = POLICY.model_copy(update={"micro_batch_groups": 3})
    # Three API rounds (assistant turns with their results) and the prompts before them.
    assert taken(plan_micro(history, policy)) == list(range(1, 10))
    full = plan_full(history, policy)
    assert full is not None and full.kind == "full" and full.reason == "reactive_full"
    assert taken(full) == list(range(1, 26))


def test_an_earlier_summary_is_folded_into_the_next() -> None:
    summary = ("summary", user("[Summary of the earlier conversation]\nold things"))
    history = items(summary, *[i.message for i in turns(10)], tokens=10)
    assert taken(plan_full(history, POLICY))[0] == 1


def test_a_summary_after_the_last_prompt_is_no_current_prompt_and_is_folded() -> None:
    # An agent turn of tool rounds, summarised after its prompt: the next compaction folds the
    # summary in (it used to stay as "the current prompt", one more summary each time).
    rounds = [m for k in range(8) for m in (assistant("", f"c{k}"), tool(f"c{k}", "done"))]
    summary = ("summary", user("[Summary of the earlier conversation]\nold things"))
    history = items(user("map the handlers"), summary, *rounds, tokens=10)
    plan = plan_full(history, POLICY)
    assert taken(plan)[0] == 2 and 1 not in taken(plan)  # the prompt stays, the summary goes


@pytest.mark.parametrize(
    ("prompt", "too_long", "kind"),
    [
        (84, False, None),
        (85, False, "micro"),
        (91, False, "micro"),
        (92, False, "full"),
        (None, True, "full"),
        (None, False, None),
        (10, True, "full"),
    ],
)
def test_reactive_kind_follows_the_reported_usage(
    prompt: int | None, too_long: bool, kind: str | None
) -> None:
    assert reactive_kind(prompt, 100, too_long, CompactionPolicy()) == kind


def test_the_source_defaults_and_a_consistent_policy() -> None:
    policy = CompactionPolicy()
    assert (policy.micro_trigger_pct, policy.full_trigger_pct) == (85, 92)
    assert policy.preserve_recent_api_rounds == 2 and policy.micro_batch_groups == 2
    assert policy.max_reactive_compactions_per_request == 3
    assert policy.low_water == 40_000
    with pytest.raises(ValidationError):
        CompactionPolicy(trigger_tokens=100, target_tokens=100)
    with pytest.raises(ValidationError):
        CompactionPolicy(micro_trigger_pct=95, full_trigger_pct=90)


def test_system_messages_and_the_opening_task_are_never_summarised() -> None:
    history = items(system("rules"), *(i.message for i in turns(10)), tokens=10)
    policy = POLICY.model_copy(update={"keep_task": True})
    for plan in (plan_full(history, policy), plan_session(history, policy)):
        assert plan is not None and not {1, 2} & set(taken(plan))
        assert taken(plan)[0] == 3
    assert taken(plan_full(history, POLICY))[0] == 2  # keep_task off: the task may go


def test_a_system_message_in_the_middle_stays_where_it_is() -> None:
    messages = [i.message for i in turns(10)]
    history = items(*messages[:6], system("note"), *messages[6:], tokens=10)
    plan = plan_full(history, POLICY)
    assert 7 not in taken(plan) and 7 in [i.seq for i in plan.left]  # type: ignore[union-attr]
