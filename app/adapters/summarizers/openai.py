"""An OpenAI-compatible chat completions endpoint: OpenAI, vLLM, Ollama, LiteLLM and the like."""

from __future__ import annotations

import httpx

from app.adapters.summarizers.base import Answer, Request
from app.adapters.summarizers.http import dig, post_json, summary_text
from app.adapters.summarizers.prefix import conversation, openai_usage
from app.domain.summaries.prompts import build_prompt


class OpenAIChat:
    """Posts ``{model, messages, max_tokens}`` to ``{base_url}/chat/completions`` (with
    ``Authorization: Bearer <key>`` when a key is set) and reads ``choices[0].message.content``
    and ``usage``. ``messages``: the session's own messages then the instruction turn, when the
    session speaks OpenAI chat (``prefix.conversation``), else ``[system, user transcript]``."""

    name = "openai"

    def __init__(
        self, client: httpx.AsyncClient, base_url: str, model: str, api_key: str | None
    ) -> None:
        self._client = client
        self._url = f"{base_url.rstrip('/')}/chat/completions"
        self._model = model
        self._headers = {"authorization": f"Bearer {api_key}"} if api_key else {}

    async def complete(self, request: Request) -> Answer:
        found = conversation(request, "openai")
        if found is not None:
            messages = found[1]
        else:
            prompt = build_prompt(
                request.messages,
                request.reason,
                request.max_tokens,
                request.part,
                request.extra,
                request.carried,
            )
            messages = [
                {"role": "system", "content": prompt.system},
                {"role": "user", "content": prompt.user},
            ]
        body = {
            "model": request.model or self._model,
            "messages": messages,
            "max_tokens": request.max_tokens,
        }
        answer = await post_json(self._client, self._url, body, self._headers)
        text = summary_text(dig(answer, "choices", 0, "message", "content"))
        return Answer(text, openai_usage(answer))

    async def aclose(self) -> None:
        await self._client.aclose()
