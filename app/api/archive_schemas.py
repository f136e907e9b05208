"""Bodies of the archive: compactions and what they archived, and the originals of tool calls
and payloads, as stored or in a provider's shape (`?format=`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, Field

from app.api.compile_schemas import CompactionRead
from app.api.schemas import Body
from app.domain.formats.targets import Target
from app.domain.messages import JSONObject


class ArchivedDocument(BaseModel):
    """The archived messages as one provider document; ``seqs[i]`` is the stored seq of
    ``messages[i]``."""

    format: Target
    system: str | list[JSONObject] | JSONObject | None = Field(
        None,
        description="Anthropic (`system`) and Gemini (`systemInstruction`): the archived system "
        "messages, if any.",
    )
    instructions: str | None = Field(
        None, description="Responses: the archived system prompt, if any."
    )
    messages: list[JSONObject]
    seqs: list[int]


class LossEntryRead(BaseModel):
    kind: str = Field(
        max_length=32, description="goal, rule, fact, preference, error, decision, file or note."
    )
    text: str = Field(max_length=4_000, description="The head of the entry's text.")
    seqs: list[int] = Field(
        max_length=64,
        description="The messages it came from: `ctxc_recall` and the archive read them.",
    )


class LossRead(BaseModel):
    """What a ledger summary kept, merged (folded with an entry saying the same), replaced (by a
    later value of the same subject) and dropped (for want of room), entry by entry."""

    kept: list[LossEntryRead]
    merged: list[LossEntryRead]
    replaced: list[LossEntryRead]
    dropped: list[LossEntryRead]
    counts: dict[Literal["kept", "merged", "replaced", "dropped"], int]
    notes: list[str] = Field(default_factory=list)


class CompactionDocument(CompactionRead):
    archived: ArchivedDocument
    loss: LossRead | None = Field(
        None, description="The loss report, when the summariser gave one (the ledger does)."
    )


class ToolCallShapes(BaseModel):
    """A tool call's originals in a provider's shape."""

    format: Target
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


class FieldDigest(BaseModel):
    bytes: int = Field(description="Its size as compaction measures it.")
    sha256: str = Field(description="The sha256 of its JSON: GET .../payloads/{sha256}.")


class ToolResultRead(BaseModel):
    seq: int
    content: str | list[JSONObject] = Field(description="As stored (canonical parts).")
    is_error: bool | None
    fields: dict[str, FieldDigest] | None = Field(
        description="Its fields (a JSON object's keys, else `content`); null for a result with "
        "more than text."
    )


class ToolCallRead(BaseModel):
    call_id: str
    seq: int | None = Field(description="The assistant message holding the call.")
    name: str | None
    arguments: JSONObject | str | None = Field(description="As stored.")
    argument_fields: dict[str, FieldDigest] | None
    result: ToolResultRead | None
    turns: list[int] = Field(
        description="The seq of every assistant message calling this id (ids may repeat; "
        "`?seq=` picks one)."
    )


class PayloadRead(BaseModel):
    sha256: str
    bytes: int
    value: Any = Field(description="The original field value, exactly as stored.")


class ArchivedMessage(BaseModel):
    seq: int
    section: str
    tokens: dict[str, int]
    created_at: datetime
    message: JSONObject = Field(description="Exactly as it was stored (canonical shape).")


class CompactionDetail(CompactionRead):
    archived: list[ArchivedMessage]
    loss: LossRead | None = Field(
        None, description="The loss report, when the summariser gave one (the ledger does)."
    )


class CompactionList(BaseModel):
    items: list[CompactionRead]


class CompactRequest(Body):
    kind: Literal["session", "micro", "full", "tool_payloads"] = Field(
        description="`session`: the oldest rounds down to the low-water mark; `micro`: the "
        "oldest `micro_batch_groups` rounds; `full`: every round that may be summarised; "
        "`tool_payloads`: the tool-payload `steps`, persisted in the stored messages."
    )
    policy: JSONObject | None = Field(
        None, description="Fields over the session's compaction policy, for this run."
    )
    steps: list[Any] | None = Field(
        None,
        description="For `tool_payloads`: `tool_compaction` and/or `compact_tool_results`, "
        "with params, as in a compiler spec (default: both, with their defaults).",
    )
