"""Posting JSON to a summariser endpoint, and sorting what goes wrong into retryable or not.

Timeouts, connection errors, 408, 429 and 5xx answers are worth another try; other answers
outside 2xx (redirects are not followed), answers that are not JSON or are larger than
``MAX_ANSWER_BYTES``, and answers without a summary in them are not. An ``x-should-retry:
true|false`` header (sent by OpenAI and Anthropic, and obeyed by their SDKs) overrides the
status. How long the server asks to wait is read from ``retry-after-ms``, else ``Retry-After``
(seconds or an HTTP-date).

These few lines stand in for the official ``openai`` and ``anthropic`` SDKs on purpose: ctxc
needs one request shape from each, its own retry loop and time limits (``Resilient``) for every
backend, the webhook included, a bound on the answer's size, and requests without a key for
self-hosted endpoints. The SDKs would bring another HTTP stack, their own retries to turn off,
and credentials and headers read from the environment (``OPENAI_API_KEY``,
``ANTHROPIC_AUTH_TOKEN``, ``ANTHROPIC_CUSTOM_HEADERS``...) that the operator did not give ctxc.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
import orjson

from app.adapters.summarizers.base import BackendError

MAX_ANSWER_BYTES = 4 * 1024 * 1024
RETRYABLE_STATUS = frozenset({408, 429})
SNIPPET_CHARS = 200


async def post_json(
    client: httpx.AsyncClient, url: str, body: Any, headers: Mapping[str, str] | None = None
) -> Any:
    """The decoded JSON answer to ``body`` posted to ``url``, or a ``BackendError``."""
    content = body if isinstance(body, bytes) else orjson.dumps(body)
    sent = {"content-type": "application/json", **(headers or {})}
    try:
        async with client.stream("POST", url, content=content, headers=sent) as response:
            raw = await _read(response)
    except httpx.TimeoutException:
        raise BackendError("timed out", retryable=True) from None
    except httpx.TransportError as exc:
        raise BackendError(f"connection failed ({type(exc).__name__})", retryable=True) from None
    if not response.is_success:
        status = response.status_code
        detail = " ".join(raw[:SNIPPET_CHARS].decode(errors="replace").split())
        retryable = status in RETRYABLE_STATUS or status >= 500
        should = response.headers.get("x-should-retry")
        if should in ("true", "false"):
            retryable = should == "true"
        raise BackendError(f"HTTP {status}: {detail}", retryable, retry_after(response.headers))
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise BackendError("the answer is not JSON", retryable=False) from None


async def _read(response: httpx.Response) -> bytes:
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        size += len(chunk)
        if size > MAX_ANSWER_BYTES:
            raise BackendError(f"the answer is over {MAX_ANSWER_BYTES} bytes", retryable=False)
        chunks.append(chunk)
    return b"".join(chunks)


def retry_after(headers: Mapping[str, str], now: Callable[[], float] = time.time) -> float | None:
    """The seconds a server asks to wait: ``retry-after-ms`` (OpenAI, Anthropic), else
    ``Retry-After`` as seconds or as an HTTP-date (RFC 9110); ``None`` when neither is usable."""
    millis = _finite(headers.get("retry-after-ms"))
    if millis is not None:
        return max(0.0, millis / 1000)
    value = headers.get("retry-after", "").strip()
    seconds = _finite(value)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # "-0000": UTC, says RFC 5322
        when = when.replace(tzinfo=UTC)
    return max(0.0, when.timestamp() - now())


def _finite(value: str | None) -> float | None:
    try:
        number = float(value or "")
    except ValueError:
        return None
    return number if math.isfinite(number) else None


def summary_text(value: Any) -> str:
    """``value`` as a summary: a string with something in it, or a ``BackendError``."""
    if not isinstance(value, str) or not value.strip():
        raise BackendError("the answer holds no summary text", retryable=False)
    return value.strip()


def dig(answer: Any, *path: str | int) -> Any:
    """``answer[path[0]][path[1]]...``, or a ``BackendError`` naming the shape expected."""
    value = answer
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            where = "".join(f"[{step!r}]" for step in path)
            raise BackendError(f"unexpected answer: no answer{where}", retryable=False) from None
    return value
