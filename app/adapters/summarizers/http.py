"""Posting JSON to a summariser endpoint, and sorting what goes wrong into retryable or not.

Timeouts, connection errors, 408, 429 and 5xx answers are worth another try; other answers
outside 2xx (redirects are not followed), answers that are not JSON or are larger than
``MAX_ANSWER_BYTES``, and answers without a summary in them are not.
"""

from __future__ import annotations

from collections.abc import Mapping
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
        raise BackendError(f"HTTP {status}: {detail}", retryable, _retry_after(response))
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


def _retry_after(response: httpx.Response) -> float | None:
    """The Retry-After header in seconds (its date form is ignored)."""
    try:
        return max(0.0, float(response.headers.get("retry-after", "")))
    except ValueError:
        return None


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
