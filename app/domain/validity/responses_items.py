"""What the Responses API needs beyond pairing: a reasoning item followed by its output, item
ids of the right prefix and unique, and the request's ``instructions`` and ``input``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from app.domain.formats._responses_kinds import PROVIDER, is_item, produced_by_model
from app.domain.formats.responses import responses_items, to_responses
from app.domain.memo import per_value
from app.domain.messages import JSONObject, Message, OpaquePart, Part, ReasoningPart
from app.domain.validity.responses_rules import model_output
from app.domain.validity.targets import carried

Entry = tuple[int, Message]

_ID_PREFIX: Final = {"function_call": "fc", "message": "msg"}
# Items whose id is optional: a wrong or repeated one is left out, the item kept (an output
# dropped would leave its call unanswered).
_ID_OPTIONAL: Final = frozenset({*_ID_PREFIX, "function_call_output"})


def settle_reasoning(entries: list[Entry], warnings: list[str], at: Sequence[int]) -> list[Entry]:
    """Drop each reasoning item that nothing the model produced follows in its message (its call
    was dropped unanswered, its text was blank): the API refuses a reasoning item without its
    following item."""
    out = []
    for i, message in entries:
        if message.role == "assistant" and any(
            isinstance(p, ReasoningPart) for p in message.content
        ):
            kept = _settled(message.content)
            if len(kept) != len(message.content):
                dropped = len(message.content) - len(kept)
                warnings.append(
                    f"dropped {dropped} reasoning item(s) with nothing after them (message {at[i]})"
                )
                message = message.model_copy(update={"content": tuple(kept)})
        out.append((i, message))
    return out


def settled(message: Message) -> bool:
    """Whether ``settle_reasoning`` leaves ``message`` as it is."""
    if message.role != "assistant" or not any(
        isinstance(p, ReasoningPart) for p in message.content
    ):
        return True
    return len(_settled(message.content)) == len(message.content)


def _settled(parts: Sequence[Part]) -> list[Part]:
    sent = [p for p in parts if carried(p, "responses")]
    keep: set[int] = set()
    followed = False
    for part in reversed(sent):
        if isinstance(part, ReasoningPart):
            if followed:
                keep.add(id(part))
        else:
            followed = _is_output(part)
    return [
        p
        for p in parts
        if not isinstance(p, ReasoningPart) or id(p) in keep or not carried(p, "responses")
    ]


def _is_output(part: Part) -> bool:
    if isinstance(part, OpaquePart) and part.provider == PROVIDER and is_item(part):
        kind = part.data.get("type")
        return isinstance(kind, str) and produced_by_model(kind)
    return True


def responses_request(
    entries: list[Entry], warnings: list[str]
) -> tuple[str | None, list[JSONObject]]:
    """``(instructions, input)`` for repaired entries, item ids made acceptable."""
    instructions, items = to_responses([message for _, message in entries], _items_of)
    seen: set[str] = set()
    fixed = [(i, _fixed_id(i, item, seen, warnings)) for i, item in enumerate(items)]
    # A repeated item left out may leave the reasoning before it with nothing after it.
    out: list[JSONObject] = []
    for index, item in reversed(fixed):
        if item is None:
            continue
        if item.get("type") == "reasoning" and not (out and model_output(out[-1])):
            warnings.append(f"dropped input item {index} (reasoning): nothing it produced follows")
            continue
        out.append(item)
    return instructions or None, out[::-1]


def _items_of(message: Message) -> list[JSONObject]:
    """A repaired message's input items: made once while it lives (a session's stored messages
    come back as the same objects every compile), each compile getting its own copies."""
    return [dict(item) for item in _kept_items(message, "responses")]


@per_value
def _kept_items(message: Message, _: str) -> tuple[JSONObject, ...]:
    return tuple(responses_items(message))


def _fixed_id(
    index: int, item: JSONObject, seen: set[str], warnings: list[str]
) -> JSONObject | None:
    """The item with an id the API takes: a message's, call's or output's wrong or repeated
    id is left out (the id is optional there); another item repeating an id is dropped."""
    if "id" not in item:
        return item
    kind = item.get("type", "message")
    value = item["id"]
    prefix = _ID_PREFIX.get(kind) if isinstance(kind, str) else None
    wrong = not isinstance(value, str) or (prefix is not None and not value.startswith(prefix))
    repeated = isinstance(value, str) and value in seen
    if not wrong and not repeated:
        seen.add(value)
        return item
    if kind in _ID_OPTIONAL:
        why = "a repeated id" if repeated else "an id is a string"
        if not repeated and prefix is not None:
            why = f"a {kind} id begins with {prefix!r}"
        warnings.append(f"left out the id {value!r} of input item {index}: {why}")
        return {key: field for key, field in item.items() if key != "id"}
    what = "repeated" if repeated else "not a string"
    warnings.append(f"dropped input item {index} ({kind}): its id {value!r} is {what}")
    return None
