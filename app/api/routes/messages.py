"""Messages: append a batch (idempotent), read pages in any shape."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import APIRouter, Header, Query, Request, status

from app.api.bodies import parse_sized, sized
from app.api.deps import DbDep, StateDep, TenantDep
from app.api.openapi import json_body
from app.api.problems import FieldError, from_input_error, invalid, responses, system_prompt
from app.api.schemas import AppendResult, CanonicalPage, MessageItem, MessagesAppend, ProviderPage
from app.domain.errors import FormatError, InvalidInput
from app.domain.formats.convert import Format
from app.domain.formats.documents import provider_document
from app.domain.sessions import SECTION_PATTERN
from app.services.sessions import messages as service
from app.services.sessions.messages import Idempotency, StoredMessage

MAX_SEQ = 2**63 - 1
router = APIRouter(prefix="/v1/sessions/{session_id}/messages", tags=["messages"])


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses=responses(400, 401, 404, 409, 413, 422),
    operation_id="append_messages",
    openapi_extra=json_body(MessagesAppend),
)
async def append_messages(
    session_id: str,
    request: Request,
    state: StateDep,
    db: DbDep,
    tenant: TenantDep,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=255)] = None,
) -> AppendResult:
    """Append a batch to a section in one transaction; every message gets the next `seq`.

    With an `Idempotency-Key`, a retry with the same body returns the first answer and writes
    nothing; the same key with another body is a 409. Keys are remembered for
    `CTXC_IDEMPOTENCY_TTL_SECONDS` (a day) and forgotten with their session; a retry after that
    is a new request, stored again.
    """
    raw = await request.body()
    body = await parse_sized(MessagesAppend, raw)
    if body.system is not None and body.format not in ("anthropic", "gemini"):
        raise invalid(
            [FieldError(path="body.system", message="only for formats anthropic and gemini")]
        )
    system = system_prompt(body.format, body.system, body.instructions)
    idempotency = None
    if idempotency_key is not None:
        # Its fields hold JSON values only: `dict(body)` is its JSON dump, without one long C
        # call over a big body.
        posted = dict(body)
        digest = await sized(len(raw), service.fingerprint, "POST", request.url.path, posted)
        ttl = timedelta(seconds=state.settings.idempotency_ttl_seconds)
        idempotency = Idempotency(idempotency_key, digest, ttl)
    batch = service.Batch(body.format, body.section, body.messages, system, body.metadata)
    try:
        writer = service.Writer(
            db, tenant, state.counter, state.settings.catalog, datetime.now(UTC)
        )
        appended = await service.append_messages(writer, session_id, batch, idempotency)
    except (FormatError, InvalidInput) as exc:
        raise from_input_error(exc) from None
    if not appended.replayed:
        for count in appended.counts:
            for encoding, tokens in count.items():
                state.metrics.tokens.labels(encoding).inc(tokens)
        await state.caught_up(tenant, session_id)
    return AppendResult.model_validate(appended.answer)


def _render(
    fmt: Format, page: list[StoredMessage], next_after: int | None
) -> CanonicalPage | ProviderPage:
    if fmt == "canonical":
        items = [
            MessageItem(
                seq=s.seq,
                section=s.section,
                tokens=s.tokens,
                created_at=s.created_at,
                message=s.message.to_json(),
            )
            for s in page
        ]
        return CanonicalPage(items=items, next_after_seq=next_after)
    found = provider_document(fmt, [(s.seq, s.message) for s in page])
    return ProviderPage(
        format=fmt,
        system=found.system,
        instructions=found.instructions,
        messages=found.messages,
        seqs=found.seqs,
        next_after_seq=next_after,
    )


@router.get("", responses=responses(401, 404, 409, 422), operation_id="list_messages")
async def list_messages(
    session_id: str,
    state: StateDep,
    db: DbDep,
    tenant: TenantDep,
    after_seq: Annotated[int, Query(ge=0, le=MAX_SEQ)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    section: Annotated[str | None, Query(pattern=SECTION_PATTERN)] = None,
    format: Annotated[Format, Query()] = "canonical",
) -> CanonicalPage | ProviderPage:
    """Messages after `after_seq`, in seq order, canonical or in a provider's shape.

    Provider shapes come as one document with `seqs` mapping each message to its stored seq
    (an Anthropic user turn holding several tool results becomes several OpenAI tool messages;
    a Responses assistant turn, its reasoning, message and call items).
    """
    page = await service.read_messages(
        db, tenant, session_id, after_seq, limit, section, state.settings.catalog
    )
    next_after = page[-1].seq if len(page) == limit else None
    return _render(format, page, next_after)
