"""A sidecar session fitted to its agent's fixed part (app/domain/compaction/room.py), and the
planning of a policy that measures the history as sent."""

from __future__ import annotations

from app.adapters.tokenizers import load_counter
from app.domain.compaction import room
from app.domain.compaction.planning import (
    CompactionPolicy,
    plan_sent,
    sent_items,
    sent_marks,
)
from app.domain.compilers.base import Item
from app.domain.compilers.registry import BUILTINS, build
from app.domain.compilers.spec import parse_spec
from app.domain.compiling import Target, compile_request
from app.domain.messages import Message
from app.domain.providers import PROFILES
from app.domain.sessions import PromptFragment
from app.domain.tokens import REPLY_PRIMING, count_message
from tests.unit.compiler_builders import assistant, items, snapshot, system, tool, user


def test_the_marks_are_shares_of_the_room_beside_the_fixed_part() -> None:
    # 40,000 tokens, 4,096 for the reply, 25,000 of system prompt and tools: 10,904 left.
    assert room.room(40_000, 25_000) == 10_904
    policy = CompactionPolicy.model_validate(room.policy(40_000, 25_000))
    assert policy.measure == "sent"
    assert (policy.trigger_tokens, policy.low_water) == (9_813, 3_816)
    assert policy.summary_tokens == 1_363 and policy.min_messages == 2
    assert policy.micro_trigger_pct == policy.full_trigger_pct == 100
    # Without a fixed part the room is the window less the reply's reserve.
    assert CompactionPolicy.model_validate(room.policy(200_000, 0)).trigger_tokens == 176_313
    # A fixed part that fills the window still leaves an eighth of it (the compile says more).
    assert room.room(40_000, 50_000) == 5_000


def test_the_compiler_previews_a_result_alike_in_every_round() -> None:
    spec = parse_spec(room.compiler(40_000, 25_000))
    [previews, limit] = spec.decorators
    assert limit.name == "token_limit" and previews.name == "compact_tool_results"
    params = previews.params
    assert params["max_tokens"] == params["newest_max_tokens"] == 10_904 // 8
    assert params["head_tokens"] == params["tail_tokens"] < params["max_tokens"] // 2
    build(spec, BUILTINS)  # a spec the registry takes
    # A tiny room keeps a useful cap.
    small = parse_spec(room.compiler(1_000, 900)).decorators[0].params
    assert small["max_tokens"] == room.MIN_RESULT_TOKENS


def test_the_marks_go_down_in_proportion_when_the_room_shrinks() -> None:
    policy = CompactionPolicy(trigger_tokens=9_000, target_tokens=3_000, measure="sent")
    assert sent_marks(policy, 20_000) == (9_000, 3_000)
    assert sent_marks(policy, 6_000) == (6_000, 2_000)


def history() -> tuple[Item, ...]:
    """Three turns with a big tool result each, after a big system prompt and the task."""
    messages = (
        system("rules"),
        user("the task"),
        assistant("", "c1"),
        tool("c1", "big"),
        assistant("read"),
        user("go on"),
        assistant("", "c2"),
        tool("c2", "big"),
        assistant("read"),
        user("more"),
        assistant("", "c3"),
        tool("c3", "big"),
        assistant("read"),
        user("last"),
    )
    return items(
        *messages, tokens=[5_000, 10, 10, 5_000, 10, 10, 10, 5_000, 10, 10, 10, 5_000, 10, 10]
    )


def test_a_history_as_sent_counts_previews_and_leaves_the_fixed_part_out() -> None:
    stored = history()
    # Seq 3 and 4 were trimmed; the results sent were previewed to 1,000 tokens.
    sent = {seq: 10 for seq in range(5, 15)} | {2: 10, 8: 1_000, 12: 1_000}
    counted = {i.seq: i.tokens for i in sent_items(stored, sent)}
    assert counted[1] == 0  # the system prompt: the fixed part
    assert counted[4] == 5_000  # left out by trimming: as stored
    assert counted[8] == counted[12] == 1_000
    policy = CompactionPolicy(trigger_tokens=3_000, summary_tokens=100, measure="sent")
    plan = plan_sent(sent_items(stored, sent), policy, low_water=1_300)
    assert plan is not None
    # The oldest rounds go (the task and the system prompt stay) until what is left and the
    # summary are at the low-water mark.
    assert [i.seq for i in plan.taken] == [3, 4, 5, 6, 7, 8]
    assert sum(i.tokens for i in plan.left) + policy.summary_tokens <= 1_300
    # Counted as stored, the newest result alone is over the mark: all that may go goes.
    whole = plan_sent(stored, policy, low_water=1_300)
    assert whole is not None and [i.seq for i in whole.taken] == [3, 4, 5, 6, 7, 8, 9, 10]


def test_a_compile_tells_its_fixed_part_from_the_history_it_sends() -> None:
    big = "\n".join(f"line {k}: value_{k} = compute(alpha_{k % 7})" for k in range(400))
    history = [
        system("rules " * 300),
        user("the task"),
        assistant("", "c1"),
        tool("c1", big),
        assistant("read"),
        user("go on"),
        assistant("", "c2"),
        tool("c2", big),
    ]
    encoder = load_counter().encoder("o200k_base")

    def count(message: Message) -> int:
        return count_message(message, encoder)

    stored = tuple(Item(n + 1, "messages", m, count(m)) for n, m in enumerate(history))
    spec = parse_spec(room.compiler(40_000, 25_000))
    fragments = (PromptFragment(name="base", text="You are an agent."),)
    target = Target(PROFILES["gpt-4o"], 40_000, fragments, tools_tokens=3_000)
    output = compile_request(snapshot(stored, count=count), build(spec, BUILTINS), target)
    sent = dict(output.sent_tokens)
    assert sorted(sent) == [2, 3, 4, 5, 6, 7, 8]  # the system message is the fixed part
    # Both results previewed alike, the newest one as the older one.
    assert sent[4] == sent[8] < stored[3].tokens // 3
    prompt = output.sections["system_prompt"]
    assert output.fixed == prompt + stored[0].tokens + 3_000 + REPLY_PRIMING
    assert output.history_tokens == sum(sent.values()) == output.estimate - output.fixed
