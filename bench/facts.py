"""Conversation facts: what a chat-style history keeps of the facts its speakers state, compacted
by the default ledger summary against plain tail truncation, at a share of its tokens.

`python -m bench.facts` (`--quick`, or `CTXC_BENCH_QUICK=1`: 3 conversations; `--phrasing dev`).

Ten generated conversations of the LoCoMo kind (bench/facts_data.py: two speakers, 24 dated
sessions, facts amid small talk, some updated later, questions whose gold answer is verbatim in
the transcript), each as a history of one message per turn (one speaker the user, the other the
assistant). At a budget of 10% and 25% of the history's tokens (o200k_base):

- ledger: the history compacted as ``POST /compact`` with kind ``full`` (bench/kit_ctxc.py's
  policy: no recent rounds nor the opening task kept, so the budget goes to the summary) by the
  service's summariser (the settings' default, the ledger) asked for the budget less what stays
  (the current prompt); the summary message and what stays are the context;
- tail: the newest messages that fit the budget, walking back and stopping at the first that
  does not (``token_limit``'s walk, without the opening task it keeps).

Printed: the share of gold answers present in each context (whole words, any case) and the
ratio; the context's tokens never exceed the budget (checked).
"""

from __future__ import annotations

import argparse
import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

from app.adapters.summarizers import Summarizer, summarizer_from_settings
from app.adapters.tokenizers import load_counter
from app.domain.compaction.planning import plan_full
from app.domain.compilers.base import Item
from app.domain.messages import DEFAULT_SECTION, Message, TextPart
from app.domain.tokens import Encoder, count_message
from app.services.compaction.summarising import summary_message, within_budget
from app.settings import Settings
from bench.common import quick_run, verdict
from bench.facts_data import Conversation, conversation
from bench.kit_ctxc import ENCODING, POLICY

BUDGETS = (0.10, 0.25)
SEEDS = range(1, 11)
QUICK_SEEDS = range(1, 4)
TARGET = 2.0  # the ledger's share at 10% against tail truncation's


@dataclass(frozen=True)
class Held:
    """One context's figures: gold answers present of those asked, and its tokens."""

    present: int
    asked: int
    tokens: int


def history(convo: Conversation, encoder: Encoder) -> list[Item]:
    """The conversation as stored items: a message per turn, the first speaker the user."""
    items = []
    for n, turn in enumerate(convo.turns):
        role = "user" if turn.speaker == convo.speakers[0] else "assistant"
        message = Message(role=role, content=(TextPart(text=turn.line),))
        items.append(Item(n + 1, DEFAULT_SECTION, message, count_message(message, encoder)))
    return items


def held(convo: Conversation, context: Sequence[Message], tokens: int) -> Held:
    """How many gold answers ``context`` holds, as whole words in any case."""
    text = "\n".join(m.text for m in context)
    present = sum(
        re.search(rf"\b{re.escape(q.answer)}\b", text, re.IGNORECASE) is not None
        for q in convo.questions
    )
    return Held(present, len(convo.questions), tokens)


def tail(items: Sequence[Item], budget: int) -> list[Message]:
    """The newest messages that fit ``budget``, stopping at the first that does not."""
    kept: list[Message] = []
    for item in reversed(items):
        if item.tokens > budget:
            break
        budget -= item.tokens
        kept.append(item.message)
    return kept[::-1]


async def ledger(
    items: Sequence[Item], budget: int, summarizer: Summarizer, encoder: Encoder
) -> list[Message]:
    """The history compacted in full into a summary within what ``budget`` leaves."""
    plan = plan_full(items, POLICY)
    if plan is None:
        return [i.message for i in items]
    room = budget - sum(i.tokens for i in plan.left)
    plan = replace(plan, summary_tokens=max(64, room))
    summary = await within_budget(summarizer, plan, encoder)
    first = plan.taken[0].seq
    kept = [i.message for i in plan.left if i.seq < first]
    return [*kept, summary_message(summary.text), *(i.message for i in plan.left if i.seq > first)]


async def measure(
    seeds: Sequence[int], budgets: Sequence[float] = BUDGETS, phrasing: str = "held"
) -> dict[float, tuple[Held, Held]]:
    """Per budget, the ledger's and tail truncation's figures summed over ``seeds``."""
    counter = load_counter()
    encoder = counter.encoder(ENCODING)
    summarizer = summarizer_from_settings(Settings(), counter)
    out: dict[float, tuple[Held, Held]] = {}
    for share in budgets:
        sums = [Held(0, 0, 0), Held(0, 0, 0)]
        for seed in seeds:
            convo = conversation(seed, phrasing=phrasing)
            items = history(convo, encoder)
            budget = int(sum(i.tokens for i in items) * share)
            for n, context in enumerate(
                (await ledger(items, budget, summarizer, encoder), tail(items, budget))
            ):
                tokens = sum(count_message(m, encoder) for m in context)
                if tokens > budget:
                    raise AssertionError(f"seed {seed}: {tokens} tokens over {budget}")
                got = held(convo, context, tokens)
                sums[n] = Held(sums[n].present + got.present, sums[n].asked + got.asked, 0)
        out[share] = (sums[0], sums[1])
    return out


def share(h: Held) -> float:
    return h.present / max(1, h.asked)


def run(quick: bool | None = None, phrasing: str = "held") -> None:
    """Print the gold answers each context keeps, per budget."""
    seeds = QUICK_SEEDS if quick_run(quick) else SEEDS
    figures = asyncio.run(measure(seeds, BUDGETS, phrasing))
    asked = next(iter(figures.values()))[0].asked
    print(
        f"bench.facts: {len(seeds)} generated conversations ({phrasing} phrasings), {asked} "
        "questions, gold answers present in the context (ledger summary / tail truncation)"
    )
    for budget, (led, cut) in figures.items():
        ratio = share(led) / share(cut) if cut.present else float("inf")
        target = f" (target {TARGET:.0f}x: {verdict(ratio >= TARGET)})" if budget == 0.10 else ""
        print(
            f"  budget {budget:4.0%}: ledger {share(led):6.1%}  tail {share(cut):6.1%}"
            f"  ratio {ratio:4.2f}x{target}"
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", default=None)
    parser.add_argument("--phrasing", choices=("held", "dev"), default="held")
    args = parser.parse_args()
    run(args.quick, args.phrasing)
