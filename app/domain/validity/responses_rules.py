"""The structural rules OpenAI's Responses API enforces on a request's ``instructions`` and
``input`` items, from its published schema and the errors it answers with (quoted where known):

- "No tool output found for function call <call_id>." / "No tool call found for function call
  output with call_id <call_id>.": every ``function_call`` is answered by a later
  ``function_call_output`` with its ``call_id``, and every output answers an earlier call;
- "Item 'rs_...' of type 'reasoning' was provided without its required following item.": a
  reasoning item is followed by what the model produced with it, not by input or the end;
- "Invalid 'input[N].id': '...'. Expected an ID that begins with 'fc'." (and 'msg' for a
  message item); "Duplicate item found with id ...": item ids are unique;
- "Invalid value: 'input_text'. Supported values are: 'output_text' and 'refusal'.": an
  assistant message holds output parts, other roles input parts;
- "Input[N] missing required field `summary`": a reasoning item has an id and a summary list.
"""

from __future__ import annotations

from typing import Any, Final

from app.domain.formats._responses_kinds import produced_by_model

ROLES: Final = ("user", "assistant", "system", "developer")
_ID_PREFIX: Final = {"function_call": "fc", "message": "msg"}
_INPUT_PARTS: Final = ("input_text", "input_image", "input_file")
NO_ITEMS: Final = "no input items: the API needs at least one"


def responses_problems(
    instructions: Any, items: list[Any], prior_call_ids: frozenset[str] = frozenset()
) -> list[str]:
    """Every rule of the Responses API that ``instructions`` and ``input`` break, each naming
    the item's index. ``prior_call_ids``: calls the provider already holds (their outputs may
    open the input)."""
    problems = [] if items else [NO_ITEMS]
    if instructions is not None and not isinstance(instructions, str):
        problems.append("instructions must be a string")
    seen_ids: set[str] = set()
    calls: dict[str, int] = {}
    answered: set[str] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            problems.append(f"item {i}: not an object")
            continue
        kind = item.get("type", "message")
        problems += [f"item {i}: {p}" for p in _item_problems(kind, item)]
        problems += _id_problems(i, kind, item, seen_ids)
        if kind == "reasoning" and not _follows(items, i):
            problems.append(
                f"item {i}: Item {item.get('id')!r} of type 'reasoning' was provided without its"
                " required following item"
            )
        call_id = item.get("call_id")
        if kind == "function_call" and isinstance(call_id, str):
            if call_id in calls:
                problems.append(f"item {i}: call_id {call_id!r} is used by item {calls[call_id]}")
            calls[call_id] = i
        elif kind == "function_call_output" and isinstance(call_id, str):
            if call_id not in calls and call_id not in prior_call_ids:
                problems.append(
                    f"item {i}: No tool call found for function call output with call_id {call_id}"
                )
            elif call_id in answered:
                problems.append(f"item {i}: function call {call_id!r} is answered twice")
            answered.add(call_id)
    problems += [
        f"item {i}: No tool output found for function call {cid}"
        for cid, i in calls.items()
        if cid not in answered
    ]
    return problems


def _item_problems(kind: Any, item: dict[str, Any]) -> list[str]:
    if kind == "message":
        return _message_problems(item)
    if kind == "function_call":
        fields = [f for f in ("call_id", "name", "arguments") if not isinstance(item.get(f), str)]
        problems = [f"function_call.{f} must be a string" for f in fields]
        if item.get("call_id") == "":
            problems.append("function_call.call_id must not be empty")
        return problems
    if kind == "function_call_output":
        problems = [] if isinstance(item.get("call_id"), str) else ["call_id must be a string"]
        output = item.get("output")
        if isinstance(output, list):
            problems += [
                f"output part {j}: {p}" for j, x in enumerate(output) if (p := _part("user", x))
            ]
        elif not isinstance(output, str):
            problems.append("output must be a string or a list of input parts")
        return problems
    if kind == "reasoning":
        problems = [] if isinstance(item.get("id"), str) else ["a reasoning item needs an id"]
        if not isinstance(item.get("summary"), list):
            problems.append("missing required field `summary`")
        return problems
    return [] if isinstance(kind, str) and kind else ["an item needs a string type"]


def _message_problems(item: dict[str, Any]) -> list[str]:
    role = item.get("role")
    if role not in ROLES:
        return [f"unknown role {role!r}"]
    content = item.get("content")
    if isinstance(content, str):
        return []
    if not isinstance(content, list):
        return ["content must be a string or a list of parts"]
    return [f"content part {j}: {p}" for j, part in enumerate(content) if (p := _part(role, part))]


def _part(role: str, part: Any) -> str | None:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        return "not a part object with a string type"
    kind = part["type"]
    if role == "assistant":
        if kind not in ("output_text", "refusal"):
            return f"Invalid value: {kind!r}. Supported values are: 'output_text' and 'refusal'"
        field = "text" if kind == "output_text" else "refusal"
    else:
        if kind not in _INPUT_PARTS:
            return f"Invalid value: {kind!r}. Supported values are: {', '.join(_INPUT_PARTS)}"
        field = "text" if kind == "input_text" else ""
    if field and not isinstance(part.get(field), str):
        return f"a {kind} part needs a string {field}"
    if kind == "input_image" and not ("image_url" in part or "file_id" in part):
        return "an input_image needs an image_url or a file_id"
    return None


def _id_problems(i: int, kind: Any, item: dict[str, Any], seen: set[str]) -> list[str]:
    if "id" not in item:
        return []
    value = item["id"]
    prefix = _ID_PREFIX.get(kind) if isinstance(kind, str) else None
    if not isinstance(value, str):
        return [f"item {i}: id must be a string"]
    problems = []
    if prefix is not None and not value.startswith(prefix):
        problems.append(
            f"item {i}: Invalid 'input[{i}].id': {value!r}. Expected an ID that begins with"
            f" {prefix!r}"
        )
    if value in seen:
        problems.append(f"item {i}: Duplicate item found with id {value}")
    seen.add(value)
    return problems


def _follows(items: list[Any], index: int) -> bool:
    """Whether the item after a reasoning item is model output."""
    return index + 1 < len(items) and model_output(items[index + 1])


def model_output(item: Any) -> bool:
    """Whether ``item`` is what a model produces (an assistant message, a call, reasoning)."""
    if not isinstance(item, dict):
        return False
    kind = item.get("type", "message")
    if kind == "message":
        return bool(item.get("role") == "assistant")
    return kind in ("function_call", "reasoning") or (
        isinstance(kind, str) and produced_by_model(kind)
    )
