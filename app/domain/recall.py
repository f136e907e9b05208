"""The recall tool: what lets the model ask for an original that compaction took out of its view.

A compile with the ``recall`` decorator offers one more tool (``definition``, in the target's
shape), and its placeholders and previews name the pointer the tool takes (``pointer_text``):
``{"call_id": ..., "seq": ...}`` for a tool result, ``{"sha256": ...}`` for an omitted payload
field, ``{"seq": ...}`` for a message whose text a reduced round cut. The caller runs the
model's call through ctxc, which answers with a tool result in the same shape (``tool_result``)
holding one page of the original (``page_of``): at most a number of tokens, cut after a line
end where one is near, with a last line naming the offset of the next page. The pages of a
text, joined, are the text, character for character.

Everything here is pure: the service reads the original and counts tokens.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from app.domain.messages import JSONObject

DEFAULT_NAME: Final = "ctxc_recall"
# The tool-call and tool-result shapes the tool is written in, by the output shape's name.
SHAPES: Final = ("openai", "anthropic", "responses", "gemini")
PAGE_TOKENS: Final = 4_000  # a page's default size
MAX_PAGE_TOKENS: Final = 32_000  # and the most a caller may ask for
MIN_PAGE_TOKENS: Final = 64
# The first guess of a page's length in characters per token (then it is counted).
CHARS_PER_TOKEN: Final = 4
# A token is at least one byte and a character at most four: this many characters per token
# always fit, whatever the text.
SAFE_CHARS_PER_TOKEN: Final = 4
FIT_TRIES: Final = 6
SHA256: Final = re.compile(r"[0-9a-fA-F]{64}")
MAX_CALL_ID: Final = 512

DESCRIPTION: Final = (
    "Read the whole text of a tool result, payload field or message that was shortened or "
    "omitted in this conversation. A shortened text names its pointer: pass exactly those "
    "arguments (call_id and seq for a tool result, seq alone for a message, or sha256; an "
    'omitted field\'s sha256 is in "_tool_compaction"). A long text comes in pages: each page '
    "but the last ends with a line giving the offset of the next."
)
PARAMETERS: Final[JSONObject] = {
    "type": "object",
    "properties": {
        "call_id": {"type": "string", "description": "The tool call id the pointer names."},
        "seq": {
            "type": "integer",
            "description": "The seq the pointer names (which turn, where call ids repeat; "
            "alone, the message at that seq).",
        },
        "sha256": {"type": "string", "description": "The sha256 of an omitted payload field."},
        "offset": {
            "type": "integer",
            "description": "Where to go on in a long text: the offset the previous page gives.",
        },
    },
}


def definition(shape: str, name: str = DEFAULT_NAME) -> JSONObject:
    """The recall tool's definition, as ``shape``'s requests list a tool."""
    schema = json.loads(json.dumps(PARAMETERS))  # a copy the caller may change
    if shape == "openai":
        function = {"name": name, "description": DESCRIPTION, "parameters": schema}
        return {"type": "function", "function": function}
    if shape == "anthropic":
        return {"name": name, "description": DESCRIPTION, "input_schema": schema}
    if shape == "responses":
        return {"type": "function", "name": name, "description": DESCRIPTION, "parameters": schema}
    if shape == "gemini":
        declaration = {"name": name, "description": DESCRIPTION, "parameters": schema}
        return {"functionDeclarations": [declaration]}
    raise ValueError(f"no tool shape {shape!r}")


def tool_names(shape: str, tool: Any) -> list[str]:
    """The names of the functions a tool entry of ``shape`` declares (none for other entries)."""
    if not isinstance(tool, dict):
        return []
    if shape == "openai":
        function = tool.get("function")
        found = function.get("name") if isinstance(function, dict) else None
        return [found] if isinstance(found, str) else []
    if shape == "gemini":
        declared = tool.get("functionDeclarations")
        names = (
            [d.get("name") for d in declared if isinstance(d, dict)]
            if isinstance(declared, list)
            else []
        )
        return [n for n in names if isinstance(n, str)]
    found = tool.get("name")
    return [found] if isinstance(found, str) else []


def with_tools(shape: str, tools: Sequence[Any] | None, added: Sequence[JSONObject]) -> list[Any]:
    """The caller's ``tools`` with ``added`` after them; a caller's tool declaring a name one of
    ``added`` declares is left out (so tools sent back from an answer are not doubled): for
    Gemini, that declaration of its entry (an entry left with none goes)."""
    names = {n for tool in added for n in tool_names(shape, tool)}
    kept = []
    for tool in tools or ():
        if not names & set(tool_names(shape, tool)):
            kept.append(tool)
        elif shape == "gemini":
            others = [
                d
                for d in tool["functionDeclarations"]
                if not (isinstance(d, dict) and d.get("name") in names)
            ]
            if others:
                kept.append({**tool, "functionDeclarations": others})
    return [*kept, *added]


def pointer_text(name: str, call_id: str | None, seq: int | None = None, **more: Any) -> str:
    """The call a placeholder or page names: ``ctxc_recall {"call_id": "c1", "seq": 12}``, or
    without a call id the message at ``seq``: ``ctxc_recall {"seq": 12}``."""
    args: dict[str, Any] = {} if call_id is None else {"call_id": call_id}
    if seq:
        args["seq"] = seq
    return f"{name} {json.dumps({**args, **more}, ensure_ascii=False)}"


@dataclass(frozen=True)
class Pointer:
    """What the model asked for: a tool call's result (by id, and seq where ids repeat), a
    payload field by sha256, or a message's text by its seq alone, from ``offset`` (characters)
    on."""

    call_id: str | None = None
    seq: int | None = None
    sha256: str | None = None
    offset: int = 0

    def next(self, offset: int) -> JSONObject:
        """The arguments that ask for the page at ``offset``."""
        found: JSONObject = {}
        if self.sha256:
            found["sha256"] = self.sha256
        elif self.call_id is not None:
            found["call_id"] = self.call_id
        if self.seq and not self.sha256:
            found["seq"] = self.seq
        return {**found, "offset": offset}


class BadArguments(ValueError):
    """The model's call cannot be read: the message tells the model how to call the tool."""


def _whole(raw: Any, key: str) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, str) and raw.strip().isdigit() and len(raw) < 20:
        raw = int(raw)
    if not isinstance(raw, int) or isinstance(raw, bool) or raw < 0 or raw >= 2**63:
        raise BadArguments(f"{key} must be a whole number")
    return raw


def parse_arguments(raw: Any) -> Pointer:
    """The model's arguments (an object, or its JSON text as OpenAI sends it); unknown keys are
    ignored. ``BadArguments`` says what is wrong."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):
            raise BadArguments("the arguments are not a JSON object") from None
    if not isinstance(raw, dict):
        raise BadArguments("the arguments are not a JSON object")
    call_id, sha = raw.get("call_id"), raw.get("sha256")
    seq, offset = _whole(raw.get("seq"), "seq"), _whole(raw.get("offset"), "offset") or 0
    if call_id is not None and (
        not isinstance(call_id, str) or not 0 < len(call_id) <= MAX_CALL_ID or "\x00" in call_id
    ):
        raise BadArguments("call_id must be the id the pointer gives")
    if sha is not None and (not isinstance(sha, str) or not SHA256.fullmatch(sha)):
        raise BadArguments("sha256 must be the 64 hex digits the pointer gives")
    if call_id is not None and sha is not None:
        raise BadArguments("give call_id (with its seq) or sha256, not both")
    if seq == 0:
        seq = None
    if call_id is None and sha is None and seq is None:
        raise BadArguments(
            "give call_id (with its seq), seq alone for a message, or sha256, as the pointer "
            "names them"
        )
    return Pointer(call_id, seq, sha.lower() if sha else None, offset)


@dataclass(frozen=True)
class Page:
    """Characters ``start`` to ``end`` of a text ``total`` characters long."""

    text: str
    start: int
    end: int
    total: int

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end == self.total


def page_of(text: str, start: int, max_tokens: int, count: Callable[[str], int]) -> Page:
    """The page of ``text`` from character ``start``: at most ``max_tokens`` tokens (by
    ``count``), ending after a line end in its second half where it has one. ``start`` must be
    within the text (its length is the empty last page)."""
    total = len(text)
    chars = min(total - start, max_tokens * CHARS_PER_TOKEN)
    for _ in range(FIT_TRIES):
        tokens = count(text[start : start + chars])
        if tokens <= max_tokens:
            break
        chars = min(chars - 1, chars * max_tokens * 9 // (tokens * 10))
    else:
        chars = min(total - start, max_tokens // SAFE_CHARS_PER_TOKEN)
    end = start + max(chars, 1 if start < total else 0)
    if end < total:
        cut = text.rfind("\n", start + (end - start) // 2, end)
        if cut >= 0 and count(text[start : cut + 1]) <= max_tokens:
            end = cut + 1
    return Page(text[start:end], start, end, total)


def page_text(page: Page, name: str, pointer: Pointer) -> str:
    """The tool result's text: the page, and when the text has more than one page a last line
    saying which characters these are and how to ask for the next page."""
    if page.whole:
        return page.text
    where = f"characters {page.start:,} to {page.end:,} of {page.total:,}"
    if page.end >= page.total:
        line = f"[{name}: {where}: the end of the text]"
    else:
        call = f"{name} {json.dumps(pointer.next(page.end), ensure_ascii=False)}"
        line = f"[{name}: {where}; the next page: {call}]"
    return f"{page.text}\n{line}"


def tool_result(
    shape: str, name: str, tool_call_id: str | None, text: str, is_error: bool
) -> JSONObject:
    """The answer to the model's call in ``shape``: OpenAI's ``tool`` message, Anthropic's
    ``tool_result`` block, the Responses API's ``function_call_output`` item, Gemini's
    ``functionResponse`` part."""
    if shape == "openai":
        return {"role": "tool", "tool_call_id": tool_call_id, "content": text}
    if shape == "anthropic":
        block: JSONObject = {"type": "tool_result", "tool_use_id": tool_call_id, "content": text}
        return {**block, "is_error": True} if is_error else block
    if shape == "responses":
        return {"type": "function_call_output", "call_id": tool_call_id, "output": text}
    if shape == "gemini":
        response = {"error": text} if is_error else {"output": text}
        answer: JSONObject = {"name": name, "response": response}
        if tool_call_id is not None:
            answer["id"] = tool_call_id
        return {"functionResponse": answer}
    raise ValueError(f"no tool shape {shape!r}")
