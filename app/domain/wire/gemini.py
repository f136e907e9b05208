"""Gemini ``generateContent`` answers, whole or streamed, read into a Reply; Google's error shape.

The reply is the first candidate's content as a client resends it: ``{"role": "model",
"parts": [...]}``. A stream (``streamGenerateContent``: events of ``alt=sse``, or the JSON array
of chunks without it) gives the content in pieces: adjacent text pieces of the same kind
(thought or answer) are joined, as Gemini CLI joins the answer's; every other part is kept as it
came; every ``thoughtSignature`` is kept byte-exact on the part it came with (Gemini 3 models
refuse a function-call turn without its signature): a signed empty text piece stays a part of
its own, a signed piece with text continuing an unsigned text part gives the joined part its
signature. Usage is the last ``usageMetadata`` (Gemini repeats the running totals);
``promptTokenCount`` is the whole prompt, the cached part inside it.
"""

from __future__ import annotations

import json
from typing import Any, Final

from app.domain.formats._common import clone
from app.domain.wire.reply import Budget, Reply, WireError, count, expect, parse_json
from app.domain.wire.sse import Event

_USAGE: Final = {
    "promptTokenCount": "prompt_tokens",
    "cachedContentTokenCount": "cache_read_tokens",
}
_TEXT_FIELDS: Final = frozenset({"text", "thought", "thoughtSignature"})
# google.rpc status names by HTTP status, as the Gemini API writes them.
_STATUSES: Final = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ABORTED",
    413: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    501: "UNIMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}
# "The input token count (1234567) exceeds the maximum number of tokens allowed (1048576)."
OVERFLOW_TEXT: Final = "exceeds the maximum number of tokens allowed"


def gemini_reply(body: Any) -> Reply:
    """The reply of a ``generateContent`` answer, or of a whole streamed one (a JSON array of
    its chunks)."""
    merged = _Merged(Budget(1 << 62))
    for chunk in body if isinstance(body, list) else [body]:
        merged.take(expect(chunk, "a GenerateContentResponse"))
    if merged.reason is None and not merged.parts:
        raise WireError("a generateContent answer needs a candidate")
    return merged.reply()


class _Merged:
    """Chunks of one answer merged into one content."""

    def __init__(self, budget: Budget) -> None:
        self._budget = budget
        self.parts: list[dict[str, Any]] = []
        self._texts: dict[int, list[str]] = {}  # the pieces of each text part, by index
        self._usage: dict[str, int] = {}
        self.reason: str | None = None

    def take(self, chunk: dict[str, Any]) -> None:
        if (usage := _usage(chunk.get("usageMetadata"))) is not None:
            self._usage = usage
        candidates = chunk.get("candidates")
        if candidates is None:
            return
        if not isinstance(candidates, list):
            raise WireError("candidates must be a list")
        candidate = next(
            (
                expect(c, "a candidate")
                for c in candidates
                if isinstance(c, dict) and c.get("index", 0) == 0
            ),
            None,
        )
        if candidate is None:
            return
        content = candidate.get("content")
        parts = expect(content, "a candidate's content").get("parts") if content else None
        for part in parts if isinstance(parts, list) else ():
            self._part(expect(part, "a part"))
        if isinstance(reason := candidate.get("finishReason"), str):
            self.reason = reason

    def _part(self, part: dict[str, Any]) -> None:
        last = len(self.parts) - 1
        if _is_text(part) and last in self._texts and _joins(self.parts[last], part):
            self._texts[last].append(self._budget.take(part["text"]))
            if "thoughtSignature" in part:
                self.parts[last]["thoughtSignature"] = part["thoughtSignature"]
            return
        self._budget.take(json.dumps(part))
        self.parts.append(clone(part))
        if _is_text(part):
            self._texts[len(self.parts) - 1] = [part["text"]]

    def reply(self) -> Reply:
        parts = [dict(p) for p in self.parts]
        for index, pieces in self._texts.items():
            parts[index]["text"] = "".join(pieces)
        return Reply({"role": "model", "parts": parts}, self._usage or None, self.reason)


def _joins(last: dict[str, Any], part: dict[str, Any]) -> bool:
    """Whether a text piece continues the text part before it (as Gemini CLI joins them): of
    the same kind, and a signature only on a piece with text when the part has none yet (an
    empty signed piece stays apart, where it came)."""
    if bool(last.get("thought")) != bool(part.get("thought")):
        return False
    return "thoughtSignature" not in part or (bool(part["text"]) and "thoughtSignature" not in last)


def _is_text(part: dict[str, Any]) -> bool:
    return isinstance(part.get("text"), str) and part.keys() <= _TEXT_FIELDS


def _usage(metadata: Any) -> dict[str, int] | None:
    """Gemini's counts under ctxc's names, the thoughts counted with the answer as output."""
    found = count(metadata, _USAGE)
    output = count(metadata, {"candidatesTokenCount": "answer", "thoughtsTokenCount": "thoughts"})
    if output:
        found["completion_tokens"] = sum(output.values())
    return found or None


class GeminiStream:
    """Events of ``streamGenerateContent?alt=sse`` in (each a GenerateContentResponse); the reply
    once a chunk gives the candidate's ``finishReason``. A chunk holding ``error`` ends it."""

    def __init__(self, budget: Budget) -> None:
        self._merged = _Merged(budget)
        self.error: dict[str, Any] | None = None

    def take(self, event: Event) -> None:
        """Read one event (nothing after the end or an error)."""
        if self._merged.reason is not None or self.error is not None:
            return
        chunk = parse_json(event.data, "a GenerateContentResponse")
        if chunk.get("error") is not None:
            self.error = expect(chunk["error"], "a stream error")
            return
        self._merged.take(chunk)

    def reply(self) -> Reply | None:
        """The reply, once the stream gave its finish reason."""
        if self._merged.reason is None or self.error is not None:
            return None
        return self._merged.reply()


def gemini_overflow(error: dict[str, Any]) -> bool:
    """Whether Google's error object refuses the prompt as too long."""
    message = error.get("message")
    return (
        error.get("status") == "INVALID_ARGUMENT"
        and isinstance(message, str)
        and OVERFLOW_TEXT in message.lower()
    )


def gemini_error(status: int, message: str, param: str | None = None) -> dict[str, Any]:
    """ctxc's own error in Google's shape (``google.rpc.Status``; a bad field as a
    ``BadRequest`` field violation)."""
    name = _STATUSES.get(status) or ("INTERNAL" if status >= 500 else "FAILED_PRECONDITION")
    error: dict[str, Any] = {"code": status, "message": message, "status": name}
    if param is not None:
        violation = {"field": param, "description": message}
        error["details"] = [
            {"@type": "type.googleapis.com/google.rpc.BadRequest", "fieldViolations": [violation]}
        ]
    return {"error": error}
