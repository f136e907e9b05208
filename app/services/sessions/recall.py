"""The recall tool run for the caller: the model's call in, one page of the original out.

It reads what ``originals`` reads (a tool call's stored result, or a payload field a compile
kept by sha256) and answers in the tool-result shape the caller names, ready to append. What the
model got wrong (arguments it cannot have meant, a pointer to nothing) is a tool result saying
so, flagged as an error where the shape can flag one, so the model always gets an answer; the
answer is not stored (the caller appends the call and its result like any other tool's).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import NotFound
from app.domain.messages import JSONObject, Message
from app.domain.models import Catalog
from app.domain.recall import (
    BadArguments,
    Page,
    Pointer,
    page_of,
    page_text,
    parse_arguments,
    tool_result,
)
from app.domain.sessions import SessionPk, TenantId
from app.domain.tokens import TokenCounter
from app.domain.tool_payloads.compaction import payload_json, textual
from app.services.sessions import originals, require_session, session_profile
from app.services.tenancy import cpu

# Texts up to this many characters are paged on the event loop (counting a few of them takes
# less than a worker thread round trip).
LIGHT_CHARS = 16_384


@dataclass(frozen=True)
class Call:
    """The model's call of the recall tool, as the caller passes it on."""

    shape: str | None  # None: the session's own output shape
    name: str
    tool_call_id: str | None
    arguments: JSONObject | str
    max_tokens: int


@dataclass(frozen=True)
class Recalled:
    shape: str
    result: JSONObject  # the tool result, in ``shape``
    is_error: bool
    page: Page | None = None
    pointer: Pointer | None = None


class _Missing(Exception):
    """What the model asked for is not there (the message says what)."""


def _pending(pending: Sequence[tuple[int, Message]], pointer: Pointer) -> str | None:
    """The text of the newest pending result the pointer names (None: none is pending)."""
    for seq, message in reversed(pending):
        if pointer.seq is not None and seq != pointer.seq:
            continue
        for part in message.tool_results:
            if part.call_id == pointer.call_id:
                text = textual(part)
                if text is not None:
                    return text
    return None


async def _text(
    db: AsyncSession,
    tenant: TenantId,
    session_id: str,
    pk: SessionPk,
    pointer: Pointer,
    pending: Sequence[tuple[int, Message]],
) -> str:
    if pointer.call_id is not None:
        waiting = _pending(pending, pointer)
        if waiting is not None:
            return waiting
    if pointer.sha256 is not None:
        try:
            row = await originals.payload(db, tenant, session_id, pointer.sha256)
        except NotFound:
            raise _Missing(f"no payload with sha256 {pointer.sha256} in this session") from None
        return row.value if isinstance(row.value, str) else payload_json(row.value)
    if pointer.call_id is None:
        assert pointer.seq is not None
        return await _message_text(db, pk, pointer.seq, pending)
    where = f"tool call {pointer.call_id!r}" + (f" at seq {pointer.seq}" if pointer.seq else "")
    try:
        found = await originals.tool_call(db, tenant, session_id, pointer.call_id, pointer.seq)
    except NotFound:
        raise _Missing(f"no {where} in this session") from None
    if found.result is None:
        raise _Missing(f"the {where} has no stored result")
    text = textual(found.result.part)
    if text is None:
        raise _Missing(f"the result of the {where} holds more than text; it was never shortened")
    return text


async def _message_text(
    db: AsyncSession,
    pk: SessionPk,
    seq: int,
    pending: Sequence[tuple[int, Message]],
) -> str:
    """The text of the message at ``seq`` as first stored (archived or not), or pending."""
    message = dict(pending).get(seq) or await originals.message_at(db, pk, seq)
    if message is None:
        raise _Missing(f"no message at seq {seq} in this session")
    if not message.text:
        raise _Missing(f"the message at seq {seq} holds no text")
    return message.text


async def recall(
    db: AsyncSession,
    counter: TokenCounter,
    catalog: Catalog,
    tenant: TenantId,
    session_id: str,
    call: Call,
    pending: Sequence[Message] = (),
) -> Recalled:
    """One page of the original ``call`` asks for, as a tool result (NotFound: no session).
    ``pending``: messages a compile gave after the stored ones, not stored yet (the sidecar's
    turn), at the seqs that compile gave them."""
    row = await require_session(db, tenant, session_id)
    placed = [(row.last_seq + n, message) for n, message in enumerate(pending, start=1)]
    profile = session_profile(row, catalog)
    shape = call.shape or profile.output

    def answer(text: str, is_error: bool = False) -> JSONObject:
        return tool_result(shape, call.name, call.tool_call_id, text, is_error)

    try:
        pointer = parse_arguments(call.arguments)
        text = await _text(db, tenant, session_id, SessionPk(row.pk), pointer, placed)
    except (BadArguments, _Missing) as err:
        return Recalled(shape, answer(f"{call.name}: {err}", True), True)
    if pointer.offset > len(text):
        message = f"offset {pointer.offset} is past the end of the text ({len(text)} characters)"
        return Recalled(shape, answer(f"{call.name}: {message}", True), True, pointer=pointer)
    count = counter.encoder(profile.encoding).count
    if len(text) - pointer.offset <= LIGHT_CHARS:
        page = page_of(text, pointer.offset, call.max_tokens, count)
    else:
        page = await cpu.run_sync(page_of, text, pointer.offset, call.max_tokens, count)
    return Recalled(shape, answer(page_text(page, call.name, pointer)), False, page, pointer)
