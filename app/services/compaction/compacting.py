"""The compactions a request runs: one asked for now (``POST .../compact``), whatever the
triggers say, and those a compile is due (``Compactor.due``), by the session's policy with the
request's fields over it."""

from __future__ import annotations

from typing import Any

from app.domain.compaction.planning import PLANS, CompactionPolicy, Kind, plan_session
from app.domain.errors import Conflict
from app.domain.providers import ProviderProfile
from app.domain.sessions import SessionPk, TenantId
from app.services.compaction import Done, Where, policy_of, stored_items
from app.services.compaction.compactor import Compactor
from app.services.compaction.reports import Report
from app.services.sessions import require_session, session_profile
from app.storage import queries
from app.storage.models import SessionRow


async def compact_now(
    compactor: Compactor,
    tenant: TenantId,
    session_id: str,
    kind: Kind,
    override: dict[str, Any] | None,
) -> Done:
    """Run a compaction of ``kind`` now, whatever the triggers say (the session's policy, with
    ``override`` over it, still chooses what is kept)."""
    db = compactor.db
    session = await require_session(db, tenant, session_id)
    profile = session_profile(session, compactor.catalog)
    stored = session.compaction_policy
    policy = policy_of(stored, override, "policy", compactor.profiles) or CompactionPolicy()
    rows = await queries.all_messages(db, SessionPk(session.pk))
    items = stored_items(rows, profile.encoding)
    plan = (
        plan_session(items, policy, now=True) if kind == "session" else PLANS[kind](items, policy)
    )
    if plan is None:
        raise Conflict("nothing to compact: no API round may be summarised (recent, pinned, "
                       "the current prompt, or too few messages)")  # fmt: skip
    where = Where.of(session, profile)
    return await compactor.run(session, plan, where, policy.summarizer)


async def compact_due(
    compactor: Compactor,
    session: SessionRow,
    profile: ProviderProfile,
    context_window: int | None,
    override: dict[str, Any] | None,
    report: Report | None,
) -> list[Done]:
    """The compactions a compile of ``session`` is due (none without an enabled policy)."""
    policy = policy_of(session.compaction_policy, override, profiles=compactor.profiles)
    if policy is None or not policy.enabled:
        return []
    where = Where.of(session, profile, context_window)
    return await compactor.due(session, policy, where, report)
