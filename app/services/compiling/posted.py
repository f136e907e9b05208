"""Compiling a posted history: nothing read, nothing stored (CPU work: off the event loop)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from app.domain.compilers.base import Item
from app.domain.compilers.registry import build, repeatable
from app.domain.compiling import Target, compile_request
from app.domain.formats.convert import Format
from app.domain.messages import DEFAULT_SECTION
from app.services.compiling.request import (
    Caller,
    Compilation,
    Context,
    Options,
    parse_posted,
    snapshot_of,
    spec_of,
    tools_tokens,
)


@dataclass(frozen=True)
class Posted:
    """A history as posted: its shape, its messages and the system prompt given apart."""

    format: Format
    messages: list[Any]
    system: Any = None


def compile_posted(ctx: Context, posted: Posted, options: Options, tenant_name: str) -> Compilation:
    """Compile a posted history for ``options.provider`` (the caller sets a default)."""
    assert options.provider is not None, "the caller names the provider"
    profile = ctx.catalog.resolve(options.provider)
    encoder = ctx.cache.counter.encoder(profile.encoding)
    spec = spec_of(options.compiler, None)
    parsed = parse_posted(
        ctx.cache,
        ctx.tenant,
        posted.format,
        posted.messages,
        posted.system,
        "messages",
        (profile.encoding,),
    )
    items = tuple(
        Item(i, DEFAULT_SECTION, message, counts[profile.encoding])
        for i, (message, counts) in enumerate(parsed, start=1)
    )
    caller = Caller(ctx.tenant, tenant_name)
    snapshot = snapshot_of(
        items, ctx.cache, encoder, options, caller, now=ctx.now, metadata=options.metadata
    )
    target = Target(
        profile,
        options.context_window or profile.context_window,
        response_format=options.response_format,
        tools_tokens=tools_tokens(options.tools, encoder),
    )
    output = compile_request(snapshot, build(spec, ctx.registry), target)
    return Compilation(str(uuid.uuid4()), profile, output, repeatable(spec, ctx.registry))
