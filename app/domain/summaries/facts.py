"""What an extractive summary keeps from a history, as lines of prose and a reference list.

- Goals and constraints: the head of each user message (``GOAL_CHARS``) and, from the rest of it,
  every sentence stating a constraint (must, never, only, at most, ...).
- Decisions: the sentences of assistant text stating a decision, plan or finding (I'll, let's,
  decided, instead, fixed, root cause, ...); an assistant text with none gives its first sentence.
- Errors: the first line of every tool result marked ``is_error`` and the error-looking lines
  (error, exception, traceback, failed, ..., ``SomethingError``) of tool results and user text,
  at most ``ERRORS_PER_TEXT`` per text.
- The ledger: one line per tool call, in order: name, key arguments, outcome, call id.
- References: every file path, URL and identifier (``references``), tool names and call ids.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from app.domain.messages import (
    ImagePart,
    Message,
    OpaquePart,
    Part,
    ReasoningPart,
    ResultItem,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    result_text,
)
from app.domain.summaries.references import References, find_references

GOAL_CHARS = 300
LINE_CHARS = 240
OUTCOME_CHARS = 100
ARGUMENT_CHARS = 60
ERRORS_PER_TEXT = 5
KEY_ARGUMENTS = (
    "path",
    "file_path",
    "file",
    "filename",
    "url",
    "command",
    "cmd",
    "query",
    "pattern",
    "name",
    "id",
)

_SENTENCE_BREAK = re.compile(r"(?<=[.!?])\s+|\n+")
_CONSTRAINT = re.compile(
    r"\b(must|never|always|don't|do not|should|shouldn't|only|without|avoid|required?|need to"
    r"|needs to|make sure|ensure|at most|at least|no more than|keep|prefer)\b",
    re.IGNORECASE,
)
_DECISION = re.compile(
    r"\b(i'll|i will|i'm going to|let's|we'll|we will|decided?|chose|choose|instead|switch"
    r"(?:ed|ing)?|plan|going to|fix|fixed|implemented|changed|added|removed|renamed|replaced"
    r"|root cause|the cause|turns out|conclusion|therefore)\b",
    re.IGNORECASE,
)
_ERROR = re.compile(
    r"\b(errors?|exception|traceback|failed|failures?|fatal|panic|denied|refused|timed out"
    r"|timeout|not found|no such file|cannot|can't|unable to|segmentation fault)\b",
    re.IGNORECASE,
)
_ERROR_NAME = re.compile(r"[A-Za-z](?:Error|Exception)\b")
_NO_ERRORS = re.compile(r"\b(?:0|no) (?:errors?|failed|failures?)\b", re.IGNORECASE)


@dataclass(frozen=True)
class Facts:
    """The lines of each prose section, in history order, and every reference."""

    goals: tuple[str, ...]
    decisions: tuple[str, ...]
    errors: tuple[str, ...]
    ledger: tuple[str, ...]
    references: References


def gather_facts(messages: Sequence[Message]) -> Facts:
    """The facts of ``messages`` that an extractive summary keeps."""
    tools = {call.id: call.name for m in messages for call in m.tool_calls}
    goals: list[str] = []
    decisions: list[str] = []
    errors: list[str] = []
    for message in messages:
        if message.role == "user":
            goals += _goals(message.text)
            errors += [f"user: {line}" for line in _error_lines(message.text)]
        elif message.role == "assistant":
            decisions += _decisions(message.text)
        for result in message.tool_results:
            errors += _result_errors(result, tools.get(result.call_id, "tool"))
    references = find_references(_texts(messages), _names(messages))
    return Facts(_unique(goals), _unique(decisions), _unique(errors), _ledger(messages), references)


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, an ellipsis marking the cut."""
    return text if len(text) <= limit else text[: max(limit - 1, 0)].rstrip() + "…"


def flatten(text: str) -> str:
    """``text`` on one line, runs of whitespace as one space."""
    return " ".join(text.split())


def _unique(lines: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(lines))


def _sentences(text: str) -> list[str]:
    return [s for s in (flatten(s) for s in _SENTENCE_BREAK.split(text)) if s]


def _goals(text: str) -> list[str]:
    flat = flatten(text)
    if not flat:
        return []
    head = clip(flat, GOAL_CHARS)
    if head == flat:
        return [head]
    later = [s for s in _sentences(text) if _CONSTRAINT.search(s) and s not in head]
    return [head, *(f"constraint: {clip(s, LINE_CHARS)}" for s in later)]


def _decisions(text: str) -> list[str]:
    sentences = _sentences(text)
    picked = [s for s in sentences if _DECISION.search(s)] or sentences[:1]
    return [clip(s, LINE_CHARS) for s in picked]


def _error_lines(text: str) -> list[str]:
    lines = (flatten(line) for line in text.splitlines())
    found = (line for line in lines if _is_error_line(line))
    return [clip(line, LINE_CHARS) for _, line in zip(range(ERRORS_PER_TEXT), found, strict=False)]


def _is_error_line(line: str) -> bool:
    return bool(_ERROR.search(_NO_ERRORS.sub("", line)) or _ERROR_NAME.search(line))


def _result_errors(result: ToolResultPart, tool: str) -> list[str]:
    text = result_text(result)
    lines = _error_lines(text)
    if result.is_error and not lines:
        lines = [clip(_first_line(text) or "(no text)", LINE_CHARS)]
    return [f"{tool} [{result.call_id}]: {line}" for line in lines]


def _first_line(text: str) -> str:
    return next((flatten(line) for line in text.splitlines() if line.strip()), "")


def _ledger(messages: Sequence[Message]) -> tuple[str, ...]:
    """One line per tool call (and per result whose call is not in ``messages``)."""
    heads: list[str] = []
    outcomes: list[str] = []
    open_calls: dict[str, int] = {}
    for part in (p for m in messages for p in m.content):
        if isinstance(part, ToolCallPart):
            open_calls[part.id] = len(heads)
            heads.append(f"{part.name}({_key_arguments(part.arguments)}) [{part.id}]")
            outcomes.append("no result in this part")
        elif isinstance(part, ToolResultPart):
            at = open_calls.pop(part.call_id, None)
            if at is not None:
                outcomes[at] = _outcome(part)
            else:
                heads.append(f"(call not in this part) [{part.call_id}]")
                outcomes.append(_outcome(part))
    return tuple(f"{head} -> {outcome}" for head, outcome in zip(heads, outcomes, strict=True))


def _key_arguments(arguments: dict[str, Any] | str) -> str:
    if isinstance(arguments, str):
        return clip(flatten(arguments), 2 * ARGUMENT_CHARS)
    keys = [k for k in KEY_ARGUMENTS if k in arguments]
    keys += [k for k in arguments if k not in KEY_ARGUMENTS]
    shown = [f"{k}={_argument(arguments[k])}" for k in keys[:3]]
    return ", ".join(shown + (["…"] if len(keys) > 3 else []))


def _argument(value: Any) -> str:
    if isinstance(value, str):
        return clip(flatten(value), ARGUMENT_CHARS)
    if isinstance(value, dict | list):
        return "{…}" if isinstance(value, dict) else "[…]"
    return json.dumps(value)


def _outcome(result: ToolResultPart) -> str:
    text = result_text(result)
    lines = [line for line in text.splitlines() if line.strip()]
    first = clip(flatten(lines[0]), OUTCOME_CHARS) if lines else "(no text)"
    extra = len(lines) - 1
    more = f" (+{extra} more line{'s' if extra > 1 else ''})" if extra > 0 else ""
    return f"{'error' if result.is_error else 'ok'}: {first}{more}"


def _names(messages: Sequence[Message]) -> Iterator[str]:
    for message in messages:
        for call in message.tool_calls:
            yield from (call.name, call.id)
        yield from (result.call_id for result in message.tool_results)


def _texts(messages: Sequence[Message]) -> Iterator[str]:
    """Every text a reference can hide in, model-visible content only (never metadata)."""
    for message in messages:
        if message.name:
            yield message.name
        for part in message.content:
            yield from _part_texts(part)


def _part_texts(part: Part | ResultItem) -> Iterator[str]:
    match part:
        case TextPart(text=text) | ReasoningPart(text=str() as text):
            yield text
        case ImagePart(url=str() as url):
            yield url
        case ToolCallPart(arguments=arguments) | OpaquePart(data=arguments):
            yield from _strings(arguments)
        case ToolResultPart(content=str() as content):
            yield content
        case ToolResultPart(content=tuple() as items):
            for item in items:
                yield from _part_texts(item)


def _strings(value: Any) -> Iterator[str]:
    """The keys and string values of a JSON value, depth first."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
