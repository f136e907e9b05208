"""The structural rules OpenAI Chat Completions enforces on a request's ``messages``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from app.domain.validity.targets import OPENAI_NAME

ROLES: Final = ("system", "developer", "user", "assistant", "tool", "function")
_TEXT_ONLY: Final = ("system", "developer", "tool")


def openai_problems(messages: list[Any], prior_call_ids: frozenset[str] = frozenset()) -> list[str]:
    """Every rule of the Chat Completions API that ``messages`` breaks, each naming its index.

    ``prior_call_ids``: tool calls the provider already holds (a resumed session's delta may open
    with their results); they are not required to be answered here.
    """
    problems: list[str] = [] if messages else ["no messages: the API needs at least one"]
    pairing = _Pairing(PRIOR if prior_call_ids else None, list(prior_call_ids), prior=True)
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            problems.append(f"message {i}: not an object")
            continue
        problems += [f"message {i}: {p}" for p in _message_problems(message)]
        problems += pairing.step(i, message)
    return problems + pairing.finish()


def _message_problems(message: dict[str, Any]) -> list[str]:
    role = message.get("role")
    if role not in ROLES:
        return [f"unknown role {role!r}"]
    problems = _content_problems(role, message)
    name = message.get("name")
    if "name" in message and not (isinstance(name, str) and OPENAI_NAME.fullmatch(name)):
        problems.append(f"name {name!r} is not 1-64 of A-Z a-z 0-9 _ -")
    if "tool_calls" in message and message["tool_calls"] is not None:
        problems += _tool_calls_problems(role, message["tool_calls"])
    return problems


def _content_problems(role: str, message: dict[str, Any]) -> list[str]:
    content = message.get("content")
    if role == "assistant":
        if content is None and not message.get("tool_calls"):
            return ["an assistant message needs content or tool_calls"]
        if content is None:
            return []
    elif role == "function":
        return [] if content is None or isinstance(content, str) else ["content must be a string"]
    elif content is None:
        return [f"a {role} message needs content"]
    if isinstance(content, str):
        return []
    if not isinstance(content, list) or not content:
        return ["content must be a string or a non-empty list of parts"]
    return [f"content part {j}: {p}" for j, item in enumerate(content) if (p := _part(role, item))]


def _part(role: str, item: Any) -> str | None:
    if not isinstance(item, dict) or not isinstance(item.get("type"), str):
        return "not a part object with a string type"
    kind = item["type"]
    if kind == "text":
        return None if isinstance(item.get("text"), str) else "a text part needs a string text"
    if role in _TEXT_ONLY:
        return f"a {role} message holds text parts only, not {kind!r}"
    if role == "assistant" and kind != "refusal":
        return f"assistant content holds text and refusal parts only, not {kind!r}"
    if role == "user" and kind == "refusal":
        return "a refusal part belongs to an assistant message"
    return None


def _tool_calls_problems(role: str, calls: Any) -> list[str]:
    if role != "assistant":
        return ["only an assistant message has tool_calls"]
    if not isinstance(calls, list) or not calls:
        return ["tool_calls must be a non-empty list (or left out)"]
    problems = [f"tool call {j}: {p}" for j, call in enumerate(calls) if (p := _call(call))]
    ids = [call.get("id") for call in calls if isinstance(call, dict)]
    problems += [f"tool call id {cid!r} is used twice" for cid in _duplicates(ids)]
    return problems


def _call(call: Any) -> str | None:
    if not isinstance(call, dict) or not isinstance(call.get("id"), str):
        return "needs a string id"
    kind = call.get("type")
    body = call.get(kind) if isinstance(kind, str) else None
    if kind not in ("function", "custom") or not isinstance(body, dict):
        return "type must be 'function' (with a function object) or 'custom' (with a custom one)"
    field_name = "arguments" if kind == "function" else "input"
    if not isinstance(body.get("name"), str) or not isinstance(body.get(field_name), str):
        return f"{kind}.name and {kind}.{field_name} must be strings"
    return None


def _duplicates(values: list[Any]) -> list[Any]:
    seen: list[Any] = []
    twice: list[Any] = []
    for value in values:
        if value in seen and value not in twice:
            twice.append(value)
        seen.append(value)
    return twice


PRIOR = -1  # the owner of calls sent before the request


@dataclass
class _Pairing:
    """Tool messages answer the calls of the assistant message right before them."""

    owner: int | None = None
    open_calls: list[str] = field(default_factory=list)
    prior: bool = False  # the open calls were sent before this request
    answered: set[str] = field(default_factory=set)

    def step(self, index: int, message: dict[str, Any]) -> list[str]:
        if message.get("role") == "tool":
            return self._answer(index, message.get("tool_call_id"))
        problems = self.finish(before=index)
        calls = message.get("tool_calls") if message.get("role") == "assistant" else None
        if isinstance(calls, list) and calls:
            ids = [c.get("id") for c in calls if isinstance(c, dict)]
            self.owner, self.open_calls = index, [cid for cid in ids if isinstance(cid, str)]
        return problems

    def _answer(self, index: int, call_id: Any) -> list[str]:
        if self.owner is None:
            return [
                f"message {index}: a tool message must follow an assistant message with"
                " tool_calls, before any other message"
            ]
        if not isinstance(call_id, str) or call_id not in self.open_calls:
            return [
                f"message {index}: tool_call_id {call_id!r} is not a tool call of message"
                f" {self.owner}"
            ]
        if call_id in self.answered:
            return [f"message {index}: tool call {call_id!r} is answered twice"]
        self.answered.add(call_id)
        return []

    def finish(self, before: int | None = None) -> list[str]:
        """Close the open calls; unanswered ones are problems of their assistant message."""
        missing = [cid for cid in self.open_calls if cid not in self.answered]
        owner, prior = self.owner, self.prior
        self.owner, self.open_calls, self.answered, self.prior = None, [], set(), False
        if owner is None or prior or not missing:
            return []
        where = "at the end" if before is None else f"before message {before}"
        return [f"message {owner}: tool call(s) {missing!r} have no tool message {where}"]
