"""The session document (``ctxc.session/v2``) and its streamed form, one JSON object per line.

One document: ``{"format", "session", "messages", "compactions", "payloads", "compiles"}``.
Streamed (``application/x-ndjson``): the header ``{"format", "session"}`` on the first line, then
one record per line, each with its ``type``: ``message``, ``compaction``, ``payload`` or
``compile`` (messages in seq order). ``ctxc.session/v1`` (session fields and messages) still
imports.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from app.api.archive_schemas import LossRead
from app.api.schemas import ExportedMessage, ExportedSession, JSONObject, SessionExport
from app.api.timestamps import StorableTime
from app.domain.summaries import SummarizerReason

V1, V2 = "ctxc.session/v1", "ctxc.session/v2"
NDJSON = "application/x-ndjson"
MAX_SEQ = 2**63 - 1
Seq = Annotated[int, Field(ge=1, le=MAX_SEQ)]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SessionFieldsV2(ExportedSession):
    last_seq: int = Field(0, ge=0, le=MAX_SEQ, description="The highest seq handed out.")
    cursor_seq: Seq | None = Field(None, description="What the provider session holds.")
    provider_session_id: str | None = Field(None, max_length=256, pattern=r"^[^\x00]*$")


class ArchivedEntry(_Body):
    """A message as a compaction archived it, exactly as stored."""

    seq: Seq
    section: str = Field(max_length=64, pattern=r"^[^\x00]+$")
    role: str
    name: str | None = None
    content: list[JSONObject]
    metadata: JSONObject
    tokens: dict[Literal["o200k_base", "cl100k_base"], Annotated[int, Field(ge=0, le=2**31 - 1)]]
    created_at: StorableTime


class ExportedEconomics(_Body):
    """The cache-economic gate's figures a compaction passed (``CompactionEconomics``)."""

    shed_tokens: int = Field(ge=0, le=2**31 - 1)
    expected_turns: int = Field(ge=0, le=2**31 - 1)
    rewrite_tokens: int = Field(ge=0, le=2**31 - 1)
    saved: float = Field(ge=0, allow_inf_nan=False)
    cost: float = Field(ge=0, allow_inf_nan=False)
    applied: bool


class ExportedCompaction(_Body):
    id: str = Field(max_length=36, pattern=r"^[0-9a-f-]+$")
    kind: str = Field(max_length=16, pattern=r"^[a-z_]+$")
    reason: str = Field(max_length=32, pattern=r"^[a-z_]+$")
    seq_from: Seq | None = None
    seq_to: Seq | None = None
    summary_seq: Seq | None = None
    tokens_before: int = Field(ge=0, le=2**31 - 1)
    tokens_after: int = Field(ge=0, le=2**31 - 1)
    summary_tokens: int = Field(ge=0, le=2**31 - 1)
    cache_rewrite_tokens: int = Field(ge=0, le=2**31 - 1)
    resets_provider_session: bool = False
    summarizer: str | None = Field(None, max_length=128, pattern=r"^[^\x00]*$")
    summarizer_reason: SummarizerReason | None = None
    created_at: StorableTime
    archived: list[ArchivedEntry] = Field(min_length=1)
    loss: LossRead | None = None
    prepared_at: StorableTime | None = None
    economics: ExportedEconomics | None = None


class ExportedPayload(_Body):
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    value: Any
    bytes: int = Field(ge=0)
    created_at: StorableTime


class ExportedCompile(_Body):
    id: str = Field(max_length=36, pattern=r"^[0-9a-f-]+$")
    mode: Literal["full", "delta"]
    seq_from: Seq | None = None
    seq_to: Seq | None = None
    token_total: int = Field(ge=0, le=2**31 - 1)
    created_at: StorableTime
    acknowledged_at: StorableTime | None = None
    reported_at: StorableTime | None = None
    usage: JSONObject | None = None
    error_kind: str | None = Field(None, max_length=32, pattern=r"^[a-z_]+$")
    # What a reported count of the compile teaches (app/services/sessions/calibration.py), so a
    # compile acknowledged after the import still calibrates.
    estimate: int | None = Field(None, ge=1, le=2**31 - 1, description="Its raw estimate.")
    count_key: str | None = Field(
        None, max_length=255, pattern=r"^[^\x00]+$", description="What its count calibrates."
    )


class SessionExportV2(_Body):
    """A session's whole context: importing it elsewhere gives a session that reads the same."""

    format: Literal["ctxc.session/v2"] = "ctxc.session/v2"
    session: SessionFieldsV2
    messages: list[ExportedMessage] = Field(max_length=1_000_000)
    compactions: list[ExportedCompaction] = Field(default_factory=list)
    payloads: list[ExportedPayload] = Field(default_factory=list)
    compiles: list[ExportedCompile] = Field(default_factory=list)


class Header(_Body):
    """The first line of a streamed document."""

    format: Literal["ctxc.session/v2"]
    session: SessionFieldsV2


class MessageLine(ExportedMessage):
    type: Literal["message"]


class CompactionLine(ExportedCompaction):
    type: Literal["compaction"]


class PayloadLine(ExportedPayload):
    type: Literal["payload"]


class CompileLine(ExportedCompile):
    type: Literal["compile"]


Line = Annotated[
    MessageLine | CompactionLine | PayloadLine | CompileLine, Field(discriminator="type")
]
LINE: TypeAdapter[Line] = TypeAdapter(Line)
DOCUMENT: TypeAdapter[SessionExportV2 | SessionExport] = TypeAdapter(
    Annotated[SessionExportV2 | SessionExport, Field(discriminator="format")]
)
# The record types in the order of a document's lists, with the list that holds them.
LISTS = (
    ("message", "messages"),
    ("compaction", "compactions"),
    ("payload", "payloads"),
    ("compile", "compiles"),
)

Record = tuple[tuple[str | int, ...], str, JSONObject]  # (where, type, fields)


def document_records(document: SessionExportV2 | SessionExport) -> Iterator[Record]:
    """A whole document as the records a stream would hold, each with its place."""
    for kind, field in LISTS:
        for i, item in enumerate(getattr(document, field, [])):
            yield (field, i), kind, _fields(item)


def line_record(number: int, line: Line) -> Record:
    return (number,), line.type, _fields(line)


def _fields(item: BaseModel) -> JSONObject:
    """A record's fields with times kept as datetimes (their offset intact); archived messages
    as a compaction stores them."""
    fields = {name: getattr(item, name) for name in type(item).model_fields if name != "type"}
    if isinstance(item, ExportedCompaction):
        fields["archived"] = [
            e.model_dump() | {"created_at": e.created_at.isoformat()} for e in item.archived
        ]
        fields["loss"] = item.loss.model_dump() if item.loss is not None else None
        fields["economics"] = None if item.economics is None else item.economics.model_dump()
    return fields
