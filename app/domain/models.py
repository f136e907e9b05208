"""Model names: a table of current models, each resolving to a provider profile with its window.

A name given where a provider is expected resolves in this order:

1. a provider profile name (``openai``, ``anthropic``, ``claude-code``...), as it is;
2. a model name of the table (declared models first, then built-in ones), exactly;
3. a model name followed by one snapshot suffix: ``-YYYY-MM-DD`` (OpenAI), ``-YYYYMMDD``
   (Anthropic), ``@YYYYMMDD`` (Vertex AI), ``-MMDD`` (older OpenAI snapshots) or ``-latest``
   (Anthropic aliases). The suffix is read from the end with plain string checks, so at most
   one lookup per suffix form is made.

The resolved profile is the model's provider profile with the model's name, window and encoding.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from app.domain.errors import UnknownName
from app.domain.providers import PROFILES, ProviderProfile

Encoding = Literal["o200k_base", "cl100k_base"]
HOW_TO_DECLARE = (
    "declare the model in CTXC_MODELS, or give a provider profile "
    "(GET /v1/providers) with its `context_window`"
)


@dataclass(frozen=True)
class Model:
    """A model: the profile it is sent as, its context window and, when it differs, encoding."""

    name: str
    provider: str  # a provider profile name
    context_window: int
    encoding: str | None = None  # None: the profile's
    description: str = ""
    declared: bool = False  # from CTXC_MODELS


def _openai(name: str, window: int, what: str, profile: str = "openai") -> Model:
    # A model with a profile of its own (gpt-4o, gpt-4: encoding, prompt cache) is sent as it.
    return Model(name, name if name in PROFILES else profile, window, None, f"OpenAI {what}.")


def _claude(name: str, what: str) -> Model:
    return Model(name, "anthropic", 200_000, None, f"Anthropic {what}; counts are estimates.")


def _gemini(name: str, what: str) -> Model:
    return Model(name, "gemini", 1_048_576, None, f"Google {what}; counts are estimates.")


# GPT-5 models take 400,000 tokens in all, of which at most 272,000 of input: the window here is
# what a request may hold. Claude models are given their standard 200,000 (1M is a beta option).
BUILTIN_MODELS: Final[tuple[Model, ...]] = (
    _openai("gpt-5.1", 272_000, "GPT-5.1 (272,000 input tokens of 400,000)"),
    _openai("gpt-5", 272_000, "GPT-5 (272,000 input tokens of 400,000)"),
    _openai("gpt-5-mini", 272_000, "GPT-5 mini (272,000 input tokens of 400,000)"),
    _openai("gpt-5-nano", 272_000, "GPT-5 nano (272,000 input tokens of 400,000)"),
    _openai("gpt-5-codex", 272_000, "GPT-5-Codex (272,000 input tokens of 400,000)"),
    _openai("gpt-5-chat-latest", 128_000, "GPT-5 in ChatGPT"),
    _openai("gpt-4.1", 1_047_576, "GPT-4.1"),
    _openai("gpt-4.1-mini", 1_047_576, "GPT-4.1 mini"),
    _openai("gpt-4.1-nano", 1_047_576, "GPT-4.1 nano"),
    _openai("gpt-4o", 128_000, "GPT-4o"),
    _openai("gpt-4o-mini", 128_000, "GPT-4o mini"),
    _openai("chatgpt-4o-latest", 128_000, "GPT-4o in ChatGPT"),
    _openai("o4-mini", 200_000, "o4-mini reasoning model"),
    _openai("o3", 200_000, "o3 reasoning model"),
    _openai("o3-pro", 200_000, "o3-pro reasoning model"),
    _openai("o3-mini", 200_000, "o3-mini reasoning model"),
    _openai("o1", 200_000, "o1 reasoning model"),
    _openai("o1-pro", 200_000, "o1-pro reasoning model"),
    _openai("o1-mini", 128_000, "o1-mini reasoning model"),
    _openai("gpt-4-turbo", 128_000, "GPT-4 Turbo (cl100k_base)"),
    _openai("gpt-4", 8_192, "GPT-4 (cl100k_base)"),
    _openai("gpt-4-32k", 32_768, "GPT-4 32k (cl100k_base)", "gpt-4"),
    _openai("gpt-3.5-turbo", 16_385, "GPT-3.5 Turbo (cl100k_base)"),
    _claude("claude-opus-4-5", "Claude Opus 4.5"),
    _claude("claude-sonnet-4-5", "Claude Sonnet 4.5"),
    _claude("claude-haiku-4-5", "Claude Haiku 4.5"),
    _claude("claude-opus-4-1", "Claude Opus 4.1"),
    _claude("claude-opus-4-0", "Claude Opus 4"),
    _claude("claude-opus-4", "Claude Opus 4"),
    _claude("claude-sonnet-4-0", "Claude Sonnet 4"),
    _claude("claude-sonnet-4", "Claude Sonnet 4"),
    _claude("claude-3-7-sonnet", "Claude Sonnet 3.7"),
    _claude("claude-3-5-sonnet", "Claude Sonnet 3.5"),
    _claude("claude-3-5-haiku", "Claude Haiku 3.5"),
    _claude("claude-3-opus", "Claude Opus 3"),
    _claude("claude-3-haiku", "Claude Haiku 3"),
    _gemini("gemini-2.5-pro", "Gemini 2.5 Pro"),
    _gemini("gemini-2.5-flash", "Gemini 2.5 Flash"),
)


class ModelDeclaration(BaseModel):
    """One model of ``CTXC_MODELS``: the profile (or built-in model) it is sent as, its window
    and encoding (both default to that profile's or model's)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    provider: str = Field(min_length=1, description="A provider profile or a built-in model.")
    context_window: int | None = Field(None, ge=1, le=100_000_000)
    encoding: Encoding | None = None
    description: str = ""


@dataclass(frozen=True)
class Catalog:
    """Provider profiles and models by name: what a ``provider`` field may name."""

    models: Mapping[str, Model]

    def model(self, name: str) -> Model | None:
        """The model called ``name``, exactly or with one snapshot suffix."""
        found = self.models.get(name)
        if found is not None:
            return found
        for base in snapshot_bases(name):
            found = self.models.get(base)
            if found is not None:
                return found
        return None

    def resolve(self, name: str, field: str = "provider") -> ProviderProfile:
        """The profile a provider field names; UnknownName says how to declare a model."""
        profile = PROFILES.get(name)
        if profile is not None:
            return profile
        model = self.model(name)
        if model is None:
            raise UnknownModel(name, field)
        return model_profile(model, name)


class UnknownModel(UnknownName):
    """A provider field naming neither a profile nor a known model."""

    def __init__(self, name: str, field: str) -> None:
        profiles = sorted(PROFILES)
        detail = (
            f"unknown provider profile or model {name!r}: {HOW_TO_DECLARE}; "
            f"profiles: {', '.join(profiles)}; models: GET /v1/models"
        )
        super().__init__("provider profile or model", name, profiles, field, detail)


def model_profile(model: Model, name: str) -> ProviderProfile:
    """The model's provider profile with the model's window and encoding, called ``name``."""
    base = PROFILES[model.provider]
    encoding = model.encoding or base.encoding
    return replace(
        base,
        name=name,
        encoding=encoding,
        exact=base.exact and encoding == base.encoding,
        context_window=model.context_window,
        description=model.description or base.description,
    )


BUILTIN_CATALOG: Final = Catalog({m.name: m for m in BUILTIN_MODELS})


def build_catalog(declared: Mapping[str, ModelDeclaration]) -> Catalog:
    """The built-in table with the declared models over it; ValueError names each bad entry."""
    problems, models = [], {m.name: m for m in BUILTIN_MODELS}
    for name, entry in declared.items():
        try:
            models[name] = _declared_model(name, entry)
        except ValueError as exc:
            problems.append(f"CTXC_MODELS[{name!r}]: {exc}")
    if problems:
        raise ValueError("; ".join(problems))
    return Catalog(models)


def _declared_model(name: str, entry: ModelDeclaration) -> Model:
    if not name or name in PROFILES:
        raise ValueError("a model name must be non-empty and not a provider profile's name")
    if entry.provider in PROFILES:
        base = PROFILES[entry.provider]
        provider, window, encoding = base.name, base.context_window, None
    else:
        known = BUILTIN_CATALOG.model(entry.provider)
        if known is None:
            raise ValueError(
                f"provider {entry.provider!r} is neither a provider profile "
                f"({', '.join(sorted(PROFILES))}) nor a built-in model"
            )
        provider, window, encoding = known.provider, known.context_window, known.encoding
    return Model(
        name,
        provider,
        entry.context_window or window,
        entry.encoding or encoding,
        entry.description or f"Declared in CTXC_MODELS ({entry.provider}).",
        declared=True,
    )


def snapshot_bases(name: str) -> Iterable[str]:
    """``name`` without each snapshot suffix it ends with, longest base first."""
    if name.endswith("-latest"):
        yield name[: -len("-latest")]
    if _is_mmdd(name[-4:]) and name[-5:-4] == "-":
        yield name[:-5]
    if _is_yyyymmdd(name[-8:]) and name[-9:-8] in ("-", "@"):
        yield name[:-9]
    tail = name[-11:]
    dashes = len(tail) == 11 and tail[0] == tail[5] == tail[8] == "-"
    if dashes and _is_yyyymmdd(tail[1:5] + tail[6:8] + tail[9:]):
        yield name[:-11]


def _is_yyyymmdd(text: str) -> bool:
    return len(text) == 8 and text.isascii() and text.isdigit() and _is_mmdd(text[4:])


def _is_mmdd(text: str) -> bool:
    if len(text) != 4 or not (text.isascii() and text.isdigit()):
        return False
    return 1 <= int(text[:2]) <= 12 and 1 <= int(text[2:]) <= 31
