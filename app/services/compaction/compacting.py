"""The compactions a request runs: one asked for now (``POST .../compact``), whatever the
triggers say, and those a compile is due (``Compactor.due``, and for a policy that measures the
history as sent, ``compact_sent`` once compiled), by the session's policy with the request's
fields over it."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from app.domain.compaction.planning import (
    PLANS,
    CompactionPolicy,
    Kind,
    plan_sent,
    plan_session,
    reactive_kind,
    sent_items,
    sent_marks,
)
from app.domain.compilers.decorators import default_reserve
from app.domain.compiling import Output
from app.domain.errors import Conflict
from app.domain.providers import ProviderProfile
from app.domain.sessions import SessionPk, TenantId
from app.services.compaction import Done, Gate, Where, policy_of, stored_items
from app.services.compaction.compactor import Compactor
from app.services.compaction.reports import Report, reported
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
        raise Conflict(
            "nothing to compact: no API round may be summarised (recent, pinned, "
            "the current prompt, or too few messages)"
        )
    where = Where.of(session, profile)
    return await compactor.run(session, plan, where, policy.summarizer)


async def compact_due(
    compactor: Compactor,
    session: SessionRow,
    profile: ProviderProfile,
    context_window: int | None,
    override: dict[str, Any] | None,
    report: Report | None,
    begin: Callable[[], Awaitable[None]],
) -> list[Done]:
    """The compactions a compile of ``session`` is due (none without an enabled policy).
    ``begin`` is awaited first, once one may be due (a compile's autocommit reads end there:
    compactions need transactions of their own). Under a ``sent`` policy, whose
    request-boundary compaction is the compile's (``compact_sent``), finding that no report calls
    for a reactive one is a read, done before it."""
    policy = policy_of(session.compaction_policy, override, profiles=compactor.profiles)
    if policy is None or not policy.enabled:
        return []
    where = Where.of(session, profile, context_window)
    if policy.measure == "sent":
        found = await reported(
            compactor.db, SessionPk(session.pk), report, where.output == "anthropic"
        )
        prompt, too_long = (found.prompt_tokens, found.too_long) if found else (None, False)
        if reactive_kind(prompt, where.context_window, too_long, policy) is None:
            return []  # nor is the task cut: that is for a prompt too long
        report = found  # read once
    await begin()
    return await compactor.due(session, policy, where, report)


async def compact_sent(
    compactor: Compactor,
    session: SessionRow,
    profile: ProviderProfile,
    context_window: int | None,
    override: dict[str, Any] | None,
    output: Output,
) -> list[Done]:
    """The compaction a compile of ``session`` under a ``sent`` policy is due, once it compiled
    ``output``: its history as sent passed the trigger, or did not fit beside the fixed part
    (trimming left some of it out). It goes down to the low-water mark, so the next turns
    extend the request as it is (the prompt cache keeps it) until the trigger is passed again."""
    policy = policy_of(session.compaction_policy, override, profiles=compactor.profiles)
    if policy is None or not policy.enabled or policy.measure != "sent":
        return []
    where = Where.of(session, profile, context_window)
    window = where.context_window
    trigger, low_water = sent_marks(policy, window - default_reserve(window) - output.fixed)
    over = trimmed(output)
    if not over and (output.history_tokens <= trigger or await _just_compacted(compactor, session)):
        return []  # what fits waits a turn after a compaction: at most every other turn
    await compactor.db.commit()  # compactions need transactions of their own: out of autocommit
    items = sent_items(
        await compactor.items(SessionPk(session.pk), where), dict(output.sent_tokens)
    )
    plan = plan_sent(items, policy, low_water)
    if plan is None:
        return []
    # Forced: not compacting would trim the view, which rewrites the cache as much.
    gate = Gate.of(policy, where, items, forced=True)
    return await compactor.attempt(session, plan, where, policy.summarizer, gate)


def trimmed(output: Output) -> bool:
    """Whether ``token_limit`` cut the history to fit: left messages out or previewed them."""
    return any(r.reason == "token_limit" for r in output.left_out) or any(
        s.name == "token_limit" and s.touched for s in output.steps
    )


async def _just_compacted(compactor: Compactor, session: SessionRow) -> bool:
    """Whether the session's last compile compacted it (no compile was recorded since its last
    compaction: a compile is recorded with its request's start, before what it compacted)."""
    pk = SessionPk(session.pk)
    when = await queries.last_compaction_at(compactor.db, pk)
    return when is not None and not await queries.compiled_since(compactor.db, pk, when)
