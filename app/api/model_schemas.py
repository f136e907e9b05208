"""Bodies of the model table, the provider profiles and token counting."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from app.api.schemas import INSTRUCTIONS, SYSTEM, Body, JSONObject, SystemPrompt
from app.domain.formats.convert import Format
from app.domain.formats.targets import Target


class ModelRead(BaseModel):
    name: str
    provider: str = Field(description="The provider profile the model is sent as.")
    output: Target
    encoding: str
    exact: bool = Field(description="False where the tokenizer is not public: counts estimate.")
    context_window: int
    declared: bool = Field(description="Declared in `CTXC_MODELS` (else built in).")
    description: str


class ModelList(BaseModel):
    items: list[ModelRead]


class TokenCount(Body):
    format: Format = "openai"
    messages: list[Any] = Field(max_length=100_000)
    system: SystemPrompt = Field(None, description=SYSTEM)
    instructions: str | None = Field(None, description=INSTRUCTIONS)
    provider: str | None = Field(
        None, description="Profile or model whose encoding counts (GET /v1/models)."
    )
    encoding: Literal["o200k_base", "cl100k_base"] | None = Field(
        None, description="Overrides the profile's encoding."
    )
    tools: list[JSONObject] | None = Field(None, description="Tool definitions, counted apart.")


class TokenCountResult(BaseModel):
    provider: str
    encoding: str
    exact: bool
    note: str | None
    messages: list[int] = Field(description="Each message's tokens, overhead included.")
    tools: int
    reply_priming: int
    total: int


class ProviderRead(BaseModel):
    name: str
    output: Target
    encoding: str
    exact: bool = Field(description="False where the tokenizer is not public: counts estimate.")
    context_window: int
    session_resumption: bool
    prompt_cache: bool
    description: str


class ProviderList(BaseModel):
    items: list[ProviderRead]
    default: str
