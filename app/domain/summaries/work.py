"""A coding agent's work as ledger entries: the files it read, wrote or edited, the commands it
ran and their outcome, and the errors still open. Whatever summariser writes the prose, these
lines come from the tool calls themselves (deterministic, one pass).

A tool call is read by its arguments, across agent shapes: a file when it names one (``path``,
``file_path``, ``file``, ``filename``, ``file_name``, ``absolute_path``, ``notebook_path``; or
``apply_patch``'s ``*** Update File:`` lines), a command when it runs one (``command``, ``cmd``:
Claude Code ``Bash``, OpenHands ``execute_bash``, Codex ``exec_command``/``shell``, Gemini CLI
``run_shell_command``); OpenHands' ``str_replace_editor`` names its action in ``command``. Lines::

    src/app.py: str_replace -> ok [str_replace_editor]
    $ make test -> exit 2: error: undefined symbol foo [Bash]
    Grep(pattern=TODO) -> ok [Grep]

Each has a slot (``file:<path>``, ``command:<text>``, ``call:<line>``): a later call on the same
file or the same command replaces the earlier entry, so a summary shows a file's latest action
(and every tool used on it) and a command's latest outcome, never an older one. A failed result
(``is_error``, or a non-zero exit code) is an error entry only while its call is the latest of
its slot: a command that failed and then passed leaves no open error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from app.domain.messages import Message, Part, ToolCallPart, ToolResultPart, result_text
from app.domain.summaries.entries import LINE_CHARS, Entry, make_entry

FILE_KEYS = ("file_path", "path", "absolute_path", "notebook_path", "filename", "file_name", "file")
COMMAND_KEYS = ("command", "cmd")
OTHER_KEYS = ("pattern", "query", "url", "name", "id", "description")
EDITOR_ACTIONS = frozenset(
    ["view", "create", "str_replace", "insert", "undo_edit", "write", "edit"]
)
PATCH_HEADS = ("*** Update File: ", "*** Add File: ", "*** Delete File: ")
COMMAND_CHARS = 120
OUTCOME_CHARS = 90
SLOT_PREFIXES = ("file:", "command:", "call:")


@dataclass(frozen=True)
class Call:
    """What one tool call did: its line's head, its slot, the files it touched."""

    head: str
    slot: str
    paths: tuple[str, ...] = ()
    action: str = ""


def arguments_of(call: ToolCallPart) -> dict[str, Any]:
    """A call's arguments as a dict (a JSON string parsed; anything else as ``input``)."""
    arguments = call.arguments
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return {"input": arguments}
    return arguments if isinstance(arguments, dict) else {"input": arguments}


def read_call(call: ToolCallPart) -> Call:
    """What ``call`` did, by its arguments."""
    args = arguments_of(call)
    paths = _paths(call.name, args)
    command = next((_text(args[k]) for k in COMMAND_KEYS if k in args), "")
    if paths:
        action = command if command in EDITOR_ACTIONS else call.name
        return Call(call.name, f"file:{paths[0]}", paths, action)
    if command:
        head = "$ " + _clip(" ".join(command.split()), COMMAND_CHARS)
        return Call(head, f"command:{head}")
    key = next((k for k in OTHER_KEYS if isinstance(args.get(k), str)), None)
    main = f"{key}={_clip(' '.join(str(args[key]).split()), 60)}" if key else ""
    head = f"{call.name}({main})"
    return Call(head, f"call:{head}")


def _paths(name: str, args: dict[str, Any]) -> tuple[str, ...]:
    found = [args[k].strip() for k in FILE_KEYS if isinstance(args.get(k), str) and args[k].strip()]
    patch = args.get("input") if "patch" in name.lower() else args.get("patch")
    if isinstance(patch, str):
        for line in patch.splitlines():
            found += [line[len(h) :].strip() for h in PATCH_HEADS if line.startswith(h)]
    return tuple(dict.fromkeys(p for p in found if len(p) <= LINE_CHARS))


def _text(value: Any) -> str:
    if isinstance(value, list):  # Codex shell: ["bash", "-lc", "make test"]
        words = [str(v) for v in value]
        return words[-1] if len(words) == 3 and words[1] == "-lc" else " ".join(words)
    return value if isinstance(value, str) else ""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def outcome(result: ToolResultPart) -> tuple[str, bool]:
    """A result's outcome (``ok``, ``exit N: first error line``, ``error: first line``) and
    whether it failed."""
    text = result_text(result)
    code = _exit_code(text)
    failed = result.is_error or bool(code and code != "0")
    if not failed:
        return ("ok" if code is None else f"exit {code}"), False
    lines = [" ".join(line.split()) for line in text.splitlines() if line.strip()]
    line = next((x for x in lines if _erring(x)), lines[0] if lines else "(no text)")
    head = f"exit {code}" if code else "error"
    return f"{head}: {_clip(line, OUTCOME_CHARS)}", True


def _erring(line: str) -> bool:
    lower = line.lower()
    return any(w in lower for w in ("error", "failed", "exception", "not found", "fatal"))


def _exit_code(text: str) -> str | None:
    """The exit code a result reports (``exit code 1``, ``Exit code: 1``, ``exited with code
    1``), the last one said; None when it says none."""
    lower = text[-400:].lower()
    at = max(lower.rfind("exit code"), lower.rfind("exited with code"))
    if at < 0:
        return None
    tail = lower[at:].split("code", 1)[1].lstrip(" :")
    digits = ""
    for c in tail:
        if not (c.isdigit() or (c == "-" and not digits)):
            break
        digits += c
    return (digits.lstrip("-") and digits) or None


@dataclass
class Work:
    """The work entries of one history: built by a first pass over its calls and results,
    given out message by message (``entries``) as the ledger gathers them in order."""

    calls: dict[str, Call] = field(default_factory=dict)
    results: dict[str, tuple[str, bool]] = field(default_factory=dict)
    latest: dict[str, str] = field(default_factory=dict)  # slot -> its latest call's id
    tools: dict[str, dict[str, None]] = field(default_factory=dict)  # path -> tools used

    @classmethod
    def of(cls, messages: Sequence[Message]) -> Work:
        work = cls()
        for part in (p for m in messages for p in m.content):
            if isinstance(part, ToolCallPart):
                call = read_call(part)
                work.calls[part.id] = call
                work.latest[call.slot] = part.id
            elif isinstance(part, ToolResultPart):
                work.results[part.call_id] = outcome(part)
        return work

    def entries(self, part: Part, seqs: tuple[int, ...]) -> Iterator[Entry]:
        """The entries ``part`` gives (called in history order)."""
        if isinstance(part, ToolCallPart):
            call = self.calls.get(part.id) or read_call(part)
            said, _ = self.results.get(part.id, ("no result in this part", False))
            for path in call.paths:
                used = self.tools.setdefault(path, {})
                used.pop(part.name, None)
                used[part.name] = None
                text = f"{path}: {call.action} -> {said} [{', '.join(used)}]"
                yield work_entry("file", text, seqs, f"file:{path}")
            if not call.paths:
                text = f"{call.head} -> {said} [{part.name}]"
                yield work_entry("file", text, seqs, call.slot)
        elif isinstance(part, ToolResultPart):
            said, failed = self.results.get(part.call_id, ("", False))
            made = self.calls.get(part.call_id)
            latest = made is None or self.latest.get(made.slot) == part.call_id
            if failed and latest:
                head = made.head if made is not None and not made.paths else None
                name = head or (made.paths[0] if made is not None else part.call_id)
                yield work_entry("error", f"{name}: {said}", seqs, f"error:{name}")


def work_entry(kind: str, text: str, seqs: tuple[int, ...], slot: str) -> Entry:
    """An entry of the work: no subject (only its slot replaces), clipped to a line."""
    entry = make_entry(kind, text[:LINE_CHARS], seqs)
    return Entry(entry.kind, entry.text, seqs, "", slot, entry.values)
