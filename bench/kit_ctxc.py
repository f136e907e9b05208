"""The adapter of bench/compaction_kit.py: a ctxc session's history compacted round after round by
the service's own code.

The summariser the settings choose (``summarizer_from_settings``, as the app builds it), a ``full``
plan of the history (``plan_full``), ``within_budget`` (the summariser asked for the budget and cut
to it) and the summary message (``summary_message``) in place of the last message taken, not kept
when it is no smaller than what it replaces (as ``apply_plan``). The policy keeps no recent rounds
nor the opening task, so the budget goes to the summary; what stays (the system prompt, the current
prompt) is part of the output and of its budget. The character budget less what stays is mapped to
``summary_tokens`` at the session transcript's own tokens per character.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from compaction_kit import Turn

from app.adapters.summarizers import Summarizer
from app.domain.compaction.planning import CompactionPolicy, plan_full
from app.domain.compilers.base import Item
from app.domain.messages import DEFAULT_SECTION, SUMMARY_SECTION, Message, TextPart
from app.domain.providers import PROFILES
from app.domain.tokens import TokenCounter, count_message
from app.services.compaction.summarising import summary_message, within_budget

NEW_ROUNDS = 3  # user and assistant turns added between two compactions
ENCODING = PROFILES["gpt-4o"].encoding
POLICY = CompactionPolicy(preserve_recent_api_rounds=0, keep_task=False)
FILLER = (
    "Running the unit tests again after the refactor of the loader.",
    "Looking at the flaky integration test in the queue consumer.",
    "Formatting the changed files and reading the lint output.",
    "Checking the logs of the last deploy for warnings.",
    "Reviewing the pull request comments on the parser change.",
)


def text_of(turns: Sequence[Turn]) -> str:
    """Turns as the kit renders a transcript."""
    return "\n".join(f"[{t.role}] {t.text}" for t in turns)


def new_turns(seed: int, round_num: int) -> list[Turn]:
    """The canary-free turns between compaction ``round_num - 1`` and ``round_num``."""
    turns = []
    for n in range(NEW_ROUNDS):
        line = FILLER[(seed + round_num + n) % len(FILLER)]
        turns += [Turn("user", f"{line} (turn {round_num}.{n})"), Turn("assistant", "Done.")]
    return turns


class CtxcChain:
    """One ctxc session's history, compacted by the service's summariser and fold."""

    def __init__(
        self, summarizer: Summarizer, counter: TokenCounter, budget_chars: int, per_char: float
    ) -> None:
        self.summarizer, self.encoder = summarizer, counter.encoder(ENCODING)
        self.budget_chars, self.per_char = budget_chars, per_char
        self.history: list[Item] = []

    def add(self, turns: Sequence[Turn]) -> None:
        seq = self.history[-1].seq + 1 if self.history else 1
        for n, turn in enumerate(turns):
            role = turn.role if turn.role in ("system", "user", "assistant") else "user"
            message = Message(role=role, content=(TextPart(text=turn.text),))
            item = Item(seq + n, DEFAULT_SECTION, message, count_message(message, self.encoder))
            self.history.append(item)

    def text(self, items: Sequence[Item] | None = None) -> str:
        return "\n".join(
            f"[{i.message.role}] " + "".join(getattr(p, "text", "") for p in i.message.content)
            for i in (self.history if items is None else items)
        )

    async def compact(self) -> str:
        """Compact the history as ``POST /compact`` with kind ``full`` does; the text left."""
        plan = plan_full(self.history, POLICY)
        if plan is None:
            return self.text()
        left = len(self.text(plan.left)) + 1 if plan.left else 0
        room = self.budget_chars - left - len("[user] ")
        plan = replace(plan, summary_tokens=max(64, int(room * self.per_char)))
        summary = await within_budget(self.summarizer, plan, self.encoder)
        seq = plan.taken[-1].seq
        message = summary_message(summary.text).model_copy(
            update={"metadata": {"summarized_seqs": [plan.taken[0].seq, seq]}}
        )
        tokens = count_message(message, self.encoder)
        if tokens < plan.tokens_taken:  # else the service writes nothing (NotCompacted)
            fold = [*plan.left, Item(seq, SUMMARY_SECTION, message, tokens)]
            self.history = sorted(fold, key=lambda i: i.seq)
        return self.text()
