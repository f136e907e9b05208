"""What an upstream answered: the assistant's reply, in the shape a client resends."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

Provider = Literal["openai", "anthropic", "responses", "gemini"]


class WireError(ValueError):
    """An upstream answer that is not a valid answer of its protocol, or over a bound."""


@dataclass(frozen=True)
class Reply:
    """The assistant message in the endpoint's request shape (what a client appends to its
    history and resends), the usage the provider reported, normalised, and why it stopped."""

    message: dict[str, Any]
    usage: dict[str, int] | None
    stop_reason: str | None


def count(usage: Any, fields: dict[str, str]) -> dict[str, int]:
    """The integer counts of ``usage`` the provider reported, under ctxc's names
    (``fields`` maps the provider's name to ctxc's)."""
    if not isinstance(usage, dict):
        return {}
    found: dict[str, int] = {}
    for theirs, ours in fields.items():
        value = usage.get(theirs)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            found[ours] = value
    return found


class Budget:
    """What a reply may keep, in UTF-8 bytes: an upstream cannot make ctxc hold more."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._left = limit

    def take(self, text: str) -> str:
        """``text``, counted against the budget."""
        self._left -= len(text.encode("utf-8", "surrogatepass"))
        if self._left < 0:
            raise WireError(f"the reply is over {self._limit} bytes")
        return text


def parse_json(data: str, what: str) -> dict[str, Any]:
    """The JSON object ``data`` holds, else a WireError naming ``what`` it should be."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        raise WireError(f"{what} is not JSON") from None
    return expect(value, what)


def expect(value: Any, what: str) -> dict[str, Any]:
    """``value`` when it is a JSON object, else a WireError."""
    if not isinstance(value, dict):
        raise WireError(f"{what} is not a JSON object")
    return value
