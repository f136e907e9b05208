"""A ledger's entries: typed statements taken from a history, with pointers to where they were said.

A statement is a line of a message's text (a sentence of a line longer than ``LINE_CHARS``), the
first line of a failed tool result, or a tool call. Its kind comes from an uppercase label before
a colon (``RULE:``, ``HARD CONSTRAINT:``, ``TODO:``, ``FACT:``, ...; a known label is left out of
the entry's text, its section says it) or else from its cues: errors; modal words (never, must,
do not; only and always when they lead) make a rule; current task, next step, goal, open question
a goal; prefer, wants, would rather a preference; I'll, let's, decided a decision; a value
(money, a date, a code, an identifier, a URL, a path, a name) a fact; the rest is a note, ranked
last. Acknowledgements ("Noted.", "Done.") are no entries.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace

from app.domain.messages import (
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    result_text,
)
from app.domain.summaries.narration import is_narration
from app.domain.summaries.subjects import (
    is_reference,
    is_value,
    low_information,
    names_in,
    slot_of,
    subject_of,
    words,
)
from app.domain.summaries.work_slots import work_slot

WorkEntries = Callable[[Part, tuple[int, ...]], Iterable["Entry"]]
KINDS = ("rule", "goal", "fact", "preference", "file", "error", "decision", "note")
TITLES = {
    "rule": "Rules",
    "goal": "Goals",
    "fact": "Facts",
    "preference": "Preferences",
    "error": "Errors",
    "decision": "Decisions",
    "file": "Tool calls and files",
    "note": "Notes",
}
RANK = {kind: n for n, kind in enumerate(KINDS)}
LINE_CHARS = 240
ARGUMENT_CHARS = 60
LABELS = {
    "rule": "RULE RULES SAFETY CONSTRAINT CONSTRAINTS POLICY REQUIREMENT MUST IMPORTANT WARNING",
    "goal": "GOAL GOALS TASK TODO NEXT STATE QUESTION PLAN OBJECTIVE OPEN BLOCKER",
    "fact": "FACT FACTS NOTE INFO VALUE CONFIG CONTEXT STATUS",
    "preference": "PREFERENCE PREFERENCES PREF STYLE",
    "error": "ERROR ERRORS BUG FAILURE EXCEPTION",
    "decision": "DECISION DECIDED DECISIONS",
}
LABEL_KIND = {word: kind for kind, line in LABELS.items() for word in line.split()}
_LABEL = re.compile(r"([A-Z][A-Z _-]{0,30}[A-Z]):\s")
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
RULES = (
    "never",
    "must",
    "do not",
    "don't",
    "may not",
    "not allowed",
    "forbidden",
    "at most",
    "no more than",
    "required",
    "mandatory",
)
GOALS = (
    "current task",
    "next step",
    "goal",
    "open question",
    "todo",
    "need to",
    "objective",
    "awaiting",
    "remaining",
)
PREFERENCES = ("prefer", "prefers", "preferred", "would rather", "wants", "i like")
DECISIONS = ("i'll", "i will", "we'll", "we will", "let's", "decided", "going to", "chose")
ERRORS = (
    "error",
    "errors",
    "exception",
    "traceback",
    "failed",
    "failure",
    "fatal",
    "panic",
    "denied",
    "refused",
    "timed out",
    "not found",
    "unable to",
)
NO_ERRORS = ("no error", "no errors", "0 errors", "no failures", "0 failed")


@dataclass(frozen=True)
class Entry:
    """One ledger entry: its kind, its text, the seqs it came from, what it is about (its
    subject and state slot), how specific it is (values and names it carries) and whether it
    was carried over from a previous summary (an incumbent, kept in preference to newcomers)."""

    kind: str
    text: str
    seqs: tuple[int, ...]
    subject: str
    slot: str | None
    values: int
    carried: bool = False

    def with_kind(self, kind: str) -> Entry:
        return replace(self, kind=kind)

    def with_seqs(self, seqs: tuple[int, ...]) -> Entry:
        return replace(self, seqs=seqs)

    def with_carried(self, carried: bool) -> Entry:
        return replace(self, carried=carried)


def make_entry(kind: str, text: str, seqs: tuple[int, ...]) -> Entry:
    """An entry of ``kind`` saying ``text``, what it is about computed from it."""
    tokens = text.split()
    values = sum(map(is_value, tokens)) + names_in(tokens)
    slot = (work_slot(text) if kind == "file" else None) or slot_of(text)
    return Entry(kind, text, seqs, subject_of(text), slot, values)


def statement_entry(text: str, seqs: tuple[int, ...]) -> Entry | None:
    """The entry a statement makes (kind from its label or cues), or None for an
    acknowledgement."""
    text = " ".join(text.split())[:LINE_CHARS]
    kind: str | None = None
    label = _LABEL.match(text)
    if label is not None:
        kind = next(
            (LABEL_KIND[w] for w in label[1].replace("-", " ").split() if w in LABEL_KIND), None
        )
        if kind is not None:
            text = text[label.end() :].strip()
    if not text or low_information(text):
        return None
    entry = make_entry(kind or "note", text, seqs)
    return entry if kind is not None else entry.with_kind(classify(text, entry.values > 0))


def classify(text: str, valued: bool) -> str:
    """The kind of an unlabelled statement, by its cues (``valued``: it carries values)."""
    kind = _cued(text)
    if kind in (None, "decision", "fact") and is_narration(text):
        return "note"
    if kind is not None:
        return kind
    if (valued and not is_narration(text)) or slot_of(text) is not None:
        return "fact"
    return "file" if any(map(is_reference, text.split())) else "note"


def _cued(text: str) -> str | None:
    padded = f" {' '.join(words(text.replace(chr(8217), chr(39))))} "
    lower = f" {text.lower()} "
    first = next(iter(words(text)), "")

    def says(cues: Sequence[str]) -> bool:
        return any(f" {cue} " in padded or f" {cue} " in lower for cue in cues)

    if (says(ERRORS) and not says(NO_ERRORS)) or any(w.endswith("error") for w in text.split()):
        return "error"
    if says(RULES) or first in ("only", "always"):
        return "rule"
    if says(GOALS):
        return "goal"
    if says(PREFERENCES):
        return "preference"
    if says(DECISIONS):
        return "decision"
    return None


def message_entries(
    message: Message, seq: int | None, work: WorkEntries | None = None
) -> Iterator[Entry]:
    """The entries one message gives, in order (its tool calls and results by ``work`` when
    given: ``work.Work.entries``)."""
    seqs = () if seq is None else (seq,)
    for part in message.content:
        if work is not None and isinstance(part, ToolCallPart | ToolResultPart):
            yield from work(part, seqs)
        elif isinstance(part, TextPart):
            for statement in statements(part.text):
                entry = statement_entry(statement, seqs)
                if entry is not None:
                    yield entry
        elif isinstance(part, ToolCallPart):
            yield make_entry("file", tool_call_line(part), seqs)
        elif isinstance(part, ToolResultPart) and part.is_error:
            first = next(iter(result_text(part).strip().splitlines()), "")
            yield make_entry("error", f"{part.call_id}: {first}"[:LINE_CHARS], seqs)


def statements(text: str) -> Iterator[str]:
    """The lines of ``text``; a line longer than ``LINE_CHARS`` in its sentences."""
    for line in text.splitlines():
        line = line.strip().lstrip("-*• ").strip()
        if len(line) <= LINE_CHARS:
            if line:
                yield line
            continue
        yield from (s for s in _SENTENCE.split(line) if s.strip())


def tool_call_line(call: ToolCallPart) -> str:
    """A tool call in one line: its name and its arguments, each clipped."""
    arguments = call.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return f"{call.name}({arguments[:ARGUMENT_CHARS]})"
    if not isinstance(arguments, dict):
        return f"{call.name}({json.dumps(arguments)[:ARGUMENT_CHARS]})"
    shown = ", ".join(f"{k}={_short(v)}" for k, v in list(arguments.items())[:4])
    return f"{call.name}({shown})"[:LINE_CHARS]


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return " ".join(text.split())[:ARGUMENT_CHARS]
