"""The Anthropic Messages API."""

from __future__ import annotations

import httpx

from app.adapters.summarizers.base import Request
from app.adapters.summarizers.http import dig, post_json, summary_text
from app.domain.summaries.prompts import build_prompt

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicMessages:
    """Posts ``{model, max_tokens, system, messages: [user]}`` to ``{base_url}/v1/messages``
    with ``x-api-key`` and ``anthropic-version``, and joins the answer's text blocks."""

    name = "anthropic"

    def __init__(self, client: httpx.AsyncClient, base_url: str, model: str, api_key: str) -> None:
        self._client = client
        self._url = f"{base_url.rstrip('/')}/v1/messages"
        self._model = model
        self._headers = {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}

    async def complete(self, request: Request) -> str:
        prompt = build_prompt(
            request.messages, request.reason, request.max_tokens, request.part, request.extra
        )
        body = {
            "model": request.model or self._model,
            "max_tokens": request.max_tokens,
            "system": prompt.system,
            "messages": [{"role": "user", "content": prompt.user}],
        }
        answer = await post_json(self._client, self._url, body, self._headers)
        blocks = dig(answer, "content")
        texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        return summary_text("".join(t for t in texts if isinstance(t, str)))

    async def aclose(self) -> None:
        await self._client.aclose()
