"""Responses input items in the groups that become one canonical message each.

``from_responses`` joins a turn's model items (reasoning, calls, at most one assistant message
item) into one assistant message; the sidecar's thread, which counts a history in the units
it stores, needs to know which items made which message before they are parsed. This reads it
from the items' types and roles only, with the rules of ``responses.group_turns``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from app.domain.formats._responses_kinds import produced_by_model


def item_turns(items: Sequence[Any]) -> list[list[Any]]:
    """``items`` in groups, one per message ``from_responses`` makes of them, in order."""
    out: list[list[Any]] = []
    turn: list[Any] = []  # the model items of the turn being gathered
    has_message = False
    for item in items:
        side = _model_side(item)
        if side is None:
            if turn:
                out.append(turn)
                turn, has_message = [], False
            out.append([item])
            continue
        is_message, empty = side
        if is_message and turn and (has_message or empty):
            out.append(turn)
            turn, has_message = [], False
        turn.append(item)
        has_message = has_message or is_message
    if turn:
        out.append(turn)
    return out


def _model_side(item: Any) -> tuple[bool, bool] | None:
    """For a model item: whether it is an assistant message item, and an empty one; None for
    the client's items (and for what is no item: the parser refuses it)."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind is None or kind == "message":
        if item.get("role") != "assistant":
            return None
        return True, item.get("content") == []
    if kind in ("function_call", "reasoning"):
        return False, False
    if isinstance(kind, str) and produced_by_model(kind):
        return False, False
    return None
