"""The summarisers the settings ask for: one per deployment profile, built once."""

from __future__ import annotations

import httpx
from pydantic import SecretStr

from app.adapters.summarizers.anthropic import AnthropicMessages
from app.adapters.summarizers.base import Backend, Summarizer
from app.adapters.summarizers.extractive import Extractive
from app.adapters.summarizers.ledger import LedgerSummarizer
from app.adapters.summarizers.openai import OpenAIChat
from app.adapters.summarizers.profiles import Summarizers
from app.adapters.summarizers.resilient import Policy, Resilient, Tuning
from app.adapters.summarizers.webhook import Webhook
from app.domain.summaries.extractive import CountText
from app.domain.summaries.profiles import BUILT_IN, DEFAULT_PROFILE, LEDGER_PROFILE, ProfileSpec
from app.domain.tokens import TokenCounter
from app.settings import ANTHROPIC_URL, Settings, summarizer_problems

ENCODING = "o200k_base"  # windows are counted with it, an estimate for non-OpenAI models


def summarizer_from_settings(settings: Settings, counter: TokenCounter) -> Summarizer:
    """The default profile's summariser: the ledger (or extractive) one, or a remote one that
    falls back to the ledger."""
    problems = summarizer_problems(settings)
    if problems:
        raise ValueError("; ".join(problems))
    spec = settings.profiles[DEFAULT_PROFILE]
    count = counter.encoder(ENCODING).count
    return _summarizer(DEFAULT_PROFILE, spec, count, LedgerSummarizer(count, spec.max_tokens or 0))


def summarizers_from_settings(settings: Settings, counter: TokenCounter) -> Summarizers:
    """A summariser for each profile (``default``, ``ledger``, ``extractive`` and the declared
    ones), each remote one falling back to its profile's fallback (the ledger unless it names
    another); a ValueError when the settings are unusable."""
    problems = summarizer_problems(settings)
    if problems:
        raise ValueError("; ".join(problems))
    specs = settings.profiles
    count = counter.encoder(ENCODING).count
    built: dict[str, Summarizer] = {}

    def build(name: str) -> Summarizer:
        # resolved_profiles() refused unknown fallbacks and loops: this ends.
        if name not in built:
            spec = specs[name]
            remote = spec.kind not in BUILT_IN
            fallback = build(spec.fallback or LEDGER_PROFILE) if remote else None
            built[name] = _summarizer(name, spec, count, fallback)
        return built[name]

    for name in specs:
        build(name)
    return Summarizers(built, {n: s.kind for n, s in specs.items()})


def _summarizer(
    name: str, spec: ProfileSpec, count: CountText, fallback: Summarizer | None
) -> Summarizer:
    # resolved_profiles() filled every limit in.
    max_tokens = spec.max_tokens or 0
    if spec.kind == "extractive":
        return Extractive(count, max_tokens)
    if spec.kind == "ledger" or fallback is None:
        return LedgerSummarizer(count, max_tokens)
    timeout = spec.timeout_seconds or 0.0
    policy = Policy(
        timeout=timeout,
        retries=spec.retries or 0,
        deadline=spec.deadline_seconds or 0.0,
        window_tokens=spec.window_tokens or 0,
        max_tokens=max_tokens,
    )
    # Resilient times each request out; the client's own limit is only a backstop behind it
    # (a session may ask for a longer request time limit: at most 600 s).
    client = httpx.AsyncClient(timeout=max(timeout, 600.0) + 1)
    profile = None if name == DEFAULT_PROFILE else name
    return Resilient(_backend(spec, client), fallback, count, policy, Tuning(profile), spec.model)


def _backend(spec: ProfileSpec, client: httpx.AsyncClient) -> Backend:
    # The settings have checked that what each backend needs is there.
    url = spec.url or ""
    model = spec.model or ""
    key = _secret(spec.api_key)
    if spec.kind == "openai":
        return OpenAIChat(client, url, model, key or None)
    if spec.kind == "anthropic":
        return AnthropicMessages(client, url or ANTHROPIC_URL, model, key)
    return Webhook(client, url, _secret(spec.webhook_secret).encode())


def _secret(value: SecretStr | None) -> str:
    return value.get_secret_value() if value is not None else ""
