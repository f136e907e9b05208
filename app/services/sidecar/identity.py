"""What a resent history is, for telling whether it continues a thread: its items as sent, less
what agents move from turn to turn without changing what is said.

- ``cache_control`` on any block, message or system block: Claude Code puts its prompt-cache
  breakpoint on its newest message every turn and takes it off the one before.
- A content of one plain text block and the same text as a string: the same message (Claude Code
  writes the one block back as a string once its breakpoint moved on).
- A system text block that starts with ``x-anthropic-billing-header:``: Claude Code's billing
  line, different in every request.

Everything else counts, byte for byte (key order aside): a changed text, a removed message or a
tool result rewritten is an edit. What is stored and forwarded is never changed by this: it is
only what a thread's hashes are made of.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

VOLATILE_KEYS: Final = frozenset({"cache_control"})
BILLING: Final = "x-anthropic-billing-header:"
# Byte patterns that tell an item may hold something to leave out (else it is hashed as sent).
_MARKS: Final = (b'"cache_control"', BILLING.encode())
_PLAIN_TEXT: Final = frozenset({"type", "text", "cache_control"})


def identity(item: Any) -> bytes:
    """The bytes a thread hashes for one item of a history (a message, or a system prompt)."""
    data = orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
    if any(mark in data for mark in _MARKS) or _one_text(item) or _one_text_list(item):
        data = orjson.dumps(_normal(item), option=orjson.OPT_SORT_KEYS)
    return data


def _normal(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _normal(v) for k, v in value.items() if k not in VOLATILE_KEYS}
        text = _plain_text(out.get("content"))
        if text is not None:
            out["content"] = text
        return out
    if isinstance(value, list):
        kept = [_normal(v) for v in value if not _billing(v)]
        text = _plain_text(kept)
        return kept if text is None else text
    return value


def _one_text(item: Any) -> bool:
    return isinstance(item, dict) and _plain_text(item.get("content")) is not None


def _one_text_list(item: Any) -> bool:
    return _plain_text(item) is not None


def _plain_text(content: Any) -> str | None:
    """The text of a content that is one plain text block (its breakpoint aside)."""
    if not isinstance(content, list) or len(content) != 1:
        return None
    block = content[0]
    if (
        not isinstance(block, dict)
        or block.get("type") != "text"
        or not block.keys() <= _PLAIN_TEXT
    ):
        return None
    text = block.get("text")
    return text if isinstance(text, str) else None


def _billing(value: Any) -> bool:
    if not isinstance(value, dict) or value.get("type") != "text":
        return False
    text = value.get("text")
    return isinstance(text, str) and text.startswith(BILLING)
