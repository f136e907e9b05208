"""Provider profiles: what a target model is and can do."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.domain.formats.targets import Target
from app.domain.messages import Message, TextPart

DEFAULT_CONTEXT_WINDOW = 200_000


@dataclass(frozen=True)
class ProviderProfile:
    """A target provider/model: output shape, tokenizer, context window and capabilities."""

    name: str
    output: Target
    encoding: str
    exact: bool  # False where the provider's tokenizer is not public: counts are estimates
    context_window: int = DEFAULT_CONTEXT_WINDOW
    session_resumption: bool = False
    prompt_cache: bool = False
    description: str = ""


BUILTIN_PROFILES: tuple[ProviderProfile, ...] = (
    ProviderProfile(
        "openai",
        "openai",
        "o200k_base",
        True,
        128_000,
        prompt_cache=True,
        description="OpenAI GPT-4o family (o200k_base).",
    ),
    ProviderProfile(
        "gpt-4o",
        "openai",
        "o200k_base",
        True,
        128_000,
        prompt_cache=True,
        description="OpenAI GPT-4o.",
    ),
    ProviderProfile(
        "gpt-4.1",
        "openai",
        "o200k_base",
        True,
        1_047_576,
        prompt_cache=True,
        description="OpenAI GPT-4.1.",
    ),
    ProviderProfile(
        "o3",
        "openai",
        "o200k_base",
        True,
        200_000,
        prompt_cache=True,
        description="OpenAI o3 reasoning model.",
    ),
    ProviderProfile(
        "openai-responses",
        "responses",
        "o200k_base",
        True,
        272_000,
        prompt_cache=True,
        description="OpenAI Responses API (GPT-5 family: 272,000 input tokens; o200k_base).",
    ),
    ProviderProfile(
        "gpt-4", "openai", "cl100k_base", True, 8_192, description="OpenAI GPT-4 (cl100k_base)."
    ),
    ProviderProfile(
        "gpt-4-turbo",
        "openai",
        "cl100k_base",
        True,
        128_000,
        description="OpenAI GPT-4 Turbo (cl100k_base).",
    ),
    ProviderProfile(
        "gpt-3.5-turbo",
        "openai",
        "cl100k_base",
        True,
        16_385,
        description="OpenAI GPT-3.5 Turbo (cl100k_base).",
    ),
    ProviderProfile(
        "anthropic",
        "anthropic",
        "o200k_base",
        False,
        200_000,
        prompt_cache=True,
        description="Anthropic Messages API (Claude); counts are o200k estimates.",
    ),
    ProviderProfile(
        "gemini",
        "gemini",
        "o200k_base",
        False,
        1_048_576,
        prompt_cache=True,
        description="Google Gemini API (generateContent); counts are o200k estimates.",
    ),
    ProviderProfile(
        "openrouter",
        "openai",
        "o200k_base",
        False,
        128_000,
        description="OpenRouter, OpenAI-shaped; counts are o200k estimates.",
    ),
    ProviderProfile(
        "ollama",
        "openai",
        "o200k_base",
        False,
        32_768,
        description="Ollama, OpenAI-compatible; counts are o200k estimates.",
    ),
    ProviderProfile(
        "claude-code",
        "anthropic",
        "o200k_base",
        False,
        200_000,
        session_resumption=True,
        prompt_cache=True,
        description="Claude Code (keeps its own session memory); estimates.",
    ),
    ProviderProfile(
        "codex-cli",
        "openai",
        "o200k_base",
        False,
        200_000,
        session_resumption=True,
        prompt_cache=True,
        description="Codex CLI (keeps its own session memory); estimates.",
    ),
)

PROFILES: dict[str, ProviderProfile] = {p.name: p for p in BUILTIN_PROFILES}


PRIVATE_TOKENIZER = "{provider}'s tokenizer is not public: counts are {encoding} estimates"
OTHER_ENCODING = "counted with {encoding}, not {provider}'s own {own}"
APPROXIMATE_PARTS = "images, tool calls, tool definitions or opaque blocks are approximate"


def estimate_note(
    profile: ProviderProfile, encoding: str, messages: Sequence[Message], has_tools: bool
) -> str | None:
    """Why a count is not exact (None when it is): a private tokenizer, another encoding, or
    parts whose cost is a documented approximation."""
    notes = []
    if not profile.exact:
        notes.append(PRIVATE_TOKENIZER.format(provider=profile.name, encoding=encoding))
    elif encoding != profile.encoding:
        notes.append(
            OTHER_ENCODING.format(encoding=encoding, provider=profile.name, own=profile.encoding)
        )
    if has_tools or any(not isinstance(p, TextPart) for m in messages for p in m.content):
        notes.append(APPROXIMATE_PARTS)
    return "; ".join(notes) or None


class ProfileOverrides(BaseModel):
    """A session's own profile: these fields replace its provider profile's."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    output: Target | None = None
    encoding: Literal["o200k_base", "cl100k_base"] | None = None
    context_window: int | None = Field(None, ge=1, le=100_000_000)
    session_resumption: bool | None = None
    prompt_cache: bool | None = None


def with_overrides(
    profile: ProviderProfile, overrides: Mapping[str, Any] | None
) -> ProviderProfile:
    """``profile`` with a session's overrides (counts in another encoding are estimates)."""
    if not overrides:
        return profile
    changes = ProfileOverrides.model_validate(overrides).model_dump(exclude_none=True)
    exact = profile.exact and changes.get("encoding", profile.encoding) == profile.encoding
    return replace(profile, exact=exact, **changes)
