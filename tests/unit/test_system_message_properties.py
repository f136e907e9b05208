"""System messages anywhere in a history (Claude Code's mid-conversation ones, OpenAI system or
developer messages) are treated like the system prompt, over generated histories counted with
the real tokenizers: every budget keeps them all, verbatim and in order, with a provider-valid
request; no compaction takes one, nor the opening task."""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

from hypothesis import event, given, settings
from hypothesis import strategies as st

from app.adapters.tokenizers import load_counter
from app.domain.compaction.planning import (
    CompactionPolicy,
    plan_full,
    plan_micro,
    plan_session,
)
from app.domain.compilers.base import Item, Snapshot
from app.domain.compilers.decorators import BudgetTooSmall
from app.domain.compilers.registry import build
from app.domain.compilers.spec import parse_spec
from app.domain.compiling import NothingToSend, Target, compile_request
from app.domain.messages import Message, TextPart
from app.domain.providers import PROFILES
from app.domain.tokens import count_message
from app.domain.validity import request_problems
from tests.unit.compiler_builders import NOW, assistant, tool, user

COUNTER = load_counter()
SETTINGS = settings(max_examples=80, deadline=None)
PROFILE_NAMES = ("gpt-4o", "anthropic", "gemini", "openai-responses")
TASK = Message(
    role="user",
    content=(
        TextPart(text="<system-reminder>Use the project's CLAUDE.md.</system-reminder>"),
        TextPart(text="Fix the failing test in tests/test_parser.py."),
    ),
)


def system_message(n: int, anthropic_place: bool) -> Message:
    """A system message of the conversation: one sent inside Anthropic ``messages`` or a plain
    canonical one (an OpenAI system or developer message)."""
    meta = {"anthropic": {"place": "messages"}} if anthropic_place else {}
    return Message(
        role="system", content=(TextPart(text=f"reminder {n}: mode changed"),), metadata=meta
    )


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    """The opening task, then tool rounds and prompts, with system messages between rounds."""
    out = [Message(role="system", content=(TextPart(text="You are an agent."),)), TASK]
    for n in range(draw(st.integers(1, 12))):
        if draw(st.integers(0, 2)) == 0:
            out.append(system_message(n, draw(st.booleans())))
        ids = [f"c{n}-{k}" for k in range(draw(st.integers(0, 2)))]
        out.append(assistant(f"step {n}" if not ids else "", *ids))
        body = "line of output\n" * draw(st.integers(1, 60))
        out += [tool(i, body) for i in ids]
        if draw(st.booleans()):
            out.append(user(f"prompt {n}: " + "details " * draw(st.integers(1, 40))))
    if out[-1].role != "user":
        out.append(user("go on"))
    return out


def counted(profile: str) -> Callable[[Message], int]:
    encoder = COUNTER.encoder(PROFILES[profile].encoding)
    return lambda message: count_message(message, encoder)


def stored(messages: list[Message], count: Callable[[Message], int]) -> tuple[Item, ...]:
    return tuple(Item(n + 1, "messages", m, count(m)) for n, m in enumerate(messages))


def system_seqs(items: tuple[Item, ...]) -> list[int]:
    return [i.seq for i in items if i.message.role == "system"]


@SETTINGS
@given(histories(), st.sampled_from(PROFILE_NAMES), st.integers(150, 3_000))
def test_every_budget_keeps_every_system_message_in_order_and_valid(
    messages: list[Message], profile: str, window: int
) -> None:
    count = counted(profile)
    items = stored(messages, count)
    snapshot = Snapshot(items=items, tenant="acme", now=NOW, count=count)
    spec = {
        "base": "current_tool_trace",
        "decorators": [{"name": "token_limit", "params": {"reserve": 0}}],
    }
    try:
        output = compile_request(
            snapshot, build(parse_spec(spec)), Target(PROFILES[profile], window)
        )
    except (NothingToSend, BudgetTooSmall):
        event("refused")
        return  # a 422: what must be sent does not fit; never an output without it
    sent = output.seqs
    event("trimmed" if len(sent) < len(items) else "whole")
    assert all(a < b for a, b in pairwise(sent))
    assert set(system_seqs(items)) <= set(sent)
    target = PROFILES[profile].output
    head = output.instructions if target == "responses" else output.system
    assert request_problems(target, head, output.messages) == []
    rendered = repr((head, output.messages))
    for seq in system_seqs(items):  # verbatim
        assert items[seq - 1].message.text in rendered


@SETTINGS
@given(histories(), st.sampled_from(["session", "micro", "full"]), st.integers(0, 3))
def test_no_compaction_takes_a_system_message_or_the_opening_task(
    messages: list[Message], kind: str, recent: int
) -> None:
    items = stored(messages, counted("gpt-4o"))
    policy = CompactionPolicy(
        trigger_tokens=100, min_messages=2, summary_tokens=64, preserve_recent_api_rounds=recent
    )
    plan = {
        "session": lambda: plan_session(items, policy, now=True),
        "micro": lambda: plan_micro(items, policy),
        "full": lambda: plan_full(items, policy),
    }[kind]()
    event("planned" if plan else "no plan")
    if plan is None:
        return
    taken = {i.seq for i in plan.taken}
    assert taken.isdisjoint(system_seqs(items))
    assert 2 not in taken  # the opening task (seq 2) is never summarised
    assert [i.seq for i in plan.left if i.message.role == "system"] == system_seqs(items)
