"""Originals of what compaction took out of a view: by tool call id, and by sha256.

Compaction steps rewrite the view, never the stored history, so a tool call's original arguments
and result stay in the session (found through the tool part index). A field a session compile
replaced is also kept by the sha256 it reported, once per session, in the same transaction as the
compile: retrievable by hash even after the messages holding it are summarised away.
"""

from __future__ import annotations

from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.compilers.base import StepReport
from app.domain.errors import NotFound
from app.domain.messages import JSONObject, Message, ToolCallPart, ToolResultPart
from app.domain.sessions import SessionPk, TenantId
from app.domain.tool_payloads.compaction import (
    META_KEY,
    PREVIEW_KEY,
    Omitted,
    digests,
    result_fields,
)
from app.services.sessions import require_session
from app.services.sessions.cache import MessageCache
from app.storage import queries
from app.storage.models import PayloadRow, ToolPartRow

Digests = dict[str, tuple[int, str]]
P = TypeVar("P", ToolCallPart, ToolResultPart)
Place = tuple[int, int]  # (seq, part index)


async def keep_originals(
    db: AsyncSession,
    pk: SessionPk,
    steps: Sequence[StepReport],
    now: datetime,
    kept: Container[str] = frozenset(),
) -> list[str]:
    """Store the originals the steps took out that the session does not keep yet (``kept``:
    those it is known to keep, not asked about): the sha256 of each, all kept once the caller's
    transaction commits."""
    omitted = _omitted(steps)
    asked = [sha for sha in omitted if sha not in kept]
    if not asked:
        return list(omitted)
    stored = await queries.stored_payloads(db, pk, asked)
    # In hash order: concurrent compiles then lock the same keys in the same order (no deadlock).
    rows = [
        {"session_pk": pk, "sha256": sha, "value": o.value, "bytes": o.bytes, "created_at": now}
        for sha, o in ((sha, omitted[sha]) for sha in sorted(asked))
        if sha not in stored
    ]
    if rows:
        await queries.add_payloads(db, rows)
    return list(omitted)


def _omitted(steps: Sequence[StepReport]) -> dict[str, Omitted]:
    """What ``steps`` took out, by sha256."""
    return {o.sha256: o for step in steps for o in step.omitted}


@dataclass(frozen=True)
class Known:
    """The originals a session kept when a compile last looked (``MessageCache.payloads``): a
    compile sending the same previews vouches for them, and the statement recording it checks
    they are still there (``compiles.insert_compile``), so nothing asks about them apart. A check
    that finds one missing (a database restored from an older copy) makes the compile ask."""

    cache: MessageCache
    tenant: TenantId
    pk: SessionPk

    def vouched(self, steps: Sequence[StepReport]) -> list[str]:
        """The originals ``steps`` took out that the session kept when last looked."""
        kept = self.cache.payloads
        return sorted(sha for sha in _omitted(steps) if (self.tenant, self.pk, sha) in kept)

    def add(self, shas: Iterable[str]) -> None:
        """Remember ``shas`` as kept (once the transaction that kept them committed)."""
        for sha in shas:
            self.cache.payloads[(self.tenant, self.pk, sha)] = True


@dataclass(frozen=True)
class Result:
    seq: int
    part: ToolResultPart
    fields: Digests | None
    message: Message  # the original message holding it (for its provider shape)


@dataclass(frozen=True)
class ToolCall:
    """One occurrence of a call id: the call (None for a result without one) and its result."""

    call_id: str
    seq: int | None
    call: ToolCallPart | None
    fields: Digests | None
    result: Result | None
    turns: list[int]  # the seq of every assistant message calling this id


@dataclass
class _Occurrence:
    call: Place | None
    result: Place | None = None


def _occurrences(parts: Sequence[ToolPartRow]) -> list[_Occurrence]:
    """Calls paired with their results: a result answers the newest call of its id before it
    (ids may repeat across turns); a second result of one call is not its result."""
    out: list[_Occurrence] = []
    for part in parts:
        place = (part.seq, part.idx)
        if part.kind == "call":
            out.append(_Occurrence(place))
        elif not out or out[-1].call is None:
            out.append(_Occurrence(None, place))
        elif out[-1].result is None:
            out[-1].result = place
    return out


def _pick(found: list[_Occurrence], seq: int | None) -> _Occurrence | None:
    if seq is None:
        return found[-1] if found else None
    for occurrence in found:
        if any(p is not None and p[0] == seq for p in (occurrence.call, occurrence.result)):
            return occurrence
    return None


async def tool_call(
    db: AsyncSession, tenant: TenantId, session_id: str, call_id: str, seq: int | None
) -> ToolCall:
    """The original call and result of ``call_id``: the newest occurrence, or the one whose call
    or result message is at ``seq``."""
    row = await require_session(db, tenant, session_id)
    pk = SessionPk(row.pk)
    found = _occurrences(await queries.tool_parts(db, pk, call_id))
    occurrence = _pick(found, seq)
    if occurrence is None:
        raise NotFound("tool call", call_id if seq is None else f"{call_id} at seq {seq}")
    places = [p for p in (occurrence.call, occurrence.result) if p is not None]
    messages = await _stored(db, pk, [s for s, _ in places])
    call = _part(messages, occurrence.call, ToolCallPart)
    args = call.arguments if call is not None else None
    return ToolCall(
        call_id,
        occurrence.call[0] if occurrence.call else None,
        call,
        digests(args) if isinstance(args, dict) else None,
        _result(messages, occurrence.result),
        [o.call[0] for o in found if o.call],
    )


async def message_at(db: AsyncSession, pk: SessionPk, seq: int) -> Message | None:
    """The message as first stored at ``seq`` (archived by a compaction or not), if any."""
    return (await _stored(db, pk, [seq])).get(seq)


async def _stored(db: AsyncSession, pk: SessionPk, seqs: Sequence[int]) -> dict[int, Message]:
    """The messages as first stored at ``seqs``. A compaction may have archived them (a summary
    may hold the seq now) or rewritten them (persisted tool-payload steps), and a later one may
    have archived that summary or rewrite: the original is the one no compaction wrote."""
    found: dict[int, list[Message]] = {}
    for row in await queries.messages_at(db, pk, seqs):
        found.setdefault(row.seq, []).append(_message(row.role, row.content, row.meta))
    for compaction in await queries.archived_covering(db, pk, seqs):
        for entry in compaction.archived:
            if entry["seq"] in seqs:
                message = _message(entry["role"], entry["content"], entry["metadata"])
                found.setdefault(entry["seq"], []).append(message)
    return {seq: _original(candidates) for seq, candidates in found.items()}


def _original(candidates: Sequence[Message]) -> Message:
    written = [m for m in candidates if _written_by_compaction(m)]
    first = [m for m in candidates if m not in written]
    return (first or written)[0]


def _written_by_compaction(message: Message) -> bool:
    if "compaction_id" in message.metadata:  # a summary
        return True
    return any(
        META_KEY in part.metadata or PREVIEW_KEY in part.metadata for part in message.content
    )


def _message(role: str, content: Any, metadata: Any) -> Message:
    return Message.model_validate({"role": role, "content": content, "metadata": metadata})


def _part(messages: Mapping[int, Message], place: Place | None, kind: type[P]) -> P | None:
    if place is None or place[0] not in messages:
        return None
    content = messages[place[0]].content
    part = content[place[1]] if place[1] < len(content) else None
    return part if isinstance(part, kind) else None


def _result(messages: Mapping[int, Message], place: Place | None) -> Result | None:
    part = _part(messages, place, ToolResultPart)
    if place is None or part is None:
        return None
    fields: JSONObject | None = result_fields(part)
    found = digests(fields) if fields is not None else None
    return Result(place[0], part, found, messages[place[0]])


async def payload(db: AsyncSession, tenant: TenantId, session_id: str, sha256: str) -> PayloadRow:
    """An original field value a compile of this session took out, by its sha256."""
    row = await require_session(db, tenant, session_id)
    found = await queries.payload(db, SessionPk(row.pk), sha256)
    if found is None:
        raise NotFound("payload", sha256)
    return found
