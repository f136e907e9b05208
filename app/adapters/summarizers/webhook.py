"""A webhook the operator hosts: ctxc posts the messages, the webhook answers the summary.

The body is JSON: ``{"reason", "part": {"index", "count"} | null, "max_tokens", "instructions",
"messages": [canonical messages]}``; the answer must be ``{"summary": "..."}``. Each request
carries ``X-Ctxc-Timestamp`` (Unix seconds) and ``X-Ctxc-Signature: sha256=<hex>``, the
HMAC-SHA256 under the shared secret of the timestamp, a dot and the raw body bytes. A receiver
recomputes it over the bytes it received, compares in constant time, and refuses timestamps more
than a few minutes away from its clock (so a captured request cannot be replayed later).
"""

from __future__ import annotations

import hashlib
import hmac
import time
from collections.abc import Callable

import httpx
import orjson

from app.adapters.summarizers.base import BackendError, Request
from app.adapters.summarizers.http import post_json, summary_text
from app.domain.summaries.prompts import instructions

SIGNATURE_HEADER = "X-Ctxc-Signature"
TIMESTAMP_HEADER = "X-Ctxc-Timestamp"


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 under ``secret`` of ``{timestamp}.{body}``."""
    mac = hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256)
    return f"sha256={mac.hexdigest()}"


class Webhook:
    """Posts each request, signed, to the operator's URL."""

    name = "webhook"

    def __init__(
        self,
        client: httpx.AsyncClient,
        url: str,
        secret: bytes,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._client = client
        self._url = url
        self._secret = secret
        self._clock = clock

    async def complete(self, request: Request) -> str:
        part = request.part
        body = orjson.dumps(
            {
                "reason": request.reason,
                "part": {"index": part[0], "count": part[1]} if part else None,
                "max_tokens": request.max_tokens,
                "instructions": instructions(
                    request.reason, request.max_tokens, request.extra, request.carried
                ),
                "messages": [m.to_json() for m in request.messages],
            }
        )
        timestamp = str(int(self._clock()))
        signature = sign(self._secret, timestamp, body)
        headers = {TIMESTAMP_HEADER: timestamp, SIGNATURE_HEADER: signature}
        answer = await post_json(self._client, self._url, body, headers)
        if not isinstance(answer, dict):
            raise BackendError("unexpected answer: not a JSON object", retryable=False)
        return summary_text(answer.get("summary"))

    async def aclose(self) -> None:
        await self._client.aclose()
