"""Messages: append a batch (idempotent), read pages in any shape."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import anyio
from fastapi import APIRouter, Header, Query, Request, Response, status

from app.api.deps import DbDep, StateDep, TenantDep
from app.api.problems import FieldError, from_input_error, invalid, responses
from app.api.schemas import AppendResult, CanonicalPage, MessageItem, MessagesAppend, ProviderPage
from app.domain.errors import FormatError, InvalidInput
from app.domain.formats.anthropic import to_anthropic
from app.domain.formats.convert import Format, parse_messages
from app.domain.formats.openai import openai_messages
from app.domain.messages import Message
from app.domain.sessions import SECTION_PATTERN
from app.domain.tokens import TokenCounter
from app.services import messages as service
from app.services.messages import Idempotency, StoredMessage

router = APIRouter(prefix="/v1/sessions/{session_id}/messages", tags=["messages"])


def _prepare(
    counter: TokenCounter, body: MessagesAppend
) -> tuple[list[Message], list[dict[str, int]]]:
    """Parse and count a batch (CPU work, run off the event loop)."""
    if body.system is not None and body.format != "anthropic":
        raise invalid([FieldError(path="body.system", message="only for format anthropic")])
    try:
        parsed = parse_messages(body.format, body.messages, body.system)
    except (FormatError, InvalidInput) as exc:
        raise from_input_error(exc) from None
    if body.metadata:
        parsed = [m.model_copy(update={"metadata": body.metadata | m.metadata}) for m in parsed]
    return parsed, service.count_batch(counter, parsed)


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    responses=responses(400, 401, 404, 409, 413, 422),
    operation_id="append_messages",
)
async def append_messages(
    session_id: str,
    body: MessagesAppend,
    request: Request,
    response: Response,
    state: StateDep,
    db: DbDep,
    tenant: TenantDep,
    idempotency_key: Annotated[str | None, Header(min_length=1, max_length=255)] = None,
) -> AppendResult:
    """Append a batch to a section in one transaction; every message gets the next `seq`.

    With an `Idempotency-Key`, a retry with the same body returns the first answer and writes
    nothing; the same key with another body is a 409.
    """
    parsed, counts = await anyio.to_thread.run_sync(_prepare, state.counter, body)
    idempotency = None
    if idempotency_key is not None:
        digest = service.fingerprint("POST", request.url.path, body.model_dump(mode="json"))
        idempotency = Idempotency(idempotency_key, digest)
    code, answer = await service.append_messages(
        db, tenant, session_id, body.section, parsed, counts, idempotency, datetime.now(UTC)
    )
    if code == status.HTTP_201_CREATED:
        for count in counts:
            for encoding, tokens in count.items():
                state.metrics.tokens.labels(encoding).inc(tokens)
    response.status_code = code
    return AppendResult.model_validate(answer)


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
    if fmt == "openai":
        out, seqs = [], []
        for s in page:
            converted = openai_messages(s.message)
            out += converted
            seqs += [s.seq] * len(converted)
        return ProviderPage(format="openai", messages=out, seqs=seqs, next_after_seq=next_after)
    system, turns = to_anthropic([s.message for s in page])
    seqs = [s.seq for s in page if s.message.role != "system"]
    return ProviderPage(
        format="anthropic", system=system, messages=turns, seqs=seqs, next_after_seq=next_after
    )


@router.get("", responses=responses(401, 404, 422), operation_id="list_messages")
async def list_messages(
    session_id: str,
    db: DbDep,
    tenant: TenantDep,
    after_seq: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    section: Annotated[str | None, Query(pattern=SECTION_PATTERN)] = None,
    format: Annotated[Format, Query()] = "canonical",
) -> CanonicalPage | ProviderPage:
    """Messages after `after_seq`, in seq order, canonical or in a provider's shape.

    Provider shapes come as one document with `seqs` mapping each message to its stored seq
    (an Anthropic user turn holding several tool results becomes several OpenAI tool messages).
    """
    page = await service.read_messages(db, tenant, session_id, after_seq, limit, section)
    next_after = page[-1].seq if len(page) == limit else None
    return _render(format, page, next_after)
