"""Compile use cases: a posted history (stateless) or a stored session (recorded)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.calibration import Calibration
from app.domain.compilers.base import Elided, Item, NeedsHistory, Snapshot
from app.domain.compilers.registry import Registry, build, repeatable
from app.domain.compilers.spec import CompilerSpec, Component, parse_spec
from app.domain.compiling import (
    NothingToSend,
    Output,
    Target,
    compile_request,
    context_messages,
    with_request_fragments,
)
from app.domain.errors import FormatError, InvalidInput, NotFound
from app.domain.formats.convert import Format
from app.domain.messages import DEFAULT_SECTION, Message
from app.domain.models import Catalog
from app.domain.providers import ProviderProfile
from app.domain.sessions import PromptFragment, SessionPk, TenantId
from app.domain.tokens import Encoder, count_message
from app.services.compaction import Done
from app.services.compaction.compacting import compact_due, compact_sent
from app.services.compaction.compactor import Compactor
from app.services.compaction.reports import Report
from app.services.compiling.digesting import (
    Digester,
    Tail,
    job_after,
    long_history,
    read_tail,
    view_of,
)
from app.services.sessions import require_session_and_tenant_name, session_profile
from app.services.sessions.cache import Entry, MessageCache
from app.services.sessions.calibration import calibration_for, key_for
from app.services.sessions.originals import keep_originals
from app.services.tenancy import cpu
from app.storage import compiles
from app.storage.db import autocommit

# Without a spec of its own, a compile keeps the current trace and fits the context window.
DEFAULT_COMPILE_SPEC = CompilerSpec(decorators=(Component(name="token_limit"),))
# A session compile this small (a typical delta) runs on the event loop: it takes about a
# millisecond, and a worker thread round trip costs a good part of that.
LIGHT_MESSAGES = 64
LIGHT_TOKENS = 16_384
SCANNING = frozenset({"redact"})


@dataclass(frozen=True)
class Caller:
    """The tenant a compile is for: its id (what caches are kept by) and its name (what the
    compile may show, as the identity context provider does)."""

    id: TenantId
    name: str


@dataclass(frozen=True)
class Options:
    """What a compile request may set (None: the session's, or the profile's, value)."""

    provider: str | None = None
    context_window: int | None = None
    compiler: Any = None
    execution_id: str | None = None
    ephemeral: list[Any] = field(default_factory=list)
    ephemeral_format: Format = "openai"
    tools: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    response_format: dict[str, Any] | None = None
    fragments: tuple[PromptFragment, ...] = ()  # dynamic fragments for this compile
    compaction: dict[str, Any] | None = None  # fields over the session's compaction policy
    usage: dict[str, Any] | None = None  # what the caller's previous model call used
    error_kind: str | None = None  # ... or how it failed
    # Messages compiled after the stored ones as if stored, but not stored (the sidecar's turn,
    # stored only once the model call succeeded); with their counts.
    pending: tuple[Entry, ...] = ()


Mode = Literal["full", "delta"]
# What a session compile read: the tail with a digest of the rest, the whole history, or the
# messages after the cursor (a delta).
Read = Literal["tail", "whole", "delta"]


@dataclass(frozen=True)
class Compilation:
    compile_id: str
    profile: ProviderProfile
    output: Output
    repeatable: bool = False  # the same request would compile to the same output
    mode: Mode = "full"
    after_seq: int | None = None  # delta mode: the cursor the delta starts after
    compactions: tuple[Done, ...] = ()  # run before this compile
    read: Read = "whole"
    calibration: Calibration | None = None  # applied to the counts (a private tokenizer)


def _spec(raw: Any, fallback: Any) -> CompilerSpec:
    if raw is not None:
        return parse_spec(raw)
    return parse_spec(fallback, ("session", "compiler")) if fallback else DEFAULT_COMPILE_SPEC


def tools_tokens(tools: list[dict[str, Any]] | None, encoder: Encoder) -> int:
    """The tokens of a request's tool definitions."""
    # Providers render tool schemas in an unpublished way: counted as their JSON (an estimate).
    return encoder.count(json.dumps(tools, ensure_ascii=False)) if tools else 0


def parse_posted(
    cache: MessageCache,
    tenant: TenantId,
    fmt: Format,
    raw: list[Any],
    system: Any,
    field: str,
    encodings: tuple[str, ...] = (),
    keys: list[bytes] | None = None,
) -> list[Entry]:
    """Parsed messages counted in ``encodings``, remembered for ``tenant`` only; problems are
    located under ``field`` (or ``system``). ``keys``: see ``MessageCache.parse``."""
    try:
        return cache.parse(tenant, fmt, raw, system, encodings, keys)
    except FormatError as exc:
        raise InvalidInput([(exc.path, exc.message)]) from None
    except InvalidInput as exc:
        raise InvalidInput(
            [
                (p if p[:1] in (("system",), ("instructions",)) else (field, *p), m)
                for p, m in exc.problems
            ]
        ) from None


def _snapshot(
    items: tuple[Item, ...],
    cache: MessageCache,
    encoder: Encoder,
    options: Options,
    caller: Caller,
    elided: Elided | None = None,
    **context: Any,
) -> Snapshot:
    parsed = parse_posted(
        cache, caller.id, options.ephemeral_format, options.ephemeral, None, "ephemeral"
    )
    ephemeral = tuple(m for m, _ in parsed)
    return Snapshot(
        items=items, count=lambda m: count_message(m, encoder), ephemeral=ephemeral,
        execution_id=options.execution_id, tenant=caller.name, elided=elided, **context,
    )  # fmt: skip


def compile_posted(
    cache: MessageCache,
    registry: Registry,
    fmt: Format,
    raw: list[Any],
    system: Any,
    options: Options,
    caller: Caller,
    default_provider: str,
    catalog: Catalog,
    now: datetime,
) -> Compilation:
    """Compile a posted history; nothing is stored (CPU work: run it off the event loop)."""
    profile = catalog.resolve(options.provider or default_provider)
    encoder = cache.counter.encoder(profile.encoding)
    spec = _spec(options.compiler, None)
    compiler = build(spec, registry)
    items = tuple(
        Item(i + 1, DEFAULT_SECTION, message, counts[profile.encoding])
        for i, (message, counts) in enumerate(
            parse_posted(cache, caller.id, fmt, raw, system, "messages", (profile.encoding,))
        )
    )
    snapshot = _snapshot(items, cache, encoder, options, caller, now=now,
                         metadata=options.metadata)  # fmt: skip
    target = Target(
        profile, options.context_window or profile.context_window,
        response_format=options.response_format, tools_tokens=tools_tokens(options.tools, encoder),
    )  # fmt: skip
    output = compile_request(snapshot, compiler, target)
    return Compilation(str(uuid.uuid4()), profile, output, repeatable(spec, registry))


async def compile_session(
    db: AsyncSession,
    cache: MessageCache,
    registry: Registry,
    tenant: TenantId,
    session_id: str,
    options: Options,
    now: datetime,
    catalog: Catalog,
    compactor: Compactor | None = None,
    digester: Digester | None = None,
    *,
    ran: Sequence[Done] | None = None,
) -> Compilation:
    """Compile the stored session and record the compile (for the cursor), after the
    compactions it is due (with a ``compactor``). With a ``digester``, a full compile that trims
    reads only the newest part of a long history and a digest of the rest (``_tail``). Under a
    policy that measures the history as sent, the compaction the compiled view is due runs
    then, and the session is compiled again (with ``ran``, the compactions run already: none
    runs again).

    Full mode: every fragment as the system prompt and the whole compiled history. Delta mode
    (a session-stateful profile with an active provider session): the dynamic fragments as
    ``[System Context]: `` user messages and only the messages after the cursor (seeds/004).
    """
    await autocommit(db)  # reads, then one INSERT
    row, tenant_name = await require_session_and_tenant_name(db, tenant, session_id)
    pk = SessionPk(row.pk)
    profile = session_profile(row, catalog, options.provider)
    compacted: list[Done] = list(ran or ())
    compacting = compactor is not None and bool(row.compaction_policy or options.compaction)
    if compactor is not None and compacting and ran is None:
        await db.commit()  # compactions need transactions of their own: out of autocommit
        report = None
        if options.usage is not None or options.error_kind is not None:
            report = Report.of(options.usage, options.error_kind, profile.output == "anthropic")
        compacted = await compact_due(compactor, row, profile, options.context_window,
                                      options.compaction, report)  # fmt: skip
        await db.commit()  # ends the reads that found nothing due
        await autocommit(db)
        # Read again: a compaction may have ended the provider session.
        row, tenant_name = await require_session_and_tenant_name(db, tenant, session_id)
    encoder = cache.counter.encoder(profile.encoding)
    spec = _spec(options.compiler, row.compiler)
    compiler = build(spec, registry)
    stored = tuple(PromptFragment.model_validate(f) for f in row.system_prompt)
    fragments = with_request_fragments(stored, options.fragments)
    cursor = row.cursor_seq if profile.session_resumption and row.provider_session_id else None
    notes = []
    if cursor is not None and cursor > row.last_seq:
        notes.append(
            f"the cursor (seq {cursor}) is beyond the stored history (seq {row.last_seq}):"
            " compiled in full"
        )
        cursor = None
    target = Target(
        profile, options.context_window or row.context_window or profile.context_window,
        fragments, row.response_format, tools_tokens(options.tools, encoder),
        calibration=await calibration_for(db, tenant, pk, profile),
    )  # fmt: skip
    long = long_history(row, profile.encoding, target.context_window)
    view = view_of(spec, registry, profile) if cursor is None and digester and long else None
    tail = None if view is None else await read_tail(db, pk, row.history_version, view,
                                                      options.execution_id, profile)  # fmt: skip
    if cursor is not None:
        prior = await compiles.open_calls(db, pk, cursor)
        dynamic = [f for f in fragments if f.lifecycle == "dynamic"]
        target = replace(target, fragments=(), context=context_messages(dynamic),
                         prior_call_ids=prior)  # fmt: skip

    def work(rows: Sequence[Row[Any]], tail: Tail | None) -> tuple[Output, tuple[Item, ...]]:
        items = tuple(item_of(r) for r in rows) + tuple(
            Item(row.last_seq + i, DEFAULT_SECTION, message, counts[profile.encoding])
            for i, (message, counts) in enumerate(options.pending, start=1)
        )
        elided = None if tail is None else tail.elided(items)
        snapshot = _snapshot(items, cache, encoder, options, Caller(tenant, tenant_name), elided,
                             now=now, metadata=row.meta, session_id=row.id)  # fmt: skip
        return compile_request(snapshot, compiler, target), items

    async def run(rows: Sequence[Row[Any]], tail: Tail | None) -> tuple[Output, tuple[Item, ...]]:
        light = _light(rows, target, options) and not _scans(spec)
        return work(rows, tail) if light else await cpu.run_sync(work, rows, tail)

    async def whole() -> tuple[Sequence[Row[Any]], Output, tuple[Item, ...]]:
        # A long history read whole takes memory in proportion to it: one at a time.
        async with digester.reading(long and cursor is None) if digester else nullcontext():
            rows = await compiles.rows_after(db, pk, cursor or 0, profile.encoding)
            return rows, *(await run(rows, None))

    read: Read = "delta" if cursor is not None else "whole"
    rows: Sequence[Row[Any]] = tail.rows if tail else ()
    try:
        try:
            if tail is None:
                rows, output, items = await whole()
            else:
                output, items = await run(rows, tail)
                read = "tail"
        except NeedsHistory:  # the tail was not enough: the whole history, as without a digest
            tail = None
            rows, output, items = await whole()
    except NothingToSend:  # also what a session deleted between the reads above looks like
        if not rows and not await compiles.session_exists(db, pk):
            raise NotFound("session", session_id) from None
        raise
    if compactor is not None and compacting and ran is None:
        fitted = await compact_sent(
            compactor, row, profile, options.context_window, options.compaction, output
        )
        if fitted:
            await db.commit()
            return await compile_session(
                db,
                cache,
                registry,
                tenant,
                session_id,
                options,
                now,
                catalog,
                compactor,
                digester,
                ran=[*compacted, *fitted],
            )
    output = replace(output, warnings=[*notes, *output.warnings])
    mode: Mode = "full" if cursor is None else "delta"
    compile_id = str(uuid.uuid4())
    # What an acknowledgement moves the cursor to: the last seq sent (a delta that sent no stored
    # message leaves it where it is).
    seqs = (output.seqs[0], output.seqs[-1]) if output.seqs else (None, cursor)
    # What the provider's count of it will teach: only a full compile's (a delta's count is of
    # the whole provider session).
    key = key_for(profile) if mode == "full" else None
    learning = None if key is None else (output.estimate, key)
    try:
        await compiles.insert_compile(db, compile_id, pk, mode, seqs, output.total, now,
                                      learning)  # fmt: skip
        await keep_originals(db, pk, output.steps, now)
        await db.commit()
    except IntegrityError:  # the session was deleted since it was read: its rows refer to none
        await db.rollback()
        raise NotFound("session", session_id) from None
    if compactor is not None and compactor.notes:
        output = replace(output, warnings=[*compactor.notes, *output.warnings])
    if any(d.row.resets_provider_session for d in compacted):
        output = replace(output, warnings=[
            "a compaction ended the provider session: compiled in full for a new one",
            *output.warnings])  # fmt: skip
    if view is not None and digester is not None:
        stored_items = items[: len(items) - len(options.pending)]  # a digest is of stored ones
        job = job_after(view, row, rows, stored_items, tail, target, output,
                        options.execution_id, encoder)  # fmt: skip
        if job is not None:
            digester.schedule(job, now)
    return Compilation(compile_id, profile, output, mode=mode, after_seq=cursor,
                       compactions=tuple(compacted), read=read,
                       calibration=target.calibration)  # fmt: skip


def _light(rows: Sequence[Row[Any]], target: Target, options: Options) -> bool:
    """Whether the compile costs less than a worker thread round trip, so it may run on the event
    loop: a few stored messages of few tokens (text is what costs), no ephemeral messages."""
    texts = [f.text for f in target.fragments] + [m.text for m in target.context]
    tokens = sum(r.tokens for r in rows) + sum(len(t) for t in texts) // 4  # ~4 chars a token
    tokens += sum(counts.get(target.profile.encoding, 0) for _, counts in options.pending)
    messages = len(rows) + len(options.pending)
    return messages <= LIGHT_MESSAGES and tokens <= LIGHT_TOKENS and not options.ephemeral


def _scans(spec: CompilerSpec) -> bool:
    """Whether the compile runs patterns over every text (``redact``): up to a budget per byte
    and pattern, more than a light compile may spend on the event loop."""
    return any(part.name in SCANNING for part in spec.decorators)


def item_of(row: Row[Any]) -> Item:
    message = {"role": row.role, "content": row.content, "name": row.name, "metadata": row.meta}
    return Item(row.seq, row.section, Message.model_validate(message), row.tokens)
