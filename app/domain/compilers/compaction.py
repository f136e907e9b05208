"""Compaction decorators: ``tool_compaction`` (seeds/002) and ``compact_tool_results`` (seeds/003).

Both are transforms: they rewrite the view, never the stored history, and so come before
``token_limit``. Neither touches the view's newest API round (the turn being answered). A
message is rewritten only when that makes it smaller in the target's tokens (a placeholder or the
``_tool_compaction`` metadata can outweigh a field just over the threshold). Each reports the
tokens it saved, the tool calls and stored seqs it touched, and the originals it took out, which
the service keeps retrievable by sha256.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated
from urllib.parse import quote

from pydantic import Field

from app.domain.compaction.payloads import (
    Compaction,
    PayloadRules,
    compact_tool_payloads,
    dedupe_results,
)
from app.domain.compaction.previews import PreviewRules, preview_oversized
from app.domain.compilers.base import (
    Compiled,
    Compiler,
    Item,
    Snapshot,
    StepReport,
    Touched,
    kept_always,
)
from app.domain.errors import InvalidInput
from app.domain.messages import Message, TextPart

Step = Callable[[Sequence[Message], frozenset[int]], Compaction]


def _left_whole(snapshot: Snapshot, items: Sequence[Item]) -> frozenset[int]:
    """Indexes of the items no step rewrites: the view's newest API round (the turn being
    answered) and the rounds trimming always keeps (pinned, summary, injected), which may
    outlive the newer occurrences a rewrite would point to."""
    rounds = snapshot.rounds(items)
    whole = [r for n, r in enumerate(rounds) if n == len(rounds) - 1 or kept_always(r)]
    ids = {id(item) for round_ in whole for item in round_}
    return frozenset(n for n, item in enumerate(items) if id(item) in ids)


def _applied(snapshot: Snapshot, compiled: Compiled, name: str, step: Step) -> Compiled:
    """``compiled`` with ``step`` applied where it saves tokens, and its report."""
    items = list(compiled.items)
    done = step([i.message for i in items], _left_whole(snapshot, items))
    touched = []
    for n, lost in sorted(done.omitted.items()):
        before = items[n]
        after = snapshot.refit(before, done.messages[n])
        if after.tokens < before.tokens:
            items[n] = after
            touched.append(Touched(before.seq, before.tokens - after.tokens, lost))
    return compiled.then(items, steps=[StepReport(name, tuple(touched))])


# The parameter names are the source's (seeds/002), camelCase included.
def tool_compaction(
    inner: Compiler,
    inputTrimBytes: Annotated[int, Field(ge=0)] = 100,
    outputTrimBytes: Annotated[int, Field(ge=0)] = 100,
    excludedTools: Sequence[str] = (),
    toolIdentifierFields: Mapping[str, Sequence[str]] | None = None,
    dedupeIdenticalResults: bool = False,
) -> Compiler:
    """Compact older tool payloads as seeds/002 describes, with the source's parameter names and
    defaults; with ``dedupeIdenticalResults``, then replace older results identical to a newer
    one by a reference to it (reported as the step ``dedupe_identical_results``)."""
    rules = PayloadRules(
        inputTrimBytes, outputTrimBytes, frozenset(excludedTools),
        {tool: tuple(names) for tool, names in (toolIdentifierFields or {}).items()},
    )  # fmt: skip

    def compile_tool_compaction(snapshot: Snapshot) -> Compiled:
        compiled = _applied(snapshot, inner(snapshot), "tool_compaction",
                            lambda ms, keep: compact_tool_payloads(ms, rules, keep))  # fmt: skip
        if not dedupeIdenticalResults:
            return compiled
        return _applied(snapshot, compiled, "dedupe_identical_results",
                        lambda ms, keep: dedupe_results(ms, rules, keep))  # fmt: skip

    return compile_tool_compaction


def _pointer(session_id: str | None, items: Sequence[Item]) -> Callable[[int, str, int, int], str]:
    """The line between a preview's head and tail; for a session, the request that returns the
    whole result (its message's seq picks the turn where call ids repeat)."""

    def pointer(index: int, call_id: str, tokens: int, left: int) -> str:
        if session_id is None or not items[index].seq:
            where = "it is in the posted history"
        else:
            where = (
                f"GET /v1/sessions/{quote(session_id, safe='')}/tool-calls/"
                f"{quote(call_id, safe='')}?seq={items[index].seq}"
            )
        return (
            f"ctxc: {left:,} characters of this {tokens:,}-token tool result (call {call_id}) "
            f"are omitted here; the whole text: {where}"
        )

    return pointer


def compact_tool_results(
    inner: Compiler,
    max_tokens: Annotated[int, Field(ge=1)] = 2_000,
    head_tokens: Annotated[int, Field(ge=0)] = 500,
    tail_tokens: Annotated[int, Field(ge=0)] = 500,
) -> Compiler:
    """Replace each tool result over ``max_tokens`` by its first ``head_tokens`` and last
    ``tail_tokens`` tokens and a line saying where the whole text is (seeds/003)."""
    if head_tokens + tail_tokens >= max_tokens:
        where = ("head_tokens",)
        raise InvalidInput([(where, "head_tokens + tail_tokens must be less than max_tokens")])
    rules = PreviewRules(max_tokens, head_tokens, tail_tokens)

    def compile_compact_tool_results(snapshot: Snapshot) -> Compiled:
        compiled = inner(snapshot)
        items = compiled.items

        def count(n: int) -> Callable[[str], int]:
            # A message holding only the result: its count is the result's (plus a few tokens
            # of overhead), with no second tokenisation of a large text.
            if len(items[n].message.content) == 1:
                return lambda _: items[n].tokens
            return lambda text: snapshot.count(Message(role="user", content=(TextPart(text=text),)))

        pointer = _pointer(snapshot.session_id, items)

        def step(messages: Sequence[Message], keep: frozenset[int]) -> Compaction:
            return preview_oversized(messages, rules, count, pointer, keep)

        return _applied(snapshot, compiled, "compact_tool_results", step)

    return compile_compact_tool_results
