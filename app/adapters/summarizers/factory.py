"""The summariser the settings ask for."""

from __future__ import annotations

import httpx
from pydantic import SecretStr

from app.adapters.summarizers.anthropic import AnthropicMessages
from app.adapters.summarizers.base import Backend, Summarizer
from app.adapters.summarizers.extractive import Extractive
from app.adapters.summarizers.openai import OpenAIChat
from app.adapters.summarizers.resilient import Policy, Resilient
from app.adapters.summarizers.webhook import Webhook
from app.domain.tokens import TokenCounter
from app.settings import ANTHROPIC_URL, Settings, summarizer_problems

ENCODING = "o200k_base"  # windows are counted with it, an estimate for non-OpenAI models


def summarizer_from_settings(settings: Settings, counter: TokenCounter) -> Summarizer:
    """The configured summariser: the extractive one, or a remote one that falls back to it."""
    problems = summarizer_problems(settings)
    if problems:
        raise ValueError("; ".join(problems))
    count = counter.encoder(ENCODING).count
    extractive = Extractive(count, settings.summarizer_max_tokens)
    if settings.summarizer == "extractive":
        return extractive
    policy = Policy(
        timeout=settings.summarizer_timeout_seconds,
        retries=settings.summarizer_retries,
        deadline=settings.summarizer_deadline_seconds,
        window_tokens=settings.summarizer_window_tokens,
        max_tokens=settings.summarizer_max_tokens,
    )
    # Resilient times each request out; the client's own limit is only a backstop behind it.
    client = httpx.AsyncClient(timeout=settings.summarizer_timeout_seconds + 1)
    return Resilient(_backend(settings, client), extractive, count, policy)


def _backend(settings: Settings, client: httpx.AsyncClient) -> Backend:
    # summarizer_problems() has checked that what each backend needs is there.
    url = settings.summarizer_url or ""
    model = settings.summarizer_model or ""
    key = _secret(settings.summarizer_api_key)
    if settings.summarizer == "openai":
        return OpenAIChat(client, url, model, key or None)
    if settings.summarizer == "anthropic":
        return AnthropicMessages(client, url or ANTHROPIC_URL, model, key)
    return Webhook(client, url, _secret(settings.summarizer_webhook_secret).encode())


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""
