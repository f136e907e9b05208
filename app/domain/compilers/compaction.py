"""Compaction decorators: ``tool_compaction`` (seeds/002) and ``compact_tool_results`` (seeds/003).

Both are transforms: they rewrite the view, never the stored history, and so come before
``token_limit``. Neither touches the view's newest API round (the turn being answered), but for
its results over ``compact_tool_results``'s ``newest_max_tokens``. A
message is rewritten only when that makes it smaller in the target's tokens (a placeholder or the
``_tool_compaction`` metadata can outweigh a field just over the threshold). Each reports the
tokens it saved, the tool calls and stored seqs it touched, and the originals it took out, which
the service keeps retrievable by sha256.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Annotated

from pydantic import Field

from app.domain.compilers.base import (
    Compiled,
    Compiler,
    Item,
    NeedsHistory,
    Snapshot,
    StepReport,
    Touched,
    kept_always,
)
from app.domain.compilers.newest import (
    capped,
    pointer_line,
    previewed,
    recall_note,
    result_counter,
)
from app.domain.errors import InvalidInput
from app.domain.messages import Message
from app.domain.tool_payloads.compaction import (
    Compaction,
    PayloadRules,
    compact_tool_payloads,
    dedupe_results,
)
from app.domain.tool_payloads.previews import PreviewRules, preview_oversized

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
        inputTrimBytes,
        outputTrimBytes,
        frozenset(excludedTools),
        {tool: tuple(names) for tool, names in (toolIdentifierFields or {}).items()},
    )

    def compile_tool_compaction(snapshot: Snapshot) -> Compiled:
        compiled = inner(snapshot)
        _older_payloads(snapshot, compiled.items)
        note = recall_note(snapshot, compiled.items)
        compiled = _applied(
            snapshot,
            compiled,
            "tool_compaction",
            lambda ms, keep: compact_tool_payloads(ms, rules, keep, note),
        )
        if not dedupeIdenticalResults:
            return compiled
        note = recall_note(snapshot, compiled.items)
        return _applied(
            snapshot,
            compiled,
            "dedupe_identical_results",
            lambda ms, keep: dedupe_results(ms, rules, keep, note),
        )

    return compile_tool_compaction


def compact_tool_results(
    inner: Compiler,
    max_tokens: Annotated[int, Field(ge=1)] = 2_000,
    head_tokens: Annotated[int, Field(ge=0)] = 500,
    tail_tokens: Annotated[int, Field(ge=0)] = 500,
    newest_max_tokens: Annotated[int, Field(ge=1)] = 8_000,
) -> Compiler:
    """Replace each tool result over ``max_tokens`` by its first ``head_tokens`` and last
    ``tail_tokens`` tokens and a line saying where the whole text is (seeds/003). In the round
    being answered, a result over ``newest_max_tokens`` is previewed too, keeping up to 40% of
    that cap at each end."""
    if head_tokens + tail_tokens >= max_tokens:
        where = ("head_tokens",)
        raise InvalidInput([(where, "head_tokens + tail_tokens must be less than max_tokens")])
    if newest_max_tokens < max_tokens:
        where = ("newest_max_tokens",)
        raise InvalidInput([(where, "newest_max_tokens may not be less than max_tokens")])
    rules = PreviewRules(max_tokens, head_tokens, tail_tokens)

    def compile_compact_tool_results(snapshot: Snapshot) -> Compiled:
        compiled = inner(snapshot)
        items = compiled.items
        pointer = pointer_line(snapshot, items)

        def step(messages: Sequence[Message], keep: frozenset[int]) -> Compaction:
            return preview_oversized(
                messages, rules, result_counter(snapshot, items), pointer, keep
            )

        compiled = _applied(snapshot, compiled, "compact_tool_results", step)
        newest = _newest_round(snapshot, compiled.items)
        if not newest:
            return compiled
        out, touched = previewed(snapshot, compiled.items, newest, capped(newest_max_tokens))
        step_report = StepReport("compact_tool_results_newest", tuple(touched))
        return compiled.then(out, steps=[step_report] if touched else [])

    return compile_compact_tool_results


def _older_payloads(snapshot: Snapshot, items: Sequence[Item]) -> None:
    """Given only the tail of a history (``Snapshot.elided``), an older message read again
    that this step may rewrite (the opening task's round holding tool calls or results) would
    be rewritten for a newer payload of the part not given: ``NeedsHistory``."""
    elided = snapshot.elided
    if elided is None:
        return
    whole = _left_whole(snapshot, items)
    for n, item in enumerate(items):
        message = item.message
        if (
            n not in whole
            and item.seq < elided.upto
            and (message.tool_calls or message.tool_results)
        ):
            raise NeedsHistory()


def _newest_round(snapshot: Snapshot, items: Sequence[Item]) -> frozenset[int]:
    """Indexes of the view's newest API round, unless trimming always keeps it (pinned...)."""
    rounds = snapshot.rounds(items)
    if not rounds or kept_always(rounds[-1]):
        return frozenset()
    ids = {id(item) for item in rounds[-1]}
    return frozenset(n for n, item in enumerate(items) if id(item) in ids)
