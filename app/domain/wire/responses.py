"""OpenAI Responses answers, whole or streamed as events, read into a Reply.

The reply is ``{"role": "assistant", "output": [items]}``: the response's output items as a
client appends them to its ``input`` and resends them (messages, ``function_call`` items,
``reasoning`` items with their ``encrypted_content``, other calls), each as the API gave it less
its null fields (a reasoning item is kept whole: the API takes it back only unchanged). A
stream's items are those of its ``response.output_item.done`` events, which is what agents keep
(Codex builds its history from them); the ``output`` of ``response.completed`` when there were
none. Its ``usage`` is read from ``response.completed`` (or ``response.incomplete``).
"""

from __future__ import annotations

from typing import Any, Final

from app.domain.formats._common import clone, without_nulls
from app.domain.wire.reply import Budget, Reply, WireError, count, expect, parse_json
from app.domain.wire.sse import Event

_USAGE: Final = {"input_tokens": "prompt_tokens", "output_tokens": "completion_tokens"}
# Events that end a response with its whole state under ``response``.
_ENDED: Final = ("response.completed", "response.incomplete")


def responses_reply(body: Any) -> Reply:
    """The reply of a (non-streamed) response object."""
    response = expect(body, "a response")
    if response.get("object", "response") != "response":
        raise WireError("an answer of object 'response' was expected")
    if response.get("status") == "failed":
        raise WireError("the response failed")
    output = response.get("output")
    if not isinstance(output, list):
        raise WireError("a response's output must be a list of items")
    items = [_item(raw) for raw in output]
    return Reply(_message(items), responses_usage(response.get("usage")), _reason(response))


def responses_usage(usage: Any) -> dict[str, int] | None:
    """Reported usage under ctxc's names; Responses' input tokens include the cached ones."""
    found = count(usage, _USAGE)
    if isinstance(usage, dict):
        found |= count(usage.get("input_tokens_details"), {"cached_tokens": "cache_read_tokens"})
    return found or None


def _message(items: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": "assistant", "output": items}


def _item(raw: Any) -> dict[str, Any]:
    item = expect(raw, "an output item")
    if not isinstance(item.get("type"), str):
        raise WireError("an output item needs a type")
    if item["type"] == "reasoning":  # its encrypted content goes back byte for byte
        return clone(item)
    kept: dict[str, Any] = without_nulls(item)
    return kept


def _reason(response: dict[str, Any]) -> str | None:
    details = response.get("incomplete_details")
    if isinstance(details, dict) and isinstance(details.get("reason"), str):
        reason: str = details["reason"]
        return reason
    status = response.get("status")
    return status if isinstance(status, str) else None


class ResponsesStream:
    """Events in; the reply once ``response.completed`` (or ``response.incomplete``) arrives.
    An ``error`` event or ``response.failed`` ends the reply for good; the many delta events are
    skipped (each item arrives whole in its ``response.output_item.done``)."""

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self._items: dict[int, dict[str, Any]] = {}
        self._response: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None

    def take(self, event: Event) -> None:
        """Read one event (nothing after the end or an error)."""
        if self._response is not None or self.error is not None:
            return
        if event.event != "message" and not _wanted(event.event):
            return  # a named delta: not parsed
        data = parse_json(event.data, "a response stream event")
        kind = data.get("type")
        if kind == "error":
            self.error = {k: v for k, v in data.items() if k not in ("type", "sequence_number")}
        elif kind == "response.failed":
            response = expect(data.get("response"), "a failed response")
            error = response.get("error")
            self.error = error if isinstance(error, dict) else {"message": "the response failed"}
        elif kind == "response.output_item.done":
            self._budget.take(event.data)
            index = data.get("output_index")
            if not isinstance(index, int) or isinstance(index, bool) or index < 0:
                raise WireError("response.output_item.done needs an integer output_index")
            self._items[index] = _item(data.get("item"))
        elif kind in _ENDED:
            self._budget.take(event.data)
            self._response = expect(data.get("response"), f"{kind}'s response")

    def reply(self) -> Reply | None:
        """The reply, once the stream ended properly."""
        if self._response is None or self.error is not None:
            return None
        if self._items:
            items = [self._items[i] for i in sorted(self._items)]
        else:
            output = self._response.get("output")
            items = [_item(raw) for raw in output] if isinstance(output, list) else []
        usage = responses_usage(self._response.get("usage"))
        return Reply(_message(items), usage, _reason(self._response))


def _wanted(kind: str) -> bool:
    """Whether an event of this (SSE) name is one the reply is read from."""
    return kind in ("error", "response.failed", "response.output_item.done", *_ENDED)
