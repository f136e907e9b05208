"""Anthropic Messages answers, whole or streamed as events, read into a Reply.

The reply is ``{"role": "assistant", "content": [blocks]}`` with every block as the API gave it
(text, tool_use, thinking with its signature, redacted_thinking, server tool blocks) less its
null fields, as the format parser reads a resent block.
"""

from __future__ import annotations

import json
from typing import Any, Final

from app.domain.formats._common import clone, without_nulls
from app.domain.wire.reply import Budget, Reply, WireError, count, expect, parse_json
from app.domain.wire.sse import Event

# Anthropic counts cache reads and writes apart from its input tokens; ctxc adds them itself.
_USAGE: Final = {
    "input_tokens": "prompt_tokens",
    "output_tokens": "completion_tokens",
    "cache_read_input_tokens": "cache_read_tokens",
    "cache_creation_input_tokens": "cache_write_tokens",
}
# Delta type -> (its string field, the block field that string extends).
_APPENDED: Final = {
    "text_delta": ("text", "text"),
    "thinking_delta": ("thinking", "thinking"),
    "input_json_delta": ("partial_json", "input"),
}


def anthropic_reply(body: Any) -> Reply:
    """The reply of a Messages answer."""
    message = expect(body, "a message")
    if message.get("type") != "message":
        raise WireError("an answer of type 'message' was expected")
    content = message.get("content")
    if not isinstance(content, list):
        raise WireError("a message's content must be a list of blocks")
    blocks = [without_nulls(expect(block, "a content block")) for block in content]
    usage = count(message.get("usage"), _USAGE) or None
    return Reply({"role": "assistant", "content": blocks}, usage, _reason(message))


def _reason(delta: dict[str, Any]) -> str | None:
    reason = delta.get("stop_reason")
    return reason if isinstance(reason, str) else None


class AnthropicStream:
    """Events in; the reply once ``message_stop`` arrives. An ``error`` event ends the reply
    for good; ``ping`` and event types this does not know are skipped, as the API asks."""

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self._blocks: dict[int, dict[str, Any]] = {}
        self._pieces: dict[int, dict[str, list[str]]] = {}  # strings being streamed, by block
        self._usage: dict[str, Any] = {}
        self._reason: str | None = None
        self._started = False
        self._done = False
        self.error: dict[str, Any] | None = None

    def take(self, event: Event) -> None:
        """Read one event (nothing after the end or an error)."""
        if self._done or self.error is not None:
            return
        data = parse_json(event.data, "a stream event")
        kind = data.get("type")
        if kind == "error":
            self.error = expect(data.get("error"), "a stream error")
        elif kind == "message_start":
            self._budget.take(event.data)
            self._start(expect(data.get("message"), "message_start's message"))
        elif kind == "content_block_start":
            block = expect(data.get("content_block"), "a started content block")
            self._budget.take(event.data)
            self._blocks[_index(data, self._blocks, new=True)] = clone(block)
        elif kind == "content_block_delta":
            self._delta(_index(data, self._blocks), expect(data.get("delta"), "a block delta"))
        elif kind == "content_block_stop":
            self._stop(_index(data, self._blocks))
        elif kind == "message_delta":
            self._reason = _reason(expect(data.get("delta"), "a message delta")) or self._reason
            self._add_usage(data.get("usage"))
        elif kind == "message_stop":
            self._done = self._started

    def reply(self) -> Reply | None:
        """The reply, once the stream ended properly."""
        if not self._done or self.error is not None:
            return None
        for index in list(self._pieces):
            self._stop(index)
        blocks = [without_nulls(self._blocks[i]) for i in sorted(self._blocks)]
        usage = count(self._usage, _USAGE) or None
        return Reply({"role": "assistant", "content": blocks}, usage, self._reason)

    def _start(self, message: dict[str, Any]) -> None:
        self._started = True
        for i, block in enumerate(message.get("content") or ()):
            self._blocks[i] = clone(expect(block, "a content block"))
        self._add_usage(message.get("usage"))

    def _add_usage(self, usage: Any) -> None:
        """Counts in a later event replace earlier ones (message_delta's are cumulative)."""
        if isinstance(usage, dict):
            self._usage |= {key: value for key, value in usage.items() if value is not None}

    def _delta(self, index: int, delta: dict[str, Any]) -> None:
        block, kind = self._blocks[index], delta.get("type")
        if kind in _APPENDED:
            given, key = _APPENDED[kind]
            fields = self._pieces.setdefault(index, {})
            first = "" if key == "input" else _text(block.get(key, ""))
            fields.setdefault(key, [first]).append(self._budget.take(_text(delta.get(given))))
        elif kind == "signature_delta":
            block["signature"] = self._budget.take(_text(delta.get("signature")))
        elif kind == "citations_delta":
            self._budget.take(json.dumps(delta.get("citation")))
            if not isinstance(block.get("citations"), list):
                block["citations"] = []
            block["citations"].append(clone(delta.get("citation")))

    def _stop(self, index: int) -> None:
        """The block's streamed strings joined; a tool block's input parsed (none streamed:
        the input it started with)."""
        block = self._blocks[index]
        for key, pieces in self._pieces.pop(index, {}).items():
            text = "".join(pieces)
            if key != "input":
                block[key] = text
            elif text:
                block[key] = parse_json(text, "a tool block's streamed input")


def _index(data: dict[str, Any], blocks: dict[int, Any], new: bool = False) -> int:
    index = data.get("index")
    if not isinstance(index, int) or isinstance(index, bool) or (index in blocks) == new:
        raise WireError(f"{data.get('type')} names no {'new ' if new else ''}content block")
    return index


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise WireError("a streamed text field is not a string")
    return value
