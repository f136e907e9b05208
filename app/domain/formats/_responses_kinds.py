"""Kinds of OpenAI Responses items and content parts: which side of a turn an item is on, and
whether an opaque Responses part is a whole input item or a part of a message's content."""

from __future__ import annotations

from typing import Final

from app.domain.messages import OpaquePart, provider_meta

PROVIDER: Final = "responses"

# Content parts of a message item (and of a function_call_output list).
CONTENT_TYPES: Final = frozenset(
    {"input_text", "output_text", "input_image", "input_file", "input_audio", "refusal"}
)
# Content parts only an assistant message holds, and only other roles hold.
ASSISTANT_CONTENT: Final = frozenset({"output_text", "refusal"})
INPUT_CONTENT: Final = frozenset({"input_text", "input_image", "input_file", "input_audio"})
# Of those, what a Responses message takes (``input_audio`` is read, as other OpenAI inputs hold
# it, but the API refuses it in a message's content).
SENT_INPUT_CONTENT: Final = frozenset({"input_text", "input_image", "input_file"})
# Items the model produces besides messages, function calls and reasoning (kept opaque): they
# join the assistant turn they are part of.
_OUTPUT_ITEMS: Final = frozenset({"mcp_list_tools", "mcp_approval_request"})
# Items that answer an opaque call (kept opaque): they do not end the round they answer in.
_ANSWER_ITEMS: Final = frozenset({"mcp_approval_response"})


def produced_by_model(kind: str) -> bool:
    """Whether an item of type ``kind`` is model output (``web_search_call``, ``custom_tool_call``,
    ``mcp_call``...), as opposed to input the client gives (``*_output``, ``item_reference``)."""
    return (kind.endswith("_call") or kind in _OUTPUT_ITEMS) and kind != "function_call"


def answers_a_call(kind: str) -> bool:
    """Whether an item of type ``kind`` is the output of a (non-function) call."""
    return (kind.endswith("_output") and kind != "function_call_output") or kind in _ANSWER_ITEMS


def is_item(part: OpaquePart) -> bool:
    """Whether an opaque Responses part is a whole input item (else a content part)."""
    kind = part.data.get("type")
    if provider_meta(part.metadata, PROVIDER).get("content_part") is True:
        return False
    return not (isinstance(kind, str) and kind in CONTENT_TYPES)


def opaque_answer(part: object) -> bool:
    """Whether ``part`` is an opaque Responses item answering a call."""
    if not isinstance(part, OpaquePart) or part.provider != PROVIDER or not is_item(part):
        return False
    kind = part.data.get("type")
    return isinstance(kind, str) and answers_a_call(kind)
