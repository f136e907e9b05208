"""Tool-payload compaction persisted: ``POST /v1/sessions/{id}/compact`` with kind
``tool_payloads``.

The compile steps ``tool_compaction`` and ``compact_tool_results`` normally rewrite only the
view. Run this way they rewrite the stored messages themselves (recounted), in one transaction
with a compaction record whose archive holds each rewritten message exactly as it was stored,
and with the payloads they took out kept by sha256. The same rules hold: the newest API round,
pinned rounds and calls without a result are left as they are, and a message is only rewritten
when that makes it smaller.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from app.domain.compilers.base import Compiler, Item, Snapshot
from app.domain.compilers.registry import build
from app.domain.compilers.spec import parse_spec
from app.domain.errors import Conflict, InvalidInput, NotFound, Path
from app.domain.sessions import SessionPk, TenantId
from app.domain.tokens import count_message
from app.services.compaction import (
    Done,
    Where,
    archived,
    in_place_event,
    stored_counts,
    stored_items,
)
from app.services.compaction.compactor import Compactor
from app.services.sessions import events, require_session, session_profile
from app.services.sessions.originals import keep_originals
from app.services.tenancy import cpu
from app.storage import queries
from app.storage.models import CompactionRow, MessageRow

STEPS = frozenset({"tool_compaction", "compact_tool_results"})
DEFAULT_STEPS: list[Any] = ["tool_compaction", "compact_tool_results"]
KIND = "tool_payloads"


def _compiler(steps: list[Any] | None) -> Compiler:
    """The steps over the stored history in seq order; problems are located under ``steps``."""
    raw = {
        "base": {"name": "all_sections", "params": {"order": "seq"}},
        "decorators": steps if steps is not None else DEFAULT_STEPS,
    }
    try:
        spec = parse_spec(raw, ())
        problems = [
            (("decorators", n, "name"), f"only {sorted(STEPS)} can be persisted")
            for n, part in enumerate(spec.decorators)
            if part.name not in STEPS
        ]
        if problems or not spec.decorators:
            raise InvalidInput(problems or [(("decorators",), "give at least one step")])
        return build(spec, prefix="steps")
    except InvalidInput as err:
        raise InvalidInput([(_under_steps(p), m) for p, m in err.problems]) from None


def _under_steps(path: Path) -> Path:
    """``steps[n]...`` for the spec's ``decorators[n]...`` (the request names the list steps)."""
    rest = list(path)
    while rest and rest[0] in ("steps", "decorators"):
        rest.pop(0)
    return ("steps", *rest)


async def compact_payloads_now(
    compactor: Compactor, tenant: TenantId, session_id: str, steps: list[Any] | None
) -> Done:
    """Run the tool-payload steps on the stored history and keep what they rewrote."""
    db, now = compactor.db, compactor.now
    compiler = _compiler(steps)
    session = await require_session(db, tenant, session_id)
    pk = SessionPk(session.pk)
    profile = session_profile(session, compactor.catalog)
    encoder = compactor.counter.encoder(profile.encoding)
    if not await queries.lock_session(db, pk):
        raise NotFound("session", session_id)
    rows = {r.seq: r for r in await queries.all_messages(db, pk)}
    items = tuple(stored_items(list(rows.values()), profile.encoding))
    snapshot = Snapshot(
        items=items,
        tenant=tenant,
        now=now,
        session_id=session.id,
        count=lambda m: count_message(m, encoder),
    )
    compiled = await cpu.run_sync(compiler, snapshot)
    touched = sorted({t.seq for step in compiled.steps for t in step.touched})
    if not touched:
        raise Conflict("nothing to compact: no tool payload may be compacted")
    archive = [archived(rows[seq]) for seq in touched]
    await queries.rewrite_history(db, pk)
    await _rewrite(compactor, pk, rows, compiled.items, touched)
    await keep_originals(db, pk, compiled.steps, now)
    resets = profile.session_resumption and await queries.has_provider_session(db, pk)
    if resets:
        await queries.end_provider_session(db, pk)
    record = _record(pk, items, compiled.items, touched, archive, now)
    record.resets_provider_session = resets
    db.add(record)
    pct = Where.of(session, profile).pct(record.tokens_after)
    await events.emit(db, pk, events.COMPACTION, in_place_event(record, len(items), pct), now)
    await db.commit()
    return compactor.compacted(Done(record, len(items), len(items)))


async def _rewrite(
    compactor: Compactor,
    pk: SessionPk,
    rows: dict[int, MessageRow],
    items: Sequence[Item],
    touched: list[int],
) -> None:
    """The stored rows of the ``touched`` messages rewritten as ``items`` has them, counted
    again, and the session's totals moved by the difference."""
    old, new = [], []  # the counts of the rewritten messages, before and after
    for item in items:
        if item.seq in touched:
            row, counts = rows[item.seq], compactor.counter.count_all(item.message)
            old.append(stored_counts(row))
            row.content = item.message.to_json().get("content", [])
            row.tokens_o200k, row.tokens_cl100k = counts["o200k_base"], counts["cl100k_base"]
            new.append(counts)
    await queries.move_totals(compactor.db, pk, new, old)


def _record(
    pk: SessionPk,
    before: Sequence[Item],
    after: Sequence[Item],
    touched: list[int],
    archive: list[dict[str, Any]],
    now: datetime,
) -> CompactionRow:
    """The compaction's record (whether it ended the provider session is the caller's)."""
    return CompactionRow(
        id=str(uuid.uuid4()),
        session_pk=pk,
        kind=KIND,
        reason=KIND,
        seq_from=touched[0],
        seq_to=touched[-1],
        summary_seq=None,
        archived=archive,
        tokens_before=sum(i.tokens for i in before),
        tokens_after=sum(i.tokens for i in after),
        summary_tokens=0,
        cache_rewrite_tokens=sum(i.tokens for i in after if i.seq >= touched[0]),
        resets_provider_session=False,
        summarizer=None,
        summarizer_reason="not_summarized",
        created_at=now,
    )
