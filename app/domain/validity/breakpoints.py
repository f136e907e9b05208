"""Anthropic's limit on prompt-cache breakpoints: at most four blocks with ``cache_control``.

A stored history can hold more than the request that wrote each message did: an agent moves its
breakpoint to its newest message every turn, and each message was stored while it was the
newest. A request over the limit is refused by the API, so the rendered request keeps the
system prompt's breakpoints (the most stable prefix) and then the newest ones.
"""

from __future__ import annotations

from typing import Any, Final

MAX_BREAKPOINTS: Final = 4
KEY: Final = "cache_control"

# Where a breakpoint sits: ("system", block) or (message, block).
Place = tuple[str | int, int]


def breakpoint_problems(system: Any, messages: list[Any]) -> list[str]:
    """The limit broken, if it is."""
    count = len(_places(system, messages))
    if count <= MAX_BREAKPOINTS:
        return []
    return [f"{count} blocks with cache_control: the API allows {MAX_BREAKPOINTS} at most"]


def limit_breakpoints(
    system: Any, messages: list[Any], warnings: list[str]
) -> tuple[Any, list[Any]]:
    """``(system, messages)`` with the breakpoints over the limit taken off, the oldest message
    ones first; the inputs are not changed."""
    places = _places(system, messages)
    if len(places) <= MAX_BREAKPOINTS:
        return system, messages
    in_system = [p for p in places if p[0] == "system"]
    kept = set(in_system[:MAX_BREAKPOINTS])
    room = MAX_BREAKPOINTS - len(kept)
    kept |= set([p for p in places if p[0] != "system"][-room:] if room else [])
    dropped = [p for p in places if p not in kept]
    warnings.append(
        f"took cache_control off {len(dropped)} older blocks: the API allows "
        f"{MAX_BREAKPOINTS} breakpoints"
    )
    messages = list(messages)
    for where, block in dropped:
        if where == "system":
            system = _without(system, block)
        else:
            assert isinstance(where, int)
            turn = dict(messages[where])
            turn["content"] = _without(turn["content"], block)
            messages[where] = turn
    return system, messages


def _places(system: Any, messages: list[Any]) -> list[Place]:
    places: list[Place] = [("system", j) for j in _marked(system)]
    for i, turn in enumerate(messages):
        if isinstance(turn, dict):
            places += [(i, j) for j in _marked(turn.get("content"))]
    return places


def _marked(blocks: Any) -> list[int]:
    if not isinstance(blocks, list):
        return []
    return [j for j, b in enumerate(blocks) if isinstance(b, dict) and b.get(KEY) is not None]


def _without(blocks: list[Any], index: int) -> list[Any]:
    out = list(blocks)
    out[index] = {k: v for k, v in out[index].items() if k != KEY}
    return out
