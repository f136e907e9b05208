"""A compile given only the newest part of a history and a digest of the rest answers exactly as
a compile given all of it, or says it cannot (``NeedsHistory``): over generated messy histories,
specs, budgets and digest places, with the real tokenizers."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from app.domain.compilers.base import Item, NeedsHistory, Snapshot
from app.domain.compilers.digests import (
    Candidates,
    Digest,
    candidate_ids,
    candidates,
    earlier,
    extend,
    within,
)
from app.domain.compilers.registry import build, build_base
from app.domain.compilers.spec import parse_spec
from app.domain.compiling import Target, compile_request
from app.domain.errors import DomainError
from app.domain.messages import Message, TextPart, ToolCallPart, ToolResultPart
from app.domain.providers import PROFILES
from app.domain.tokens import count_message
from app.domain.validity.repair import Ids, fresh_base
from tests.unit.compiler_builders import NOW, assistant, tool, user
from tests.unit.test_compiling_properties import COUNTER, Case, cases

SETTINGS = settings(
    max_examples=int(__import__("os").environ.get("ELISION_EXAMPLES", "300")), deadline=None
)
SEEN: Counter[str] = Counter()


def outcome(snapshot: Snapshot, spec: dict[str, Any], target: Target) -> Any:
    """The compile's output, or the refusal it raised (type and message)."""
    try:
        return compile_request(snapshot, build(parse_spec(spec)), target)
    except DomainError as err:
        return (type(err).__name__, str(err))


def given_part(items: Sequence[Item], digest: Digest) -> tuple[list[Item], list[Item]]:
    """What a compile reads with ``digest``: the rounds read again, then the tail."""
    reread = [i for i in items if i.seq < digest.upto and within(i.seq, digest.needed)]
    return reread, [i for i in items if i.seq >= digest.upto]


def tail_outcome(case: Case, digest: Digest, ids: Ids) -> Any:
    """The compile given only what ``digest`` leaves to read, as the service runs it."""
    reread, tail = given_part(case.snapshot.items, digest)
    asked = candidates(tail, case.target.profile.output, digest)
    told = earlier(asked, set(ids.calls & asked), set(ids.taken & asked), reread)
    snapshot = replace(case.snapshot, items=(*reread, *tail), elided=digest.elided(told))
    try:
        return outcome(snapshot, case.spec, case.target)
    except NeedsHistory:
        return NeedsHistory


def digest_of(case: Case, keep: int) -> tuple[Digest, Ids] | None:
    spec = parse_spec(case.spec)
    snapshot = replace(case.snapshot, target=case.target.profile.output)
    return extend(None, case.snapshot.items, build_base(spec), snapshot, keep)


@SETTINGS
@given(case=cases(limited=True), keep=st.integers(0, 400), more=st.integers(0, 400))
def test_a_compile_given_the_tail_and_a_digest_answers_as_one_given_everything(
    case: Case, keep: int, more: int
) -> None:
    made = digest_of(case, keep)
    if made is None:
        SEEN["no digest"] += 1
        return
    digest, ids = made
    full = outcome(case.snapshot, case.spec, case.target)
    tailed = tail_outcome(case, digest, ids)
    SEEN["needs history" if tailed is NeedsHistory else "tail"] += 1
    if tailed is not NeedsHistory:
        assert tailed == full
    # Moved forward from what a compile with it reads, it still answers the same.
    reread, tail = given_part(case.snapshot.items, digest)
    snapshot = replace(case.snapshot, target=case.target.profile.output)
    asked = candidates(tail, case.target.profile.output, digest)
    told = earlier(asked, set(ids.calls & asked), set(ids.taken & asked), reread)
    spec = parse_spec(case.spec)
    moved = extend(digest, [*reread, *tail], build_base(spec), snapshot, more, told)
    if moved is None:
        return
    later, later_ids = moved
    assert later.upto > digest.upto
    all_ids = Ids(ids.calls | later_ids.calls, ids.taken | later_ids.taken)
    again = tail_outcome(case, later, all_ids)
    SEEN["moved"] += 1
    if again is not NeedsHistory:
        assert again == full


def test_the_generated_cases_exercise_the_tail() -> None:
    """Not vacuous: run after the property (same module, file order), most digests were used."""
    if not SEEN:
        return  # run alone
    assert SEEN["tail"] > 10, SEEN
    assert SEEN["moved"] > 0, SEEN


def _case(history: Sequence[Any], spec: dict[str, Any], window: int, output: str) -> Case:
    profile = PROFILES["gpt-4o" if output == "openai" else "anthropic"]
    encoder = COUNTER.encoder(profile.encoding)
    stored = tuple(
        Item(n + 1, "messages", m, count_message(m, encoder)) for n, m in enumerate(history)
    )
    snapshot = Snapshot(
        items=stored, tenant="acme", now=NOW, count=lambda m: count_message(m, encoder)
    )
    return Case(profile.name, snapshot, Target(profile, window), "current_tool_trace", spec)


def big(call_id: str) -> Message:
    return tool(call_id, "line of output\n" * 60)


def test_a_task_round_with_tool_payloads_is_compacted_as_in_the_whole_history() -> None:
    """The opening task answers a tool call; a newer call of the same tool, in the older part
    not read again, makes tool_compaction compact it in a whole-history compile: a compile
    given the tail cannot know, and reads the whole history."""
    task = Message(
        role="user",
        content=(
            ToolResultPart(call_id="t0", content="x" * 400),
            TextPart(text="now fix the build"),
        ),
    )
    history = [assistant("", "t0"), task]
    for n in range(1, 40):
        history += [assistant("", f"c{n}"), big(f"c{n}"), user(f"next {n}")]
    # The same command again, early in the part not read again.
    again = ToolCallPart(id="g1", name="run", arguments={"cmd": "t0"})
    history[5:5] = [Message(role="assistant", content=(again,)), big("g1")]
    compaction = {"name": "tool_compaction", "params": {"toolIdentifierFields": {"run": ["cmd"]}}}
    spec = {"decorators": [compaction, {"name": "token_limit", "params": {"reserve": 0}}]}
    case = _case(history, spec, 1_500, "openai")
    made = digest_of(case, 2_500)
    assert made is not None
    digest, ids = made
    assert within(1, digest.needed) and within(2, digest.needed)
    full = outcome(case.snapshot, spec, case.target)
    tailed = tail_outcome(case, digest, ids)
    assert full.steps[0].touched[0].seq == 2  # the task's own result, compacted
    assert tailed is NeedsHistory


def test_redact_warns_of_the_secrets_sent_as_in_the_whole_history() -> None:
    """A secret in a round token_limit drops, in the part a tail compile is not given: the
    whole-history compile counted it in its redact warning, the tail compile could not. Both
    count the secrets of what they send: here the one in the opening task alone."""
    key = "sk-proj-" + "a1" * 20
    history = [user(f"please fix the build; my key is {key}"), user(f"the old key was {key}")]
    for n in range(1, 40):
        history += [assistant("", f"c{n}"), big(f"c{n}"), user(f"next {n}")]
    spec = {"decorators": ["redact", {"name": "token_limit", "params": {"reserve": 0}}]}
    case = _case(history, spec, 1_500, "openai")
    made = digest_of(case, 2_500)
    assert made is not None
    digest, ids = made
    assert not within(2, digest.needed) and digest.upto > 2
    full = outcome(case.snapshot, spec, case.target)
    tailed = tail_outcome(case, digest, ids)
    assert tailed == full
    assert 2 not in full.seqs and 1 in full.seqs
    assert "redact: 1 replacements (api_key: 1)" in full.warnings


_IDS = st.lists(st.sampled_from(["c1", "c1__2", "c1__3", "c2", "c 2", "call", "", "x__9"]))


@given(
    chunks=st.lists(_IDS, max_size=5),
    suffixes=st.dictionaries(st.sampled_from(["c1", "c2", "c_2", "x"]), st.integers(1, 4)),
    target=st.sampled_from(["openai", "anthropic", "responses", "gemini"]),
)
def test_candidates_grown_a_read_at_a_time_are_those_of_all_the_ids(
    chunks: list[list[str]], suffixes: dict[str, int], target: Any
) -> None:
    none: frozenset[str] = frozenset()
    digest = Digest(1, 0, (), (), (), 0, (), (), none, None, None, suffixes)
    grown = Candidates()
    for chunk in chunks:
        grown = grown.more(chunk, target, digest)
    every = [cid for chunk in chunks for cid in chunk]
    assert (
        grown.asked == candidate_ids(every, target, digest) == _all_at_once(every, target, digest)
    )


def _all_at_once(ids: list[str], target: Any, digest: Digest) -> frozenset[str]:
    """What a rename may take, of all the ids at once: the ids, their bases, and each base's
    ``__<n>`` from 2 to past the older part's highest by its uses."""
    uses = Counter(fresh_base(cid, target) for cid in ids)
    renames = {
        f"{base}__{n}"
        for base, count in uses.items()
        for n in range(2, digest.suffixes.get(base, 1) + count + 1)
    }
    return frozenset({*ids, *uses, *renames})
