"""What LLM summarisers are asked: instructions for the reason, then the transcript.

The instructions (the system prompt) say what the summary is for, which depends on the reason,
and what it must keep: goals and constraints, decisions, errors, every file path, URL and
identifier verbatim, and a ledger of tool calls. The user turn holds the rendered transcript;
when a history is summarised in parts it also says which part this is. A transcript may hold
earlier partial summaries (``[Summary of part k of n]``), which the model is told to merge.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.messages import Message
from app.domain.summaries import Reason
from app.domain.summaries.transcript import render_transcript

PURPOSES: dict[Reason, str] = {
    "session_compaction": (
        "The transcript below is the older part of an AI agent's conversation. Your summary "
        "replaces it at the start of the history; the newer messages stay as they are."
    ),
    "reactive_micro": (
        "The transcript below is the oldest few rounds of an AI agent's current turn (its model "
        "calls with their tool calls and results). Your summary replaces them while the agent "
        "keeps working; the current request and the latest rounds stay as they are. Be brief: "
        "keep only what the later steps need."
    ),
    "reactive_full": (
        "The AI agent's context window is nearly full. The transcript below is everything "
        "before its newest messages, and your summary replaces all of it. Keep what the agent "
        "needs to carry on with its task without the original messages."
    ),
}

KEEP = """\
Write plain text of at most {max_tokens} tokens: notes for the assistant that continues the \
work, not a reply to the user. Keep:
1. The user's goals and constraints, in their own words where they are short.
2. Decisions made and why, the state of the work, and what remains to do.
3. Errors met and whether each was resolved.
4. Every file path, URL and identifier (function, class, variable, command, call id, hash, \
issue number) exactly as written.
5. A ledger of the tool calls: tool, key arguments, outcome.
Invent nothing. Entries that begin "[Summary of part" summarise earlier parts of the same \
history: merge them into one summary."""


@dataclass(frozen=True)
class Prompt:
    """A system prompt and one user turn."""

    system: str
    user: str


def instructions(reason: Reason, max_tokens: int, extra: str | None = None) -> str:
    """The system prompt for ``reason``, with ``extra`` (a session's own instructions) after
    it."""
    text = f"{PURPOSES[reason]}\n\n{KEEP.format(max_tokens=max_tokens)}"
    return text if not extra else f"{text}\n\nFurther instructions for this summary:\n{extra}"


def build_prompt(
    messages: Sequence[Message],
    reason: Reason,
    max_tokens: int,
    part: tuple[int, int] | None = None,
    extra: str | None = None,
) -> Prompt:
    """The prompt that asks for a summary of ``messages`` (part ``k`` of ``n`` when given)."""
    note = ""
    if part is not None:
        note = f"This is part {part[0]} of {part[1]} of the history; summarise this part.\n\n"
    user = f"{note}<transcript>\n{render_transcript(messages)}\n</transcript>"
    return Prompt(instructions(reason, max_tokens, extra), user)
