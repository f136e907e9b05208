"""Provider error bodies: spotting the upstream's "prompt too long", writing ctxc's own errors.

An upstream refuses an over-long prompt with a 400 whose text is the only sign; the texts
below are the ones the APIs really send (OpenAI's ``context_length_exceeded`` and its older or
compatible servers' "maximum context length", Anthropic's "prompt is too long" and its "input
length and `max_tokens` exceed context limit"). ctxc's own errors on the provider endpoints
take each provider's error shape and types, so the SDKs raise their usual exceptions.
"""

from __future__ import annotations

import json
from typing import Any, Final

from app.domain.wire.gemini import gemini_error, gemini_overflow
from app.domain.wire.reply import Provider

# An error body is short; a longer one is no "prompt too long" and is not parsed.
MAX_ERROR_BYTES: Final = 64 * 1024
OPENAI_OVERFLOW_CODE: Final = "context_length_exceeded"
_OVERFLOW_TEXTS: Final[dict[Provider, tuple[str, ...]]] = {
    "openai": (
        "maximum context length",  # "This model's maximum context length is 8192 tokens..."
        "input tokens exceed the configured limit",  # gpt-5: "... of 272000 tokens"
        "exceeds the context window",  # Responses: "Your input exceeds the context window ..."
        OPENAI_OVERFLOW_CODE,
    ),
    "anthropic": (
        "prompt is too long",  # "prompt is too long: 200251 tokens > 200000 maximum"
        "exceed context limit",  # "input length and `max_tokens` exceed context limit: ..."
    ),
}
_OPENAI_TYPES: Final = {401: "invalid_request_error", 403: "request_forbidden", 429: "requests"}
_OPENAI_CODES: Final = {401: "invalid_api_key", 429: "rate_limit_exceeded"}
_ANTHROPIC_TYPES: Final = {
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    504: "timeout_error",
    529: "overloaded_error",
}


def is_overflow(provider: Provider, status: int, body: bytes) -> bool:
    """Whether the upstream refused the prompt as too long for the model's window."""
    provider = _family(provider)
    if status != 400 or len(body) > MAX_ERROR_BYTES:
        return False
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        return False
    error = _error_object(document)
    if error is None:
        return False
    if provider == "openai" and error.get("code") == OPENAI_OVERFLOW_CODE:
        return True
    if provider == "gemini":
        return gemini_overflow(error)
    if provider == "anthropic" and error.get("type") != "invalid_request_error":
        return False
    message = error.get("message")
    text = message.lower() if isinstance(message, str) else ""
    return any(sign in text for sign in _OVERFLOW_TEXTS[provider])


def fitting_share(provider: Provider, body: bytes) -> float | None:
    """The share of the prompt an overflow error says fits: Anthropic writes "prompt is too
    long: N tokens > M maximum", Gemini "The input token count (N) exceeds the maximum number of
    tokens allowed (M)", OpenAI "maximum context length is M tokens. However, your
    messages resulted in N tokens" (M / N); None when it gives no such numbers."""
    provider = _family(provider)
    try:
        error = _error_object(json.loads(body))
    except (ValueError, RecursionError):
        return None
    message = error.get("message") if error else None
    numbers = _numbers(message) if isinstance(message, str) else []
    if len(numbers) < 2:
        return None
    prompt, maximum = numbers[:2] if provider in ("anthropic", "gemini") else numbers[1::-1]
    return maximum / prompt if prompt > maximum > 0 else None


def _family(provider: Provider) -> Provider:
    """The provider whose error shapes a wire shares (Responses: OpenAI's, the same
    ``{"error": {...}}`` and ``context_length_exceeded``)."""
    return "openai" if provider == "responses" else provider


def _numbers(text: str) -> list[int]:
    """The whole numbers in ``text``, in order (a linear scan)."""
    found, run = [], ""
    for char in f"{text} ":
        if char.isascii() and char.isdigit():
            run += char
        elif run:
            found.append(int(run))
            run = ""
    return found


def _error_object(document: Any) -> dict[str, Any] | None:
    """The error object: under ``error`` (OpenAI, Anthropic), else the body itself (vLLM and
    other OpenAI-compatible servers answer ``{"object": "error", "message": ...}``)."""
    if not isinstance(document, dict):
        return None
    error = document.get("error", document)
    return error if isinstance(error, dict) else None


def error_body(provider: Provider, status: int, message: str, param: str | None = None) -> bytes:
    """ctxc's own error on a provider endpoint, in that provider's error JSON."""
    if _family(provider) == "openai":
        error = {
            "message": message,
            "type": _openai_type(status),
            "param": param,
            "code": _OPENAI_CODES.get(status),
        }
        return json.dumps({"error": error}).encode()
    if provider == "gemini":
        return json.dumps(gemini_error(status, message, param)).encode()
    document = {"type": "error", "error": {"type": _anthropic_type(status), "message": message}}
    return json.dumps(document).encode()


def _openai_type(status: int) -> str:
    if status >= 500:
        return "server_error"
    return _OPENAI_TYPES.get(status, "invalid_request_error")


def _anthropic_type(status: int) -> str:
    if status in _ANTHROPIC_TYPES:
        return _ANTHROPIC_TYPES[status]
    return "api_error" if status >= 500 else "invalid_request_error"
