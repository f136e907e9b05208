"""Compiling a stored session, in its steps: load the session, run the compactions due, plan
what the view needs, read and compile it, record the compile, answer.

Full mode: every fragment as the system prompt and the whole compiled history. Delta mode (a
session-stateful profile with an active provider session): the dynamic fragments as
``[System Context]: `` user messages and only the messages after the cursor (seeds/004). With a
digester, a full compile that trims reads only the newest part of a long history and a digest
of the rest.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from functools import partial

from sqlalchemy.exc import IntegrityError

from app.domain.compilers.base import Compiler, Item, NeedsHistory
from app.domain.compilers.registry import build
from app.domain.compilers.spec import CompilerSpec
from app.domain.compiling import (
    NothingToSend,
    Output,
    Target,
    compile_request,
    context_messages,
    with_request_fragments,
)
from app.domain.errors import NotFound
from app.domain.messages import DEFAULT_SECTION
from app.domain.providers import ProviderProfile
from app.domain.sessions import PromptFragment, SessionPk
from app.domain.tokens import Encoder
from app.services.compaction import Done
from app.services.compaction.compacting import compact_due, compact_sent
from app.services.compaction.reports import Report
from app.services.compiling import remembered
from app.services.compiling.digesting import digest_snapshot, job_after, keep_tokens
from app.services.compiling.remembered import ViewKey
from app.services.compiling.request import (
    Caller,
    Compilation,
    Context,
    Mode,
    Options,
    Read,
    light,
    scans,
    snapshot_of,
    spec_of,
    tools_tokens,
)
from app.services.compiling.stored import parse
from app.services.compiling.tails import Tail, View, long_history, read_tail, view_of
from app.services.compiling.wholes import read_whole
from app.services.sessions import require_session_and_tenant_name, session_profile
from app.services.sessions.calibration import calibration_for, key_for
from app.services.sessions.originals import Known, keep_originals
from app.services.tenancy import cpu
from app.storage import compiles
from app.storage.db import autocommit
from app.storage.models import SessionRow

RESET = "a compaction ended the provider session: compiled in full for a new one"


@dataclass(frozen=True)
class Loaded:
    """The session as read for this compile, and the profile it compiles for."""

    session_id: str  # as asked (a row's attributes expire when its transaction rolls back)
    pk: SessionPk
    row: SessionRow
    tenant_name: str
    profile: ProviderProfile


@dataclass(frozen=True)
class Plan:
    """What the compile is to do: its compiler and target, full or delta, what it reads."""

    spec: CompilerSpec
    compiler: Compiler
    encoder: Encoder
    target: Target
    cursor: int | None  # delta mode: the cursor the delta starts after
    notes: tuple[str, ...]
    long: bool  # long enough for a digest
    view: View | None  # the digest's view, when the compile may read a tail
    key: ViewKey | None  # what the output is kept by, when it may be kept

    @property
    def mode(self) -> Mode:
        return "full" if self.cursor is None else "delta"


@dataclass(frozen=True)
class Compiled:
    """The compiled output, the items it was compiled from, and the tail it read."""

    output: Output
    items: tuple[Item, ...]
    tail: Tail | None
    read: Read


async def compile_session(
    ctx: Context,
    session_id: str,
    options: Options,
    ran: Sequence[Done] | None = None,
    read: tuple[SessionRow, str] | None = None,
) -> Compilation:
    """Compile the stored session and record the compile (for the cursor), after the
    compactions it is due (with a compactor). Under a policy that measures the history as sent,
    the compaction the compiled view is due runs then, and the session is compiled again
    (``ran``: the compactions run already; none runs again). ``read``: the session row and its
    tenant's name, as the request read them just before (the sidecar's open), not read again."""
    await autocommit(ctx.session)  # reads, then one INSERT
    loaded = await load(ctx, session_id, options, read)
    compacting = ran is None and _compacts(ctx, loaded, options)
    compacted = list(ran or ())
    if compacting:
        compacted = await run_due(ctx, loaded, options)
        if compacted:  # a compaction may end the provider session
            loaded = await load(ctx, session_id, options)
    plan = await plan_for(ctx, loaded, options)
    compiled = await compile_view(ctx, loaded, plan, options)
    if compacting and (fitted := await _fit_sent(ctx, loaded, options, compiled.output)):
        return await compile_session(ctx, session_id, options, [*compacted, *fitted])
    compile_id = await record(ctx, loaded, plan, compiled.output)
    _digest_after(ctx, loaded, plan, compiled, options)
    return Compilation(
        compile_id,
        loaded.profile,
        _warned(ctx, plan, compiled.output, compacted),
        mode=plan.mode,
        after_seq=plan.cursor,
        compactions=tuple(compacted),
        read=compiled.read,
        calibration=plan.target.calibration,
    )


async def load(
    ctx: Context, session_id: str, options: Options, read: tuple[SessionRow, str] | None = None
) -> Loaded:
    """The session, its tenant's name and the profile the compile is for (``read``: as read
    before, brought into this database session without a query)."""
    db = ctx.session
    if read is None:
        row, tenant_name = await require_session_and_tenant_name(db, ctx.tenant, session_id)
    else:
        row, tenant_name = await db.merge(read[0], load=False), read[1]
    profile = session_profile(row, ctx.catalog, options.provider)
    return Loaded(session_id, SessionPk(row.pk), row, tenant_name, profile)


def _compacts(ctx: Context, loaded: Loaded, options: Options) -> bool:
    return ctx.compactor is not None and bool(loaded.row.compaction_policy or options.compaction)


async def run_due(ctx: Context, loaded: Loaded, options: Options) -> list[Done]:
    """The compactions due before the compile: request-boundary and reactive ones."""
    assert ctx.compactor is not None
    db = ctx.session
    report = None
    if options.usage is not None or options.error_kind is not None:
        anthropic = loaded.profile.output == "anthropic"
        report = Report.of(options.usage, options.error_kind, anthropic)
    began = False

    async def begin() -> None:
        nonlocal began
        began = True
        await db.commit()  # compactions need transactions of their own: out of autocommit

    done = await compact_due(
        ctx.compactor,
        loaded.row,
        loaded.profile,
        options.context_window,
        options.compaction,
        report,
        begin,
    )
    if began:
        await db.commit()  # ends the reads that found nothing due
        await autocommit(db)
    return done


async def _fit_sent(ctx: Context, loaded: Loaded, options: Options, output: Output) -> list[Done]:
    """Under a ``sent`` policy, the compaction the compiled view is due (committed)."""
    assert ctx.compactor is not None
    fitted = await compact_sent(
        ctx.compactor,
        loaded.row,
        loaded.profile,
        options.context_window,
        options.compaction,
        output,
    )
    if fitted:
        await ctx.session.commit()
    return fitted


async def plan_for(ctx: Context, loaded: Loaded, options: Options) -> Plan:
    """The compiler, the target and what to read: the cursor's delta, a tail, or all."""
    row, profile = loaded.row, loaded.profile
    encoder = ctx.cache.counter.encoder(profile.encoding)
    spec = spec_of(options.compiler, row.compiler)
    stored = tuple(PromptFragment.model_validate(f) for f in row.system_prompt)
    fragments = with_request_fragments(stored, options.fragments)
    cursor, notes = _cursor(row, profile)
    target = Target(
        profile,
        options.context_window or row.context_window or profile.context_window,
        fragments,
        row.response_format,
        tools_tokens(options.tools, encoder),
        calibration=await calibration_for(ctx.session, ctx.tenant, loaded.pk, profile),
    )
    long = long_history(row, profile.encoding, target.context_window)
    view = view_of(spec, ctx.registry, profile) if cursor is None and ctx.digester else None
    view = view if long else None
    if cursor is not None:
        prior = await compiles.open_calls(ctx.session, loaded.pk, cursor)
        dynamic = [f for f in fragments if f.lifecycle == "dynamic"]
        context = context_messages(dynamic)
        target = replace(target, fragments=(), context=context, prior_call_ids=prior)
    compiler = build(spec, ctx.registry)
    own = bool(options.pending or options.ephemeral)  # messages of the compile's own
    key = None
    if ctx.cache.views.max_bytes > 0 and remembered.keeps(spec, ctx.registry, own):
        name, execution = loaded.tenant_name, options.execution_id
        key = remembered.view_key(ctx.tenant, name, row, spec, target, cursor, execution)
    return Plan(spec, compiler, encoder, target, cursor, notes, long, view, key)


def _cursor(row: SessionRow, profile: ProviderProfile) -> tuple[int | None, tuple[str, ...]]:
    """Where a delta starts (None: a full compile), and why it is full when it cannot be."""
    cursor = row.cursor_seq if profile.session_resumption and row.provider_session_id else None
    if cursor is None or cursor <= row.last_seq:
        return cursor, ()
    why = (
        f"the cursor (seq {cursor}) is beyond the stored history (seq {row.last_seq}):"
        " compiled in full"
    )
    return None, (why,)


async def compile_view(ctx: Context, loaded: Loaded, plan: Plan, options: Options) -> Compiled:
    """The output a compile of the session as it stands made before (``remembered``), else a
    compile of what it reads."""
    views = ctx.cache.views
    kept = None if plan.key is None else views.get(plan.key)
    if kept is not None:
        return Compiled(kept, (), None, "remembered")
    compiled = await _read_and_compile(ctx, loaded, plan, options)
    if plan.key is not None:
        views.put(plan.key, compiled.output, remembered.size_of(compiled.output))
    return compiled


async def _read_and_compile(ctx: Context, loaded: Loaded, plan: Plan, options: Options) -> Compiled:
    """Read and compile: the tail with its digest when there is one and it is enough, else
    what the plan reads whole."""
    try:
        compiled = await compile_tail(ctx, loaded, plan, options)
        return compiled if compiled is not None else await _whole(ctx, loaded, plan, options)
    except NothingToSend:  # also what a session deleted between the reads above looks like
        if not await compiles.session_exists(ctx.session, loaded.pk):
            raise NotFound("session", loaded.session_id) from None
        raise


async def compile_tail(
    ctx: Context, loaded: Loaded, plan: Plan, options: Options
) -> Compiled | None:
    """The compile of the tail with its digest, when the plan may read one, there is one, and it
    is enough (None: else)."""
    if plan.view is None:
        return None
    row, profile, execution = loaded.row, loaded.profile, options.execution_id
    tail = await read_tail(ctx.session, row, plan.view, execution, profile, ctx.cache, ctx.tenant)
    if tail is None:
        return None
    try:
        output, items = await _run(ctx, loaded, plan, options, (), tail)
    except NeedsHistory:  # the tail was not enough: the whole history, as without one
        return None
    return Compiled(output, items, tail, "kept" if tail.kept else "tail")


async def _whole(ctx: Context, loaded: Loaded, plan: Plan, options: Options) -> Compiled:
    """Read and compile the whole history (a short one as the last compile kept it and the rows
    since), or in delta mode the messages after the cursor."""
    at, encoding = (loaded.pk, loaded.row.history_version), loaded.profile.encoding
    if plan.cursor is None and not plan.long:
        whole = await read_whole(ctx.session, ctx.cache, ctx.tenant, at, encoding)
        output, items = await _run(ctx, loaded, plan, options, whole.items, None)
        return Compiled(output, items, None, "kept_whole" if whole.kept else "whole")
    # A long history read whole takes memory in proportion to it: one at a time.
    long = plan.long and plan.cursor is None
    async with ctx.digester.reading(long) if ctx.digester else nullcontext():
        rows = await compiles.rows_after(ctx.session, loaded.pk, plan.cursor or 0, encoding)
        parsed = await parse(rows, at, ctx.cache)
        output, items = await _run(ctx, loaded, plan, options, parsed, None)
    return Compiled(output, items, None, "delta" if plan.cursor is not None else "whole")


async def _run(
    ctx: Context,
    loaded: Loaded,
    plan: Plan,
    options: Options,
    stored: Sequence[Item],
    tail: Tail | None,
) -> tuple[Output, tuple[Item, ...]]:
    """The compile of the ``stored`` items, or of the ``tail``, and the pending messages: on the
    event loop when it is light, else in a worker thread."""
    work = partial(_work, ctx, loaded, plan, options)
    read = stored if tail is None else tail.items
    if light(read, plan.target, options) and not scans(plan.spec):
        return work(stored, tail)
    return await cpu.run_sync(work, stored, tail)


def _work(
    ctx: Context,
    loaded: Loaded,
    plan: Plan,
    options: Options,
    stored: Sequence[Item],
    tail: Tail | None,
) -> tuple[Output, tuple[Item, ...]]:
    row, encoding = loaded.row, loaded.profile.encoding
    pending = (
        Item(row.last_seq + i, DEFAULT_SECTION, message, counts[encoding])
        for i, (message, counts) in enumerate(options.pending, start=1)
    )
    items = (*(tail.items if tail is not None else stored), *pending)
    elided = None if tail is None else tail.elided(items)
    caller = Caller(ctx.tenant, loaded.tenant_name)
    snapshot = snapshot_of(
        items,
        ctx.cache,
        plan.encoder,
        options,
        caller,
        elided,
        now=ctx.now,
        metadata=row.meta,
        session_id=row.id,
    )
    return compile_request(snapshot, plan.compiler, plan.target), items


async def record(ctx: Context, loaded: Loaded, plan: Plan, output: Output) -> str:
    """Record the compile (what an acknowledgement moves the cursor to, what the provider's
    count of it will teach) and the originals its steps took out; its id."""
    # The last seq sent (a delta that sent no stored message leaves the cursor where it is).
    seqs = (output.seqs[0], output.seqs[-1]) if output.seqs else (None, plan.cursor)
    # Only a full compile's count teaches (a delta's is of the whole provider session).
    key = key_for(loaded.profile) if plan.mode == "full" else None
    learning = None if key is None else (output.estimate, key)
    new = compiles.NewCompile(
        str(uuid.uuid4()), loaded.pk, plan.mode, seqs, output.total, ctx.now, learning
    )
    db = ctx.session
    known = Known(ctx.cache, ctx.tenant, loaded.pk)
    vouched = known.vouched(output.steps)
    try:
        found = await compiles.insert_compile(db, new, vouched)
        held = set(vouched) if found == len(vouched) else set()  # else some went: ask
        kept = await keep_originals(db, loaded.pk, output.steps, ctx.now, held)
        await db.commit()
    except IntegrityError:  # the session was deleted since it was read: its rows refer to none
        await db.rollback()
        raise NotFound("session", loaded.session_id) from None
    known.add(kept)
    return new.id


def _warned(ctx: Context, plan: Plan, output: Output, compacted: Sequence[Done]) -> Output:
    """``output`` with what the compile and its compactions have to say first."""
    warnings = [*(ctx.compactor.notes if ctx.compactor else ()), *plan.notes]
    if any(d.row.resets_provider_session for d in compacted):
        warnings.insert(
            0, "a compaction ended the provider session: compiled in full for a new one"
        )
    return replace(output, warnings=[*warnings, *output.warnings]) if warnings else output


def _digest_after(
    ctx: Context, loaded: Loaded, plan: Plan, compiled: Compiled, options: Options
) -> None:
    """Schedule the digest this compile's view would read next time, when it needs one."""
    if plan.view is None or ctx.digester is None or compiled.read == "remembered":
        return
    items = compiled.items
    stored = items[: len(items) - len(options.pending)]  # a digest is of stored messages
    keep = keep_tokens(plan.target, compiled.output)
    snapshot = digest_snapshot(plan.target, plan.encoder, options.execution_id)
    job = job_after(plan.view, loaded.row, stored, compiled.tail, keep, snapshot)
    if job is not None:
        ctx.digester.schedule(job, ctx.now)
