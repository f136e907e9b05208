"""The structural rules Gemini ``generateContent`` enforces on ``systemInstruction`` and
``contents``, from the published schema and the API's error texts:

- "* GenerateContentRequest.contents: contents is not specified";
- "* GenerateContentRequest.contents[1].parts: contents.parts must not be empty.";
- roles are ``user`` and ``model``; a part holds exactly one data field;
- "Please ensure that function call turn comes immediately after a user turn or after a
  function response turn.";
- "Please ensure that function response turn comes immediately after a function call turn.";
- "Please ensure that the number of function response parts is equal to the number of function
  call parts of the function call turn." (ctxc also keeps names, ids and order equal);
- "Unable to submit request because Model input cannot be empty." (empty text parts).
"""

from __future__ import annotations

from typing import Any, Final

from app.domain.formats._gemini_parts import DATA_FIELDS, part_kind

_ROLE_OF: Final = {"functionCall": "model", "functionResponse": "user"}


def gemini_problems(
    system_instruction: Any, contents: list[Any], prior_call_ids: frozenset[str] = frozenset()
) -> list[str]:
    """Every rule of ``generateContent`` that the request breaks, naming the content index.

    ``prior_call_ids``: calls the provider already holds (the first content may answer them).
    """
    problems = _system_problems(system_instruction)
    if not contents:
        problems.append("contents is not specified: the API needs at least one content")
    calls: list[Any] | None = None  # the previous turn's function calls, while unanswered
    previous: Any = None
    for i, content in enumerate(contents):
        found, kinds = _content_problems(content)
        problems += [f"content {i}: {p}" for p in found]
        role = content.get("role") if isinstance(content, dict) else None
        responses = [p["functionResponse"] for p in _parts(content) if "functionResponse" in p]
        if i == 0 and role != "user":
            problems.append(f"content 0: the first content must be a user turn, not {role!r}")
        if "functionCall" in kinds and previous not in ("user", "response"):
            problems.append(
                f"content {i}: a function call turn must come immediately after a user turn or"
                " a function response turn"
            )
        if calls is not None:
            problems += [f"content {i}: {p}" for p in _answer_problems(calls, responses)]
        elif responses and not (i == 0 and prior_call_ids):
            problems.append(
                f"content {i}: a function response turn must come immediately after a function"
                " call turn"
            )
        if responses and any(k != "functionResponse" for k in kinds):
            problems.append(f"content {i}: a function response turn holds function responses only")
        calls = [p["functionCall"] for p in _parts(content) if "functionCall" in p] or None
        previous = "response" if responses else role
    if calls is not None:
        problems.append(f"content {len(contents) - 1}: function calls without a response turn")
    return problems


def _system_problems(value: Any) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, dict) or not isinstance(value.get("parts"), list):
        return ["systemInstruction: must be a Content object with a list of parts"]
    if not value["parts"]:
        return ["systemInstruction: parts must not be empty"]
    problems = []
    for j, part in enumerate(value["parts"]):
        problem, kind = _part_problem(part, "user")
        if kind != "text":
            problems.append(f"systemInstruction part {j}: the system instruction holds text only")
        elif problem is not None:
            problems.append(f"systemInstruction part {j}: {problem}")
    return problems


def _parts(content: Any) -> list[dict[str, Any]]:
    parts = content.get("parts") if isinstance(content, dict) else None
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _content_problems(content: Any) -> tuple[list[str], set[str]]:
    if not isinstance(content, dict):
        return ["not a content object"], set()
    role = content.get("role")
    problems = []
    if role not in ("user", "model"):
        problems.append(f"role must be 'user' or 'model', not {role!r}")
    parts = content.get("parts")
    if not isinstance(parts, list):
        return [*problems, "parts must be a list"], set()
    if not parts:
        problems.append("contents.parts must not be empty")
    kinds: set[str] = set()
    for j, part in enumerate(parts):
        problem, kind = _part_problem(part, role)
        if problem is not None:
            problems.append(f"part {j}: {problem}")
        if kind is not None:
            kinds.add(kind)
    return problems, kinds


def _part_problem(part: Any, role: Any) -> tuple[str | None, str | None]:
    if not isinstance(part, dict):
        return "not a part object", None
    data = [key for key in DATA_FIELDS if key in part]
    kind = data[0] if data else part_kind(part)
    if len(data) > 1:
        return f"a part holds exactly one data field, not {data}", kind
    if kind is None:
        return "a part needs a data field (text, inlineData, functionCall...)", None
    if kind in _ROLE_OF and role != _ROLE_OF[kind]:
        return f"a {kind} part belongs in a {_ROLE_OF[kind]} turn", kind
    if "thought" in part and not isinstance(part["thought"], bool):
        return "thought must be a boolean", kind
    if "thoughtSignature" in part and not isinstance(part["thoughtSignature"], str):
        return "thoughtSignature must be a string", kind
    return _data_problem(kind, part[kind], "thoughtSignature" in part), kind


def _data_problem(kind: str, value: Any, signed: bool) -> str | None:
    if kind == "text":
        if not isinstance(value, str):
            return "text must be a string"
        # Gemini itself answers with an empty text part that carries a signature.
        return "empty text part" if not value and not signed else None
    if kind == "inlineData":
        ok = isinstance(value, dict) and all(
            isinstance(value.get(k), str) and value.get(k) for k in ("mimeType", "data")
        )
        return None if ok else "inlineData needs a mimeType and data"
    if kind == "functionCall":
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            return "functionCall needs a string name"
        return None if isinstance(value.get("args", {}), dict) else "functionCall.args is an object"
    if kind == "functionResponse":
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            return "functionResponse needs a string name"
        ok = isinstance(value.get("response"), dict)
        return None if ok else "functionResponse.response must be an object"
    return None


def _answer_problems(calls: list[Any], responses: list[Any]) -> list[str]:
    if len(responses) != len(calls):
        return [
            f"the number of function response parts ({len(responses)}) must equal the number"
            f" of function call parts of the function call turn ({len(calls)})"
        ]
    problems = []
    for n, (call, response) in enumerate(zip(calls, responses, strict=True)):
        if not isinstance(call, dict) or not isinstance(response, dict):
            continue
        if call.get("name") != response.get("name"):
            problems.append(
                f"function response {n} names {response.get('name')!r}, its call"
                f" {call.get('name')!r}"
            )
        if call.get("id") != response.get("id"):
            problems.append(
                f"function response {n} has id {response.get('id')!r}, its call {call.get('id')!r}"
            )
    return problems
