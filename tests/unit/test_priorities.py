"""What token_limit keeps first under any budget: the newest round and the prompt it answers,
then the opening task (cut to head and tail rather than dropped), then the rest."""

from __future__ import annotations

from app.domain.compaction.planning import CompactionPolicy
from app.domain.compaction.tasks import bulky_task, cut_task
from app.domain.compilers.base import api_rounds
from app.domain.compilers.builtins import current_tool_trace
from app.domain.compilers.decorators import token_limit
from app.domain.compilers.priorities import split_answered
from app.domain.messages import Message, TextPart, ToolResultPart
from tests.unit.compiler_builders import (
    assistant,
    items,
    results,
    seqs,
    snapshot,
    system,
    texts,
    tool,
    user,
)

BASE = current_tool_trace()
EXCHANGE = items(user("task"), assistant("answer one"), user("question"), assistant("answer two"))


def test_room_for_two_messages_keeps_the_question_the_newest_answer_replies_to() -> None:
    two = EXCHANGE[2].tokens + EXCHANGE[3].tokens
    compiled = token_limit(BASE, max_tokens=two)(snapshot(EXCHANGE))
    assert texts(compiled) == ["question", "answer two"]
    assert any("opening task (seq 1" in w for w in compiled.warnings)


def test_room_for_three_adds_the_opening_task_before_older_rounds() -> None:
    three = EXCHANGE[0].tokens + EXCHANGE[2].tokens + EXCHANGE[3].tokens
    compiled = token_limit(BASE, max_tokens=three)(snapshot(EXCHANGE))
    assert texts(compiled) == ["task", "question", "answer two"]


def test_a_huge_opening_task_is_cut_to_head_and_tail_with_a_pointer_not_dropped() -> None:
    stored = items(
        system("be brief"),
        user("Fix the parser. " + "log line " * 3000 + " end of log"),
        assistant("", "c1"),
        tool("c1", "ok"),
    )
    compiled = token_limit(BASE, max_tokens=400)(snapshot(stored, session_id="s 1"))
    assert seqs(compiled) == [1, 2, 3, 4] and compiled.tokens <= 400
    task = texts(compiled)[1]
    assert task.startswith("Fix the parser.") and task.endswith("end of log")
    assert "GET /v1/sessions/s%201/messages?after_seq=1&limit=1" in task
    assert any(
        "the prompt at seq 2" in w and "cut to head and tail" in w for w in compiled.warnings
    )


def test_the_prompt_is_split_off_only_where_calls_stay_paired() -> None:
    plain = items(user("task"), assistant("", "c1"), tool("c1"), user("next"), assistant("done"))
    rounds, answered = split_answered(api_rounds(plain))
    assert [[i.seq for i in r] for r in rounds] == [[1], [2, 3], [4], [5]] and answered == 2
    # An Anthropic user turn with results and words: the words stay with the call they answer.
    words = (ToolResultPart(call_id="c1", content="ok"), TextPart(text="now fix it"))
    turn = Message(role="user", content=words)
    mixed = items(user("task"), assistant("", "c1"), turn, assistant("done"))
    rounds, answered = split_answered(api_rounds(mixed))
    assert [[i.seq for i in r] for r in rounds] == [[1], [2, 3], [4]] and answered == 1
    # Results alone are no prompt: the newest round answers the opening task.
    alone = items(user("task"), assistant("", "c1"), results("c1"), assistant("done"))
    assert split_answered(api_rounds(alone))[1] == 0


def reminder(n: int) -> TextPart:
    return TextPart(text="<system-reminder>" + " context line" * n + "</system-reminder>")


AGENT_OPENING = Message(
    role="user",
    content=(reminder(2_000), TextPart(text="Rename the config loader."), reminder(1_500)),
)


def test_an_agents_opening_message_keeps_its_task_sentence_when_cut() -> None:
    stored = items(AGENT_OPENING, assistant("", "c1"), tool("c1", "ok"))
    compiled = token_limit(BASE, max_tokens=300)(snapshot(stored, session_id="s1"))
    assert seqs(compiled) == [1, 2, 3] and compiled.tokens <= 300
    parts = compiled.items[0].message.content
    assert [p.text for p in parts if isinstance(p, TextPart)][1] == "Rename the config loader."


def test_a_bulky_task_is_cut_in_storage_to_the_summarys_budget_its_sentence_kept() -> None:
    policy = CompactionPolicy(summary_tokens=200)
    stored = items(AGENT_OPENING, assistant("", "c1"), tool("c1", "ok"), user("go on"))
    task = bulky_task(stored, policy)
    assert task is not None and task.seq == 1

    def words(text: str) -> int:
        return len(text.split())

    cut = cut_task(task, policy.summary_tokens, words, lambda sha, left: f"{left} cut, {sha}")
    assert cut is not None and cut.seq == 1
    texts_ = [p.text for p in cut.message.content if isinstance(p, TextPart)]
    assert texts_[1] == "Rename the config loader."
    assert sum(words(t) for t in texts_) < 300
    assert [o.value for o in cut.omitted] == [
        AGENT_OPENING.content[0].text,
        AGENT_OPENING.content[2].text,
    ]  # type: ignore[union-attr]
    assert all(o.sha256 in t for o, t in zip(cut.omitted, (texts_[0], texts_[2]), strict=True))
    # A task that is not the bulk stays as it is.
    assert bulky_task(items(user("short task"), assistant("x " * 500)), policy) is None
