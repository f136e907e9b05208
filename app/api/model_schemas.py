"""Schemas of the model table (``GET /v1/models``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class ModelRead(BaseModel):
    name: str
    provider: str = Field(description="The provider profile the model is sent as.")
    output: Literal["openai", "anthropic"]
    encoding: str
    exact: bool = Field(description="False where the tokenizer is not public: counts estimate.")
    context_window: int
    declared: bool = Field(description="Declared in `CTXC_MODELS` (else built in).")
    description: str


class ModelList(BaseModel):
    items: list[ModelRead]
