"""The Anthropic Messages API."""

from __future__ import annotations

import httpx

from app.adapters.summarizers.base import Answer, Request
from app.adapters.summarizers.http import dig, post_json, summary_text
from app.adapters.summarizers.prefix import anthropic_usage, conversation, with_breakpoint
from app.domain.summaries.prompts import build_prompt

ANTHROPIC_VERSION = "2023-06-01"


class AnthropicMessages:
    """Posts ``{model, max_tokens, system, messages}`` to ``{base_url}/v1/messages`` with
    ``x-api-key`` and ``anthropic-version``, joins the answer's text blocks and reads ``usage``.
    When the session speaks Anthropic (``prefix.conversation``): its system prompt and messages
    as a compile sends them, a cache breakpoint on the last of them, then the instruction turn;
    else the instructions as ``system`` and the transcript as the one user turn."""

    name = "anthropic"

    def __init__(self, client: httpx.AsyncClient, base_url: str, model: str, api_key: str) -> None:
        self._client = client
        self._url = f"{base_url.rstrip('/')}/v1/messages"
        self._model = model
        self._headers = {"x-api-key": api_key, "anthropic-version": ANTHROPIC_VERSION}

    async def complete(self, request: Request) -> Answer:
        model = request.model or self._model
        body: dict[str, object] = {"model": model, "max_tokens": request.max_tokens}
        found = conversation(request, "anthropic")
        if found is not None:
            system, messages = found
            if system is not None:
                body["system"] = system
            body["messages"] = with_breakpoint(system, messages)
        else:
            prompt = build_prompt(
                request.messages,
                request.reason,
                request.max_tokens,
                request.part,
                request.extra,
                request.carried,
            )
            body["system"] = prompt.system
            body["messages"] = [{"role": "user", "content": prompt.user}]
        answer = await post_json(self._client, self._url, body, self._headers)
        blocks = dig(answer, "content")
        texts = [b.get("text") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        text = summary_text("".join(t for t in texts if isinstance(t, str)))
        return Answer(text, anthropic_usage(answer))

    async def aclose(self) -> None:
        await self._client.aclose()
