"""Export a session's whole context as one document, and import such a document."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import InvalidInput
from app.domain.formats.convert import canonical_messages
from app.domain.limits import message_problems
from app.domain.models import Catalog
from app.domain.sessions import SessionPk, TenantId
from app.domain.tokens import TokenCounter
from app.services.messages import NewMessage, message_rows, stored_message
from app.services.sessions import (
    SessionView,
    add_session,
    readable_profile,
    require_session,
    view,
)
from app.storage import queries
from app.storage.models import SessionRow

SESSION_FIELDS = (
    "id", "metadata", "system_prompt", "response_format", "provider", "profile", "resume_key",
    "context_window", "compiler", "compaction", "created_at", "updated_at",
)  # fmt: skip
EXPORT_PAGE = 5_000


@dataclass(frozen=True)
class Imported:
    session: dict[str, Any]
    messages: list[dict[str, Any]]


async def export_session(
    db: AsyncSession, tenant: TenantId, session_id: str, catalog: Catalog
) -> dict[str, Any]:
    """The session's fields and every stored message, canonical, with seq, section and time."""
    row = await require_session(db, tenant, session_id)
    encoding = readable_profile(row, catalog).encoding
    messages: list[dict[str, Any]] = []
    after = 0
    while page := await queries.message_page(db, SessionPk(row.pk), after, EXPORT_PAGE, None):
        for r in page:
            stored = stored_message(r, encoding)
            messages.append(
                {
                    "seq": r.seq,
                    "section": r.section,
                    "created_at": r.created_at,
                    "message": stored.message.to_json(),
                }
            )
        after = page[-1].seq
    return {"session": _session_fields(row), "messages": messages}


def _session_fields(row: SessionRow) -> dict[str, Any]:
    values = {
        "id": row.id, "metadata": row.meta, "system_prompt": row.system_prompt,
        "response_format": row.response_format, "provider": row.provider, "profile": row.profile,
        "resume_key": row.resume_key, "context_window": row.context_window,
        "compiler": row.compiler, "compaction": row.compaction_policy,
        "created_at": row.created_at, "updated_at": row.updated_at,
    }  # fmt: skip
    return {name: values[name] for name in SESSION_FIELDS}


def _prepare(counter: TokenCounter, document: Imported) -> list[NewMessage]:
    messages = canonical_messages([m["message"] for m in document.messages])
    problems = message_problems(messages)
    if problems:
        raise InvalidInput(problems)
    return [
        NewMessage(m["seq"], m["section"], message, counter.count_all(message), m["created_at"])
        for m, message in zip(document.messages, messages, strict=True)
    ]


async def import_session(
    db: AsyncSession,
    counter: TokenCounter,
    tenant: TenantId,
    document: Imported,
    catalog: Catalog,
) -> SessionView:
    """Recreate an exported session under this tenant, seqs and times as they were."""
    fields = document.session
    new = await anyio.to_thread.run_sync(_prepare, counter, document)
    columns = {k: v for k, v in fields.items() if k not in ("id", "created_at", "updated_at")}
    row = await add_session(
        db, tenant, fields["id"], columns, fields["created_at"], fields["updated_at"],
        new[-1].seq if new else 0, catalog,
    )  # fmt: skip
    db.add_all(message_rows(SessionPk(row.pk), new))
    await db.commit()
    return await view(db, row, catalog)
