"""Session compiles remembered: the same stored history compiled the same way again.

A compile that finds nothing new (a retry after a failed model call, a second reader of the
session, a compile after an acknowledgement) would read, parse, repair, trim and shape the same
history again, to the same output. Within a history version a stored message is never rewritten
(a compaction moves the version) and an append moves the session's last seq, so the session's
pk, history version and last seq name its stored messages exactly; with everything else a
compile reads (the compiler, the target and what surrounds the history, the cursor, the
execution id, the session's id and metadata, its tenant's name) they name the output. A compile
whose compiler is repeatable (built-ins that read no clock) and that brings no messages of its
own (pending, ephemeral) is kept under that key in a bounded cache (``MessageCache.views``) and
answered from it without reading a message. Keys start with the tenant and the session: no
tenant hits, or can time, what another compiled.
"""

from __future__ import annotations

from typing import Any

import orjson
import xxhash
from pydantic import BaseModel

from app.domain.compilers.registry import Registry, repeatable
from app.domain.compilers.spec import CompilerSpec
from app.domain.compiling import Output, Target
from app.domain.sessions import TenantId
from app.storage.models import SessionRow

# What a kept output is counted as: bytes per token of it, and for the objects around it.
BYTES_PER_TOKEN = 12
OVERHEAD = 4096
ViewKey = tuple[str, str, bytes]


def view_key(
    tenant: TenantId,
    tenant_name: str,
    row: SessionRow,
    spec: CompilerSpec,
    target: Target,
    cursor: int | None,
    execution_id: str | None,
) -> ViewKey:
    """The key of a compile of the session ``row`` as it stands: its tenant and pk, and a hash
    of its history's version and last seq and of everything else the output depends on."""
    facts = (
        row.history_version,
        row.last_seq,
        cursor,
        tenant_name,
        row.id,
        row.meta,
        spec,
        target,
        execution_id,
    )
    digest = xxhash.xxh3_128_digest(orjson.dumps(facts, default=_plain))
    return str(tenant), str(row.pk), digest


def keeps(spec: CompilerSpec, registry: Registry, own_messages: bool) -> bool:
    """Whether a compile's output may be kept: a repeatable compiler, no messages of its own."""
    return not own_messages and repeatable(spec, registry)


def size_of(output: Output) -> int:
    """What ``output`` is counted as in the cache."""
    return BYTES_PER_TOKEN * output.total + OVERHEAD


def _plain(value: Any) -> Any:
    """What orjson does not know (it writes dataclasses itself), as plain JSON values: pydantic
    models dumped, frozensets sorted (one value, one key)."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, frozenset | set):
        return sorted(value, key=str)
    raise TypeError(type(value).__name__)
