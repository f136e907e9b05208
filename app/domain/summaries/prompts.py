"""What LLM summarisers are asked: instructions for the reason, and the history.

The instructions say what the summary is for, which depends on the reason, and the structure
it must have: the ledger's sections (``SECTIONS``, the titles the built-in ledger summariser
writes), one ``- `` line per entry with ``(#seq)`` pointers where known
(``domain.summaries.sections`` checks an answer has it). Constraints the service carries
verbatim ahead of the summary are not to be repeated. Two request shapes:

- ``build_prompt``: the instructions as the system prompt and the rendered transcript as one
  user turn; when a history is summarised in parts it also says which part this is. A
  transcript may hold earlier partial summaries (``[Summary of part k of n]``), to be merged.
- ``final_turn``: the conversation itself sent as it was (its cached prefix), and the
  instructions as the last user turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from app.domain.messages import Message
from app.domain.summaries import Reason
from app.domain.summaries.transcript import render_transcript

PURPOSES: dict[Reason, str] = {
    "session_compaction": (
        "The {shown} is the older part of an AI agent's conversation. Your summary "
        "replaces it at the start of the history; the newer messages stay as they are."
    ),
    "reactive_micro": (
        "The {shown} is the oldest few rounds of an AI agent's current turn (its model "
        "calls with their tool calls and results). Your summary replaces them while the agent "
        "keeps working; the current request and the latest rounds stay as they are. Be brief: "
        "keep only what the later steps need."
    ),
    "reactive_full": (
        "The AI agent's context window is nearly full. The {shown} is everything "
        "before its newest messages, and your summary replaces all of it. Keep what the agent "
        "needs to carry on with its task without the original messages."
    ),
}

SECTIONS = (
    "Goals:",
    "Constraints and rules:",
    "Decisions:",
    "Current values:",
    "Open tasks:",
    "Files and identifiers:",
    "Errors:",
)

KEEP = """\
Write at most {max_tokens} tokens: notes for the assistant that continues the work, not a \
reply to the user. Write these sections, each title on a line of its own, in this order, \
leaving out a section with nothing in it: {titles}. Under a title, one line per entry, each \
starting with "- " and ending with pointers to the messages it comes from, like "(#12)" or \
"(#12, #40)", where the transcript shows them. Put in:
- Goals: what the user wants done, in their own words where they are short.
- Constraints and rules: what must or must not be done, as the user said it.
- Decisions: what was decided and why.
- Current values: facts and settings as they now stand ("subject: value"); when a value \
changed, only the latest.
- Open tasks: what remains to do.
- Files and identifiers: every file path, URL and identifier (function, class, variable, \
command, call id, hash, issue number) exactly as written, with what it is.
- Errors: errors met and whether each was resolved.
Write nothing else: no heading, no preamble. Invent nothing. Entries that begin "[Summary of \
part" summarise earlier parts of the same history: merge them into one summary."""

CARRIED = """\
{count} constraints are carried verbatim ahead of your summary by the service: do not repeat \
them."""

SUMMARISE_ABOVE = """\
Summarise the conversation above, up to this message, for the assistant that continues it."""
SUMMARISE_FIRST = """\
Summarise the first {k} of the {n} messages above (the system prompt aside), for the assistant \
that continues the conversation. The last {kept} stay in its context as they are: do not \
summarise them, and leave out what only they say."""


@dataclass(frozen=True)
class Prompt:
    """A system prompt and one user turn."""

    system: str
    user: str


def instructions(
    reason: Reason,
    max_tokens: int,
    extra: str | None = None,
    carried: int = 0,
    shown: str = "transcript below",
) -> str:
    """The system prompt for ``reason``, with ``extra`` (a session's own instructions) after
    it; ``carried``: how many constraints the service carries ahead of the summary; ``shown``:
    where the history to summarise is."""
    keep = KEEP.format(max_tokens=max_tokens, titles=", ".join(SECTIONS))
    text = f"{PURPOSES[reason].format(shown=shown)}\n\n{keep}"
    if carried:
        text = f"{text}\n{CARRIED.format(count=carried)}"
    return text if not extra else f"{text}\n\nFurther instructions for this summary:\n{extra}"


def final_turn(
    reason: Reason,
    max_tokens: int,
    extra: str | None = None,
    carried: int = 0,
    upto: tuple[int, int] | None = None,
) -> str:
    """The last user turn of a request that sends the conversation as it was: the instructions,
    said of the messages above it rather than of a transcript. ``upto``: ``(k, n)`` when only the
    first ``k`` of the ``n`` messages above are to be summarised (the rest stay as they are)."""
    said = instructions(reason, max_tokens, extra, carried, "conversation above")
    if upto is None:
        return f"{SUMMARISE_ABOVE}\n\n{said}"
    k, n = upto
    return f"{SUMMARISE_FIRST.format(k=k, n=n, kept=n - k)}\n\n{said}"


def build_prompt(
    messages: Sequence[Message],
    reason: Reason,
    max_tokens: int,
    part: tuple[int, int] | None = None,
    extra: str | None = None,
    carried: int = 0,
) -> Prompt:
    """The prompt that asks for a summary of ``messages`` (part ``k`` of ``n`` when given)."""
    note = ""
    if part is not None:
        note = f"This is part {part[0]} of {part[1]} of the history; summarise this part.\n\n"
    user = f"{note}<transcript>\n{render_transcript(messages)}\n</transcript>"
    return Prompt(instructions(reason, max_tokens, extra, carried), user)
