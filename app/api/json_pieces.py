"""`json.loads` in pieces: the same value and the same errors, but never one long C call.

A C call holds the GIL from start to end: `json.loads` of a 16 MB body in a worker thread
stops the event loop as surely as on it. Here every value that fits in a window of `WINDOW`
characters is decoded by the C scanner of the standard library (so its parsing rules are
exactly the same); a larger object or array is walked here, member by member, so the GIL can
change hands between members. A string longer than the window, or a number, is decoded in one
call (a copy, not a tree of objects: fast).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from json import JSONDecodeError
from json.decoder import scanstring  # type: ignore[attr-defined]
from typing import Any, Final

WINDOW: Final = 1 << 16
# Deeper than `json.loads` goes with the default recursion limit: refused as it refuses.
MAX_NESTING: Final = 1000
_SPACE = re.compile(r"[ \t\n\r]*")
# The C scanner (`json.loads`'s own): `(text, idx)` -> `(value, end)`.
_SCAN: Final[Callable[[str, int], tuple[Any, int]]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


def loads(raw: bytes, window: int = WINDOW) -> Any:
    """``json.loads(raw)``, decoded in pieces of about ``window`` characters (see the module)."""
    text = raw.decode(json.detect_encoding(raw), "surrogatepass")
    if text.startswith("\ufeff"):
        raise JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
    return _Pieces(text, window).document()


def _space(text: str, idx: int) -> int:
    found = _SPACE.match(text, idx)
    assert found is not None  # `*` matches the empty string
    return found.end()


class _Pieces:
    def __init__(self, text: str, size: int) -> None:
        self.text = text
        self.size = size
        self.base = 0  # `window` is `text[base:base + size]`
        self.window = ""

    def document(self) -> Any:
        value, end = self.value(_space(self.text, 0))
        end = _space(self.text, end)
        if end != len(self.text):
            raise JSONDecodeError("Extra data", self.text, end)
        return value

    def small(self, idx: int) -> tuple[Any, int] | None:
        """The string, object or array at ``idx`` when it fits in a window (else None: larger,
        malformed, or a number, which a window's end could cut short)."""
        if self.text[idx : idx + 1] not in ('"', "{", "["):
            return None
        for again in (False, True):
            if again or not self.base <= idx < self.base + len(self.window):
                if again and self.base == idx:
                    return None
                self.base, self.window = idx, self.text[idx : idx + self.size]
            try:
                value, end = _SCAN(self.window, idx - self.base)
            except (JSONDecodeError, StopIteration, RecursionError):
                continue
            # Ending before the window does, it ends there in the text too.
            if end < len(self.window) or self.base + len(self.window) == len(self.text):
                return value, self.base + end
        return None

    def scalar(self, idx: int) -> tuple[Any, int]:
        try:
            found: tuple[Any, int] = _SCAN(self.text, idx)
        except StopIteration as exc:
            raise JSONDecodeError("Expecting value", self.text, exc.value) from None
        return found

    def key(self, idx: int) -> tuple[str, int]:
        text = self.text
        if text[idx : idx + 1] != '"':
            raise JSONDecodeError("Expecting property name enclosed in double quotes", text, idx)
        key, idx = scanstring(text, idx + 1, True)
        idx = _space(text, idx)
        if text[idx : idx + 1] != ":":
            raise JSONDecodeError("Expecting ':' delimiter", text, idx)
        return key, _space(text, idx + 1)

    def value(self, idx: int) -> tuple[Any, int]:
        """The value at ``idx`` and where it ends; open containers are kept on a stack (no
        recursion), each with the key its next member goes under."""
        text = self.text
        stack: list[tuple[dict[str, Any] | list[Any], str]] = []
        while True:
            value: Any
            found = self.small(idx)
            if found is not None:
                value, idx = found
            elif (opening := text[idx : idx + 1]) in ("{", "["):
                if len(stack) >= MAX_NESTING:
                    raise RecursionError("JSON nested too deep")
                container: dict[str, Any] | list[Any] = {} if opening == "{" else []
                idx = _space(text, idx + 1)
                if text[idx : idx + 1] == ("}" if opening == "{" else "]"):
                    value, idx = container, idx + 1
                else:
                    key = ""
                    if opening == "{":
                        key, idx = self.key(idx)
                    stack.append((container, key))
                    continue
            else:
                value, idx = self.scalar(idx)
            while True:  # `value` is whole: put it in its container, close what ends here
                if not stack:
                    return value, idx
                container, key = stack[-1]
                if isinstance(container, dict):
                    container[key] = value
                else:
                    container.append(value)
                idx = _space(text, idx)
                char = text[idx : idx + 1]
                if char == ",":
                    idx = _space(text, idx + 1)
                    if isinstance(container, dict):
                        key, idx = self.key(idx)
                        stack[-1] = (container, key)
                    break
                if char != ("}" if isinstance(container, dict) else "]"):
                    raise JSONDecodeError("Expecting ',' delimiter", text, idx)
                stack.pop()
                value, idx = container, idx + 1
