"""Answers of the archive in a provider's shape: a compaction's archived messages and a tool
call's originals, read with `?format=openai` or `?format=anthropic`."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from app.api.schemas import CompactionRead, FieldDigest
from app.domain.messages import JSONObject


class ArchivedDocument(BaseModel):
    """The archived messages as one provider document; ``seqs[i]`` is the stored seq of
    ``messages[i]``."""

    format: Literal["openai", "anthropic"]
    system: str | list[JSONObject] | None = Field(
        None, description="Anthropic: the archived system messages, if any."
    )
    messages: list[JSONObject]
    seqs: list[int]


class CompactionDocument(CompactionRead):
    archived: ArchivedDocument


class ToolCallShapes(BaseModel):
    """A tool call's originals in a provider's shape."""

    format: Literal["openai", "anthropic"]
    call_id: str
    seq: int | None = Field(description="The assistant message holding the call.")
    call: JSONObject | None = Field(
        description="OpenAI: the assistant message's `tool_calls` entry; Anthropic: the "
        "`tool_use` block. Null for a result without its call."
    )
    argument_fields: dict[str, FieldDigest] | None
    result_seq: int | None = Field(description="The message holding the result.")
    result: JSONObject | None = Field(
        description="OpenAI: the `tool` message; Anthropic: the `tool_result` block. Null "
        "before the result is stored."
    )
    result_fields: dict[str, FieldDigest] | None
    turns: list[int] = Field(
        description="The seq of every assistant message calling this id (ids may repeat; "
        "`?seq=` picks one)."
    )
