"""Invariants of tool payload compaction over generated tool-heavy histories, counted with the
real tokenizers: it never costs tokens, never touches the newest occurrence of a group, and the
compiled request stays valid for the provider."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.adapters.tokenizers import load_counter
from app.domain.compilers.base import Item, Snapshot
from app.domain.compilers.registry import build
from app.domain.compilers.spec import parse_spec
from app.domain.compiling import Target, compile_request
from app.domain.messages import Message, TextPart, ToolCallPart, ToolResultPart
from app.domain.providers import PROFILES
from app.domain.tokens import count_message
from app.domain.tool_payloads.compaction import (
    PayloadRules,
    compact_tool_payloads,
    payload_size,
    result_fields,
)
from app.domain.validity import request_problems
from tests.unit.compiler_builders import NOW

COUNTER = load_counter()
SETTINGS = settings(max_examples=150, deadline=None)
TOOLS = ("read", "write", "grep", "bash")
IDENTIFIERS = {"read": ["path"], "write": ["path"]}
WORDS = ("alpha", "beta", "gamma", "delta", "error", "warning", "def", "class", "return", "self")

payloads = st.one_of(
    st.sampled_from(["ok", "", "done", "x" * 101]),
    st.lists(st.sampled_from(WORDS), min_size=5, max_size=400).map(" ".join),
    st.integers(0, 40).map(
        lambda n: "\n".join(f"line {k}: {WORDS[k % len(WORDS)]}" for k in range(n))
    ),
)


@st.composite
def results(draw: st.DrawFn, call_id: str) -> ToolResultPart:
    body = draw(payloads)
    content = draw(st.sampled_from(["text", "json"]))
    text = body if content == "text" else json.dumps({"status": "ok", "out": body})
    return ToolResultPart(call_id=call_id, content=text)


@st.composite
def histories(draw: st.DrawFn) -> list[Message]:
    out: list[Message] = [Message(role="user", content=(TextPart(text="start"),))]
    for n in range(draw(st.integers(1, 10))):
        calls = [
            ToolCallPart(
                id=f"c{n}-{k}",
                name=draw(st.sampled_from(TOOLS)),
                arguments={"path": draw(st.sampled_from(["a.py", "b.py"])), "body": draw(payloads)},
            )
            for k in range(draw(st.integers(1, 2)))
        ]
        out.append(Message(role="assistant", content=tuple(calls)))
        answers = [draw(results(c.id)) for c in calls]
        if draw(st.booleans()):
            answers.reverse()  # results of parallel calls arrive in any order
        out += [Message(role="tool", content=(a,)) for a in answers]
        if draw(st.integers(0, 3)) == 0:
            out.append(Message(role="user", content=(TextPart(text=f"next {n}"),)))
    return out


rule_sets = st.builds(
    PayloadRules,
    input_trim_bytes=st.sampled_from([0, 10, 100]),
    output_trim_bytes=st.sampled_from([0, 10, 100]),
    excluded_tools=st.sampled_from([frozenset(), frozenset({"bash"})]),
    identifier_fields=st.sampled_from([{}, IDENTIFIERS]),
)


def group(call: ToolCallPart, rules: PayloadRules) -> tuple[Any, ...]:
    args = call.arguments if isinstance(call.arguments, dict) else {}
    return (call.name, *(args.get(f) for f in rules.identifier_fields.get(call.name, ())))


@SETTINGS
@given(histories(), rule_sets)
def test_the_newest_occurrence_of_every_group_is_left_whole_and_older_ones_compacted(
    history: list[Message], rules: PayloadRules
) -> None:
    calls = {c.id: c for m in history for c in m.tool_calls}
    newest: dict[tuple[Any, ...], str] = {}
    for message in history:
        for r in message.tool_results:
            newest[group(calls[r.call_id], rules)] = r.call_id
    out = compact_tool_payloads(history, rules).messages
    for before, after in zip(history, out, strict=True):
        for old, new in zip(before.content, after.content, strict=True):
            owner = old.id if isinstance(old, ToolCallPart) else getattr(old, "call_id", None)
            if owner in newest.values():
                assert new == old
            elif isinstance(old, ToolResultPart) and calls[old.call_id].name not in (
                rules.excluded_tools
            ):
                # An older occurrence: compacted exactly when one of its fields is too big.
                fields = result_fields(old) or {}
                big = any(payload_size(v) > rules.output_trim_bytes for v in fields.values())
                assert (new != old) == big


@SETTINGS
@given(histories(), st.sampled_from(["o200k_base", "cl100k_base"]), st.booleans())
def test_the_compaction_steps_never_cost_tokens(
    history: list[Message], encoding: str, dedupe: bool
) -> None:
    encoder = COUNTER.encoder(encoding)

    def count(message: Message) -> int:
        return count_message(message, encoder)

    stored = tuple(Item(n + 1, "messages", m, count(m)) for n, m in enumerate(history))
    snapshot = Snapshot(items=stored, tenant="t", now=NOW, count=count, target="openai")
    params = {"inputTrimBytes": 0, "outputTrimBytes": 0, "dedupeIdenticalResults": dedupe}
    steps = [
        {"name": "tool_compaction", "params": params},
        {
            "name": "compact_tool_results",
            "params": {"max_tokens": 60, "head_tokens": 10, "tail_tokens": 10},
        },
    ]
    plain = build(parse_spec({"base": "all_sections"}))(snapshot)
    compacted = build(parse_spec({"base": "all_sections", "decorators": steps}))(snapshot)
    assert [i.seq for i in compacted.items] == [i.seq for i in plain.items]
    for before, after in zip(plain.items, compacted.items, strict=True):
        assert after.tokens <= before.tokens
        assert after.tokens == count(after.message)
    assert plain.tokens - compacted.tokens == sum(s.tokens_saved for s in compacted.steps)


@SETTINGS
@given(
    histories(),
    st.sampled_from(["gpt-4o", "anthropic", "gemini", "openai-responses"]),
    st.integers(300, 20_000),
)
def test_compacted_requests_stay_valid_for_the_provider(
    history: list[Message], profile_name: str, window: int
) -> None:
    profile = PROFILES[profile_name]
    encoder = COUNTER.encoder(profile.encoding)

    def count(message: Message) -> int:
        return count_message(message, encoder)

    stored = tuple(Item(n + 1, "messages", m, count(m)) for n, m in enumerate(history))
    snapshot = Snapshot(items=stored, tenant="t", now=NOW, count=count, session_id="s")
    spec = {
        "decorators": [
            {"name": "tool_compaction", "params": {"dedupeIdenticalResults": True}},
            {
                "name": "compact_tool_results",
                "params": {"max_tokens": 40, "head_tokens": 5, "tail_tokens": 5},
            },
            {"name": "token_limit", "params": {"reserve": 0}},
        ]
    }
    try:
        output = compile_request(snapshot, build(parse_spec(spec)), Target(profile, window))
    except Exception as exc:  # only a budget too small for the newest round is expected
        assert type(exc).__name__ == "BudgetTooSmall"
        return
    head = output.instructions if profile.output == "responses" else output.system
    assert request_problems(profile.output, head, output.messages) == []
    assert output.total <= window
