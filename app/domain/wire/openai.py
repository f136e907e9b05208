"""OpenAI Chat Completions answers, whole or streamed as chunks, read into a Reply.

The reply is the first choice's message as a client resends it: ``role`` and ``content`` (a
string or null), ``tool_calls`` when there are any, and ``refusal``, ``audio``,
``function_call`` and ``annotations`` only when set (null or empty they are left out, as the
format parser leaves them out of a resent message). A streamed ``audio`` is not assembled (its
deltas carry base64 audio ctxc does not store).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from app.domain.formats._common import clone
from app.domain.wire.reply import Budget, Reply, WireError, count, expect, parse_json
from app.domain.wire.sse import Event

_USAGE: Final = {"prompt_tokens": "prompt_tokens", "completion_tokens": "completion_tokens"}
_SET_ONLY: Final = ("refusal", "audio", "function_call", "annotations")
DONE: Final = "[DONE]"


def openai_reply(body: Any) -> Reply:
    """The reply of a chat completion (its first choice)."""
    completion = expect(body, "a chat completion")
    choice = _first_choice(completion.get("choices"))
    if choice is None:
        raise WireError("a chat completion needs a choice")
    message = expect(choice.get("message"), "a choice's message")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise WireError("a choice's message content must be a string or null")
    out: dict[str, Any] = {"role": "assistant", "content": content}
    calls = message.get("tool_calls")
    if calls:
        if not isinstance(calls, list):
            raise WireError("a choice's tool_calls must be a list")
        out["tool_calls"] = clone(calls)
    out |= {key: clone(message[key]) for key in _SET_ONLY if message.get(key) not in (None, [])}
    return Reply(out, openai_usage(completion.get("usage")), _reason(choice))


def openai_usage(usage: Any) -> dict[str, int] | None:
    """Reported usage under ctxc's names; OpenAI's prompt tokens include the cached ones."""
    found = count(usage, _USAGE)
    if isinstance(usage, dict):
        found |= count(usage.get("prompt_tokens_details"), {"cached_tokens": "cache_read_tokens"})
    return found or None


def _first_choice(choices: Any) -> dict[str, Any] | None:
    if not isinstance(choices, list):
        raise WireError("choices must be a list")
    for choice in choices:
        found = expect(choice, "a choice")
        if found.get("index", 0) == 0:
            return found
    return None


def _reason(choice: dict[str, Any]) -> str | None:
    reason = choice.get("finish_reason")
    return reason if isinstance(reason, str) else None


@dataclass
class _Call:
    """A tool call being streamed: its id, its kind and the strings of its kind's object."""

    id: str = ""
    kind: str = "function"
    fields: dict[str, list[str]] = field(default_factory=dict)

    def message(self) -> dict[str, Any]:
        body = {"name": "", "arguments": ""} if self.kind == "function" else {}
        body |= {key: "".join(pieces) for key, pieces in self.fields.items()}
        return {"id": self.id, "type": self.kind, self.kind: body}


class OpenAIStream:
    """Chunks in; the reply once ``[DONE]`` follows a finish reason. Strings of a delta are
    appended, but a tool call's id and type, which are set by the delta that first has them."""

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self._content: list[str] | None = None
        self._refusal: list[str] | None = None
        self._calls: dict[int, _Call] = {}
        self._annotations: list[Any] = []
        self._function: dict[str, list[str]] = {}  # the legacy function_call
        self._usage: dict[str, int] | None = None
        self._reason: str | None = None
        self._done = False
        self.error: dict[str, Any] | None = None

    def take(self, event: Event) -> None:
        """Read one event (nothing after the end or an error)."""
        if self._done or self.error is not None:
            return
        if event.data == DONE:
            self._done = True
            return
        chunk = parse_json(event.data, "a chat completion chunk")
        if chunk.get("error") is not None:
            self.error = expect(chunk["error"], "a stream error")
            return
        if chunk.get("usage") is not None:
            self._usage = openai_usage(chunk["usage"])
        choice = _first_choice(chunk.get("choices") or [])
        if choice is not None:
            self._delta(expect(choice.get("delta", {}), "a chunk's delta"))
            self._reason = _reason(choice) or self._reason

    def reply(self) -> Reply | None:
        """The reply, once the stream ended properly."""
        if not self._done or self._reason is None or self.error is not None:
            return None
        out: dict[str, Any] = {"role": "assistant", "content": _joined(self._content)}
        if self._calls:
            out["tool_calls"] = [self._calls[i].message() for i in sorted(self._calls)]
        if self._refusal is not None:
            out["refusal"] = "".join(self._refusal)
        if self._annotations:
            out["annotations"] = self._annotations
        if self._function:
            out["function_call"] = {key: "".join(p) for key, p in self._function.items()}
        return Reply(out, self._usage, self._reason)

    def _delta(self, delta: dict[str, Any]) -> None:
        self._content = self._add(self._content, delta.get("content"))
        self._refusal = self._add(self._refusal, delta.get("refusal"))
        if isinstance(annotations := delta.get("annotations"), list):
            self._budget.take(repr(annotations))
            self._annotations += clone(annotations)
        if isinstance(function := delta.get("function_call"), dict):
            self._strings(self._function, function)
        for raw in delta.get("tool_calls") or ():
            self._call(expect(raw, "a tool call delta"))

    def _add(self, pieces: list[str] | None, text: Any) -> list[str] | None:
        """``pieces`` with ``text`` appended when it is a string (None: none seen yet)."""
        if not isinstance(text, str):
            return pieces
        pieces = [] if pieces is None else pieces
        pieces.append(self._budget.take(text))
        return pieces

    def _call(self, raw: dict[str, Any]) -> None:
        index = raw.get("index")
        if not isinstance(index, int):
            raise WireError("a tool call delta needs an integer index")
        call = self._calls.setdefault(index, _Call())
        if isinstance(raw.get("id"), str) and not call.id:
            call.id = raw["id"]
        if isinstance(raw.get("type"), str) and not call.fields:
            call.kind = raw["type"]
        body = raw.get(call.kind)
        if isinstance(body, dict):
            self._strings(call.fields, body)

    def _strings(self, into: dict[str, list[str]], delta: dict[str, Any]) -> None:
        """Append the string fields of ``delta`` to theirs in ``into``."""
        for key, value in delta.items():
            if isinstance(value, str):
                into.setdefault(key, []).append(self._budget.take(value))


def _joined(pieces: list[str] | None) -> str | None:
    return None if pieces is None else "".join(pieces)
