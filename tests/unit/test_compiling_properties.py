"""Invariants of the whole compile pipeline (compiler, repairs, provider shape, token figures)
over generated messy histories, specs and budgets, counted with the real tokenizers."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any, cast

import hypothesis
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from app.adapters.tokenizers import load_counter
from app.domain.compilers.base import Compiled, Item, Snapshot, api_rounds
from app.domain.compilers.decorators import BudgetTooSmall
from app.domain.compilers.registry import build
from app.domain.compilers.spec import parse_spec
from app.domain.compiling import NothingToSend, Output, Target, compile_request, system_message
from app.domain.limits import message_problems
from app.domain.messages import Message, TextPart, ToolResultPart
from app.domain.providers import PROFILES
from app.domain.sessions import PromptFragment
from app.domain.tokens import REPLY_PRIMING, Encoder, count_message
from app.domain.validity import request_problems
from tests.unit.compiler_builders import NOW, assistant, tool, user
from tests.unit.compiler_builders import system as system_
from tests.unit.strategies import messy_text
from tests.unit.test_compiler_properties import ephemerals, sections, texts, traces
from tests.unit.test_compiler_properties import rounds as tidy_rounds
from tests.unit.test_validity import PREFILLS, messages_
from tests.unit.test_validity import rounds as messy_rounds

COUNTER = load_counter()
PROFILE_NAMES = ("gpt-4o", "anthropic", "gemini", "openai-responses")
SETTINGS = settings(max_examples=120, deadline=None)


# Histories: the tidy rounds of the compiler tests mixed with the messy messages and rounds of
# the validity tests, spread over sections, some pinned, some traces of an execution.


@st.composite
def extra_meta(draw: st.DrawFn) -> dict[str, Any]:
    """A trace of some execution or not, pinned one time in ten."""
    meta = dict(cast("dict[str, Any]", draw(traces)))
    return {**meta, "pinned": True} if draw(st.integers(0, 9)) == 0 else meta


@st.composite
def messy_chunk(draw: st.DrawFn) -> list[tuple[str, Message]]:
    """A messy message, round or prefill; its messages mostly share one section."""
    messages = draw(st.one_of(messages_().map(lambda m: [m]), messy_rounds(), PREFILLS))
    section = draw(sections)
    out = []
    for message in messages:
        meta = {**message.metadata, **draw(extra_meta())}
        where = section if draw(st.integers(0, 5)) else draw(sections)
        out.append((where, message.model_copy(update={"metadata": meta})))
    return out


@st.composite
def failed_round(draw: st.DrawFn, n: int) -> list[tuple[str, Message]]:
    """A tool round whose results are errors, some without output (which Anthropic refuses)."""
    ids = [f"e{n}-{k}" for k in range(draw(st.integers(1, 2)))]
    outputs = st.sampled_from(["", " ", "exit 1"])
    answers = [ToolResultPart(call_id=i, content=draw(outputs), is_error=True) for i in ids]
    return [
        ("messages", assistant("", *ids)),
        *(("messages", Message(role="tool", content=(a,))) for a in answers),
    ]


@st.composite
def stored_entries(draw: st.DrawFn) -> list[tuple[str, Message]]:
    # Half the histories open with the system prompt they carry, as OpenAI-shaped ones do.
    prompt = draw(st.none() | st.sampled_from(["You are a careful agent.", "Rules: " * 40]))
    entries: list[tuple[str, Message]] = (
        []
        if prompt is None
        else [("messages", Message(role="system", content=(TextPart(text=prompt),)))]
    )
    for n, kind in enumerate(draw(st.lists(st.integers(0, 4), min_size=1, max_size=14))):
        if kind < 2:
            entries += draw(tidy_rounds(n))
        elif kind < 4:
            entries += draw(messy_chunk())
        else:
            entries += draw(failed_round(n))
    assume(message_problems([m for _, m in entries]) == [])  # what the app accepts
    return entries


# Compiler specs

section_lists = st.lists(st.sampled_from(["summary", "buffer", "messages", "notes"]), max_size=4)
bases = st.one_of(
    st.sampled_from(["current_tool_trace", "all_sections", "selected_sections"]),
    section_lists.map(lambda s: {"name": "current_tool_trace", "params": {"sections": s}}),
    st.just({"name": "all_sections", "params": {"order": "seq"}}),
    section_lists.map(lambda s: {"name": "selected_sections", "params": {"sections": s}}),
)
windows = st.sampled_from([{"messages": 1}, {"messages": 4}, {"rounds": 2}, {"messages": 30}]).map(
    lambda params: {"name": "window", "params": params}
)
context_providers = st.sampled_from(
    [
        {"name": "providers", "params": {"names": ["identity"]}},
        {"name": "providers", "params": {"names": ["metadata"], "metadata_keys": ["plan"]}},
    ]
)
rewrites = st.sampled_from(
    [
        "redact",
        {"name": "redact", "params": {"patterns": ["main\\.py"], "builtin": False}},
        "tool_compaction",
        {
            "name": "tool_compaction",
            "params": {"inputTrimBytes": 0, "outputTrimBytes": 0, "dedupeIdenticalResults": True},
        },
        {
            "name": "compact_tool_results",
            "params": {"max_tokens": 3, "head_tokens": 1, "tail_tokens": 1},
        },
    ]
)
additions = st.just("inject") | windows | context_providers


def token_limits(context_window: int) -> st.SearchStrategy[dict[str, Any]]:
    reserve = st.integers(0, context_window // 2).map(lambda r: {"reserve": r})
    most = st.integers(context_window // 2, context_window).map(lambda m: {"max_tokens": m})
    any_max = st.integers(1, context_window).map(lambda m: {"max_tokens": m})
    # The default reserve (4096) leaves no budget in most of these windows: drawn rarely.
    default = st.integers(0, 9).flatmap(lambda n: st.just({}) if n == 0 else most)
    params = st.one_of(reserve, most, any_max, default)
    with_low_water = st.tuples(params, st.none() | st.floats(0.3, 0.95)).map(
        lambda t: t[0] if t[1] is None else {**t[0], "low_water": t[1]}
    )
    return with_low_water.map(lambda p: {"name": "token_limit", "params": p})


def decorator_lists(context_window: int, limited: bool) -> st.SearchStrategy[list[Any]]:
    """Decorators around one token_limit (a rewrite only before it, as build demands), or
    without a limit any stack at all."""
    if not limited:
        return st.lists(rewrites | additions, max_size=3)
    before = st.lists(rewrites | additions, max_size=3)
    after = st.lists(additions, max_size=2)
    return st.tuples(before, token_limits(context_window), after).map(
        lambda t: [*t[0], t[1], *t[2]]
    )


fragments = st.lists(
    st.builds(PromptFragment, name=st.sampled_from(["rules", "persona"]), text=messy_text | texts),
    max_size=3,
).map(tuple)


def context_windows(full: int) -> st.SearchStrategy[int]:
    """From 50 to 20,000 tokens; often about the size of the whole request (``full``) so that
    trimming happens, or a few tokens either side of it (an exact fit)."""

    def clamped(low: int, high: int) -> st.SearchStrategy[int]:
        return st.integers(min(max(50, low), 20_000), min(max(50, high), 20_000))

    return st.one_of(
        clamped(full // 2, full + 200),
        clamped(full - 8, full + 8),
        st.integers(50, 400),
        st.integers(50, 20_000),
    )


@dataclass(frozen=True)
class Case:
    profile: str
    snapshot: Snapshot
    target: Target
    base: Any
    spec: dict[str, Any]


def counted(encoder: Encoder) -> Callable[[Message], int]:
    return lambda message: count_message(message, encoder)


@st.composite
def cases(draw: st.DrawFn, limited: bool | None = None) -> Case:
    profile = PROFILES[draw(st.sampled_from(PROFILE_NAMES))]
    count = counted(COUNTER.encoder(profile.encoding))
    stored = tuple(
        Item(n + 1, section, message, count(message))
        for n, (section, message) in enumerate(draw(stored_entries()))
    )
    ephemeral = draw(ephemerals)
    snapshot = Snapshot(
        items=stored,
        tenant="acme",
        now=NOW,
        count=count,
        metadata={"plan": "pro"},
        execution_id=draw(st.sampled_from([None, "e1", "e2"])),
        session_id="s1",
        ephemeral=ephemeral,
    )
    prompt = draw(fragments)
    tools_tokens = draw(st.sampled_from([0, 0, 0, 12, 150]))
    system = system_message(prompt)
    around = [*ephemeral, *([system] if system else [])]
    full = REPLY_PRIMING + tools_tokens + sum(count(m) for m in around)
    context_window = draw(context_windows(full + sum(i.tokens for i in stored)))
    target = Target(profile, context_window, prompt, tools_tokens=tools_tokens)
    if limited is None:
        limited = draw(st.integers(0, 9)) > 0  # a token_limit in most examples
    base = draw(bases)
    spec = {"base": base, "decorators": draw(decorator_lists(context_window, limited))}
    return Case(profile.name, snapshot, target, base, spec)


# Known counterexamples (hand-minimised), run first as explicit examples


def known_case(
    profile_name: str, messages: Sequence[Message], window: int | None = None, prompt: str = ""
) -> Case:
    """A compile of ``messages`` under ``token_limit(reserve=0)``, in a window of ``window``
    tokens or, without one, one that fits the request exactly as the compiler counts it."""
    profile = PROFILES[profile_name]
    count = counted(COUNTER.encoder(profile.encoding))
    stored = tuple(Item(n + 1, "messages", m, count(m)) for n, m in enumerate(messages))
    snapshot = Snapshot(items=stored, tenant="acme", now=NOW, count=count)
    fragments = (PromptFragment(name="rules", text=prompt),) if prompt else ()
    system = system_message(fragments)
    exact = REPLY_PRIMING + sum(i.tokens for i in stored) + (count(system) if system else 0)
    target = Target(profile, exact if window is None else window, fragments)
    limit = {"name": "token_limit", "params": {"reserve": 0}}
    return Case(
        profile.name,
        snapshot,
        target,
        "current_tool_trace",
        {"base": "current_tool_trace", "decorators": [limit]},
    )


ASK = "please fix the failing build: the tests in main.py stopped passing after the last merge"
# Regressions: cases generation found when the repairs ran only after trimming.
# Anthropic refuses an error result without content; the repair gives it "(no output)", 3 more
# tokens than token_limit had counted (45 in a window of 42).
EMPTY_ERROR_RESULT = known_case(
    "anthropic",
    [
        user(ASK),
        assistant("", "c1"),
        Message(role="tool", content=(ToolResultPart(call_id="c1", content="", is_error=True),)),
    ],
)
# OpenAI refuses the name "John Doe"; the repair sends "John_Doe", one token more (28 in 27).
RENAMED_SPEAKER = known_case(
    "gpt-4o", [Message(role="user", content=(TextPart(text=ASK),), name="John Doe")]
)
# A stray result (for no call) between two results of one tool round: rounds that ended at it
# ([1, 2], [3], [4]) let token_limit keep [3] and [4] without their call; the repair then
# dropped seq 4 as an orphan. (Repeated call ids did the same: calls [a, a, a] then three
# results for "a" were grouped [call, result], [result], [result].)
LATE_RESULT = [assistant("", "a", "b"), tool("a", "word " * 40), tool("zz"), tool("b")]
NEWEST_RESULT_ORPHANED = known_case("gpt-4o", LATE_RESULT, window=50, prompt="be brief")
# The same with the late result pinned: kept without its call, then dropped by the repair.
PINNED_RESULT_ORPHANED = known_case(
    "gpt-4o", [*LATE_RESULT[:3], tool("b", pinned=True), user("thanks")], window=60
)


def test_a_trimmed_anthropic_view_counts_the_turn_put_before_it() -> None:
    # Trimmed to the last round, the view opens with an assistant turn, so the Anthropic shape
    # puts a user turn first: 10 tokens token_limit must claim and the total must count.
    history = [
        user(ASK),
        assistant("", "c1"),
        tool("c1", "word " * 30),
        assistant("", "c2"),
        tool("c2"),
    ]
    output = cast("Run", run(known_case("anthropic", history, window=32))).output
    assert output.seqs == [4, 5]
    assert output.sections == {"messages": 19, "shape": 10}
    assert output.total == 32
    case = known_case("anthropic", history, window=31)
    with pytest.raises(BudgetTooSmall) as raised:
        compile_request(case.snapshot, build(parse_spec(case.spec)), case.target)
    assert (raised.value.needed, raised.value.budget) == (32, 31)


# Running a case


@dataclass(frozen=True)
class Run:
    output: Output
    compiled: Compiled  # what the compiler handed to the final repair
    base: list[Item]  # what the base compiler selected, in its order, repaired for the target
    rounds: list[list[Item]]  # the API rounds of ``base``


def run(case: Case) -> Run | None:
    """The compile, or None when it raised NothingToSend or BudgetTooSmall."""
    compiler = build(parse_spec(case.spec))
    seen: list[Compiled] = []

    def spy(snapshot: Snapshot) -> Compiled:
        seen.append(compiler(snapshot))
        return seen[-1]

    try:
        output = compile_request(case.snapshot, spy, case.target)
    except (NothingToSend, BudgetTooSmall):
        return None
    target = case.target.profile.output
    base = list(build(parse_spec({"base": case.base}))(replace(case.snapshot, target=target)).items)
    return Run(output, seen[-1], base, api_rounds(base, target))


def is_subsequence(small: Sequence[int], big: Sequence[int]) -> bool:
    it = iter(big)
    return all(any(s == b for b in it) for s in small)


def seqs_of(items: Sequence[Item]) -> set[int]:
    return {i.seq for i in items}


# The properties


@SETTINGS
@given(cases())
def test_the_output_always_passes_the_target_validator(case: Case) -> None:
    result = run(case)
    if result is None:
        return
    output = result.output
    target = case.target.profile.output
    head = output.instructions if target == "responses" else output.system
    assert output.system is None or target in ("anthropic", "gemini")
    assert request_problems(target, head, output.messages) == []


@SETTINGS
@example(case=EMPTY_ERROR_RESULT)
@example(case=RENAMED_SPEAKER)
@given(cases(limited=True))
def test_with_a_token_limit_the_request_fits_the_context_window(case: Case) -> None:
    result = run(case)
    if result is None:
        return
    output = result.output
    hypothesis.target(float(output.total - output.context_window), label="overshoot")
    assert output.total <= case.target.context_window, output.sections
    assert not any("exceeds the context window" in w for w in output.warnings)


@SETTINGS
@example(case=NEWEST_RESULT_ORPHANED)
@given(cases())
def test_the_newest_selected_round_is_sent(case: Case) -> None:
    result = run(case)
    if result is None or not result.base:
        return
    assert seqs_of(result.rounds[-1]) <= set(result.output.seqs)


@SETTINGS
@example(case=PINNED_RESULT_ORPHANED)
@given(cases())
def test_order_is_preserved_and_pinned_messages_are_kept(case: Case) -> None:
    result = run(case)
    if result is None:
        return
    seqs = result.output.seqs
    assert all(a < b for a, b in pairwise(seqs))
    base_seqs = [i.seq for i in result.base]
    assert set(seqs) <= set(base_seqs)
    compiled_seqs = [i.seq for i in result.compiled.items if not i.injected]
    assert is_subsequence(compiled_seqs, base_seqs)
    pinned = [i for i in result.base if i.pinned]
    assert seqs_of(pinned) <= set(seqs)


@SETTINGS
@given(cases())
def test_no_output_lacks_a_system_prompt_the_view_had(case: Case) -> None:
    result = run(case)  # None: a 422 (they alone do not fit), never an output without them
    # Only outputs with a system prompt to keep count (Hypothesis fails if it finds none).
    assume(result is not None)
    assert result is not None
    system = {i.seq for i in result.base if i.message.role == "system" and i.message.text.strip()}
    assume(system)
    assert system <= set(result.output.seqs)
    if case.target.profile.output in ("anthropic", "gemini"):
        assert result.output.system
    elif case.target.profile.output == "responses":
        # Leading system messages are the instructions; later ones stay items, in place.
        in_place = [m for m in result.output.messages if m.get("role") in ("system", "developer")]
        assert result.output.instructions or in_place
    elif (opening := result.base[0].message).role == "system" and opening.text.strip():
        # The prompt the view opens with (a blank one is no prompt: later system messages stay
        # where they are; a trace of another execution the base view leaves out is none).
        assert result.output.messages[0]["role"] == "system"


@SETTINGS
@given(cases())
def test_no_api_round_is_split(case: Case) -> None:
    result = run(case)
    if result is None:
        return
    sent = set(result.output.seqs)
    for round_ in result.rounds:
        members = seqs_of(round_)
        assert members <= sent or members.isdisjoint(sent), sorted(members)


def test_the_system_prompt_of_the_history_goes_before_a_summary() -> None:
    profile = PROFILES["gpt-4o"]
    count = counted(COUNTER.encoder(profile.encoding))
    entries = [
        ("messages", system_("You are terse.")),
        ("messages", user(ASK)),
        ("summary", user("Summary: the build was fixed.")),
        ("messages", user("thanks")),
    ]
    stored = tuple(Item(n + 1, s, m, count(m)) for n, (s, m) in enumerate(entries))
    snapshot = Snapshot(items=stored, tenant="acme", now=NOW, count=count)
    compiler = build(parse_spec({"base": "current_tool_trace"}))
    output = compile_request(snapshot, compiler, Target(profile, 1000))
    assert [m["role"] for m in output.messages] == ["system", "user", "user", "user"]
    assert output.messages[1]["content"] == "Summary: the build was fixed."
    assert output.messages[2]["content"] == ASK


def test_the_opening_task_leads_its_anthropic_turn_before_a_summary() -> None:
    # A compaction's summary goes after the opening task it kept (issue 29 item 7).
    # With nothing between the task and the summary, Anthropic's shape merges the two user
    # turns (the API would combine them anyway): the task's blocks come first, unchanged.
    profile = PROFILES["anthropic"]
    count = counted(COUNTER.encoder(profile.encoding))
    task = Message(
        role="user",
        content=(TextPart(text="<system-reminder>r</system-reminder>"), TextPart(text=ASK)),
    )
    entries = [
        ("messages", system_("You are terse.")),
        ("messages", task),
        ("summary", user("Summary: the build was fixed.", compaction_id="c1")),
        ("messages", assistant("done")),
        ("messages", user("thanks")),
    ]
    stored = tuple(Item(n + 1, s, m, count(m)) for n, (s, m) in enumerate(entries))
    snapshot = Snapshot(items=stored, tenant="acme", now=NOW, count=count)
    compiler = build(parse_spec({"base": "current_tool_trace"}))
    output = compile_request(snapshot, compiler, Target(profile, 1000))
    assert output.system == [{"type": "text", "text": "You are terse."}]
    first = output.messages[0]["content"]
    assert first[:2] == [
        {"type": "text", "text": "<system-reminder>r</system-reminder>"},
        {"type": "text", "text": ASK},
    ]
    assert first[2]["text"] == "Summary: the build was fixed."
