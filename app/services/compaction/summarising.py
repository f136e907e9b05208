"""What a compaction asks of its summariser and writes: the summary message, opening with the
constraints it carries verbatim and checked (app/domain/summaries/constraints.py), within the
policy's budget, and where the summarised messages stand in their session (``Source``)."""

from __future__ import annotations

from dataclasses import replace

from sqlalchemy.ext.asyncio import AsyncEngine

from app.adapters.summarizers import Summarizer, Summary
from app.adapters.summarizers.base import Source
from app.domain.compaction.planning import Plan
from app.domain.messages import Message, TextPart
from app.domain.summaries import constraints as marks
from app.domain.summaries.budget import cut_to_budget
from app.domain.tokens import Encoder, count_message
from app.services.compaction import leases
from app.services.compaction.refusals import ConstraintLost
from app.services.tenancy import cpu

SUMMARY_HEADER = "[Summary of the earlier conversation]\n"
CARRIED_KEY = "carried_constraints"  # a summary message's metadata: the checksums it carries


def summary_message(text: str) -> Message:
    """The summary as the message a compaction stores (without its metadata)."""
    return Message(role="user", content=(TextPart(text=SUMMARY_HEADER + text),))


def source_of(plan: Plan, target: str | None = None) -> Source:
    """Where ``plan``'s taken messages stand: their seqs, the system messages left ahead of
    them (the conversation's system prompt, never summarised), every message left ahead and
    every message kept after them."""
    first = plan.taken[0].seq if plan.taken else 0
    lead = tuple(i.message for i in plan.left if i.seq < first)
    rest = tuple(i.message for i in plan.left if i.seq > first)
    system = tuple(m for m in lead if m.role == "system")
    return Source(tuple(i.seq for i in plan.taken), system, target, lead=lead, rest=rest)


async def within_budget(
    summarizer: Summarizer, plan: Plan, encoder: Encoder, target: str | None = None
) -> Summary:
    """The summary of ``plan`` as a message of at most ``plan.summary_tokens`` tokens, opening
    with the constraints it took (marked messages and earlier summaries' blocks) verbatim: the
    summariser is asked for the budget less the header's and the block's tokens, and whatever
    it wrote is cut to fit (never the block). ``ConstraintLost`` when the block does not fit or
    a constraint would not be carried as it was. ``target``: the shape the session's prompts are
    sent in."""
    taken = [i.message for i in plan.taken]
    try:
        constraints = marks.gather(taken, SUMMARY_HEADER)
    except marks.Lost as err:
        raise ConstraintLost(f"refused: {err}", err.checksums) from None
    opening = marks.block(constraints)

    def count(text: str) -> int:
        return count_message(summary_message(opening + text), encoder)

    fixed = count("")
    if constraints and fixed >= plan.summary_tokens:
        named = [c.checksum for c in constraints]
        raise ConstraintLost(
            f"refused: the constraints {', '.join(named)} ({fixed} tokens with the summary "
            f"header) do not fit the summary budget of {plan.summary_tokens} tokens",
            named,
        )
    asked = max(1, plan.summary_tokens - fixed)
    source = replace(source_of(plan, target), carried=len(constraints))
    summary = await summarizer.summarize(taken, plan.reason, asked, source)
    cut = await cpu.run_sync(cut_to_budget, summary.text, plan.summary_tokens, count)
    text = opening + (summary.text if cut is None else cut)
    lost = marks.missing(text, constraints) if constraints else []
    if lost:
        raise ConstraintLost(f"refused: the summary lost constraint {', '.join(lost)}", lost)
    checksums = tuple(c.checksum for c in constraints)
    return replace(summary, text=text, cut=summary.cut or cut is not None, constraints=checksums)


def written_by(summary: Summary) -> str:
    """The backend that wrote the summary with its model and profile (``default`` unsaid), why
    it fell back when it did, and whether it was cut to its budget."""
    cut = " (cut to its budget)" if summary.cut else ""
    model = f" {summary.model}" if summary.model else ""
    profile = f" [profile {summary.profile}]" if summary.profile else ""
    if summary.fallback_reason is None:
        return (summary.backend + model + profile + cut)[:128]
    return f"{summary.backend}{model}{profile}{cut} (fallback: {summary.fallback_reason})"[:128]


async def summarized_under(
    engine: AsyncEngine,
    lease: leases.Lease,
    summarizer: Summarizer,
    plan: Plan,
    encoder: Encoder,
    target: str | None = None,
) -> Summary:
    """``within_budget``, holding ``lease`` (renewed while the summariser works); a
    ``ConstraintLost`` is raised as it is, not wrapped by the lease's task group."""
    async with leases.kept(engine, lease):
        try:
            summary = await within_budget(summarizer, plan, encoder, target)
        except ConstraintLost as err:
            refused: ConstraintLost | None = err
        else:
            refused = None
    if refused is not None:
        raise refused
    return summary
