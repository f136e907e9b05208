"""A history as plain text: what LLM summarisers read and what chunking measures.

Each message is ``role: content`` (``role (name): ...`` with a name), its parts one per line:
text as it is, ``[tool call ID] name {arguments}``, ``[tool result ID] text`` (``, error`` when
marked so), images and reasoning as short bracketed notes (inline image data is left out), and
opaque provider blocks as their JSON, cut to ``OPAQUE_CHARS``. Messages are separated by a blank
line.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from app.domain.messages import (
    ImagePart,
    Message,
    OpaquePart,
    Part,
    ReasoningPart,
    ResultItem,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from app.domain.summaries.facts import clip

OPAQUE_CHARS = 2_000
SEPARATOR = "\n\n"


def render_message(message: Message) -> str:
    """One message as transcript text."""
    head = f"{message.role} ({message.name})" if message.name else message.role
    return f"{head}: " + "\n".join(_render_part(part) for part in message.content)


def render_transcript(messages: Sequence[Message]) -> str:
    """The messages as one transcript, in order."""
    return SEPARATOR.join(render_message(m) for m in messages)


def _render_part(part: Part | ResultItem) -> str:
    match part:
        case TextPart(text=text):
            return text
        case ToolCallPart(id=call_id, name=name, arguments=arguments):
            shown = arguments if isinstance(arguments, str) else _json(arguments)
            return f"[tool call {call_id}] {name} {shown}"
        case ToolResultPart(call_id=call_id, content=content, is_error=is_error):
            flag = ", error" if is_error else ""
            body = content if isinstance(content, str) else "\n".join(map(_render_part, content))
            return f"[tool result {call_id}{flag}] {body}"
        case ImagePart(url=str() as url):
            return f"[image {url}]"
        case ImagePart(media_type=media_type):
            return f"[image: inline {media_type} data]"
        case ReasoningPart(text=str() as text):
            return f"[reasoning] {text}"
        case ReasoningPart():
            return "[redacted reasoning]"
        case OpaquePart(provider=provider, data=data):
            return f"[{provider} block] {clip(_json(data), OPAQUE_CHARS)}"
    raise TypeError(f"unexpected part {type(part).__name__}")


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)
