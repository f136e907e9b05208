"""What a compile is asked and answers, what it needs, and the helpers both kinds share."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import Row
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.calibration import Calibration
from app.domain.compilers.base import Elided, Item, Snapshot
from app.domain.compilers.registry import Registry
from app.domain.compilers.spec import CompilerSpec, Component, parse_spec
from app.domain.compiling import (
    Output,
    Target,
)
from app.domain.errors import FormatError, InvalidInput
from app.domain.formats.convert import Format
from app.domain.models import Catalog
from app.domain.providers import ProviderProfile
from app.domain.sessions import PromptFragment, TenantId
from app.domain.tokens import Encoder, count_message
from app.services.compaction import Done
from app.services.compaction.compactor import Compactor
from app.services.compiling.digesting import (
    Digester,
)
from app.services.compiling.stored import LIGHT_MESSAGES, LIGHT_TOKENS
from app.services.sessions.cache import Entry, MessageCache

# Without a spec of its own, a compile keeps the current trace and fits the context window.
DEFAULT_COMPILE_SPEC = CompilerSpec(decorators=(Component(name="token_limit"),))
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
# What a session compile read: the tail with a digest of the rest (``kept``: a kept tail and the
# rows since), the whole history (``kept_whole``: a short one as the last compile kept it and
# the rows since), the messages after the cursor (a delta), or nothing (the output it made
# before: ``remembered``).
Read = Literal["tail", "kept", "whole", "kept_whole", "delta", "remembered"]


@dataclass(frozen=True)
class Context:
    """What a compile needs of the app and of the request, built once per request."""

    cache: MessageCache
    registry: Registry
    catalog: Catalog
    tenant: TenantId
    now: datetime
    db: AsyncSession | None = None  # a session compile's (a posted one reads nothing)
    compactor: Compactor | None = None  # runs the compactions a session compile is due
    digester: Digester | None = None  # reads a long history's tail, digests it after

    @property
    def session(self) -> AsyncSession:
        """The database session of a session compile."""
        assert self.db is not None, "a session compile needs a database session"
        return self.db


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


def spec_of(raw: Any, fallback: Any) -> CompilerSpec:
    """The compiler spec asked for, else the session's, else the default."""
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


def snapshot_of(
    items: tuple[Item, ...],
    cache: MessageCache,
    encoder: Encoder,
    options: Options,
    caller: Caller,
    elided: Elided | None = None,
    **context: Any,
) -> Snapshot:
    """The snapshot a compiler reads: ``items``, the request's ephemeral messages, ``context``."""
    parsed = parse_posted(
        cache, caller.id, options.ephemeral_format, options.ephemeral, None, "ephemeral"
    )
    ephemeral = tuple(m for m, _ in parsed)
    return Snapshot(
        items=items,
        count=lambda m: count_message(m, encoder),
        ephemeral=ephemeral,
        execution_id=options.execution_id,
        tenant=caller.name,
        elided=elided,
        **context,
    )


def light(rows: Sequence[Row[Any]] | Sequence[Item], target: Target, options: Options) -> bool:
    """Whether the compile costs less than a worker thread round trip, so it may run on the event
    loop: a few stored messages of few tokens (text is what costs), no ephemeral messages."""
    if len(rows) + len(options.pending) > LIGHT_MESSAGES or options.ephemeral:
        return False  # the count alone says so: no sum over a long tail
    texts = [f.text for f in target.fragments] + [m.text for m in target.context]
    tokens = sum(r.tokens for r in rows) + sum(len(t) for t in texts) // 4  # ~4 chars a token
    tokens += sum(counts.get(target.profile.encoding, 0) for _, counts in options.pending)
    return tokens <= LIGHT_TOKENS


def scans(spec: CompilerSpec) -> bool:
    """Whether the compile runs patterns over every text (``redact``): up to a budget per byte
    and pattern, more than a light compile may spend on the event loop."""
    return any(part.name in SCANNING for part in spec.decorators)
