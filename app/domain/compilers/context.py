"""Context injection (seeds/003): request-supplied messages and context providers.

Both prepend messages to the view; they are computed fresh for every compile and never stored
(seq 0, section ``ephemeral`` or ``provider``). The seeds/003 pipeline, transforms first, then
providers against the rewritten history, then the provider messages prepended, is the decorator
list ``[redact, ..., providers]``: each decorator wraps the ones listed before it.

A ``token_limit`` listed after these counts their messages like any other (they are never
trimmed); one listed before them cannot see them, so they claim their tokens in the snapshot
(``Snapshot.claimed``) before calling the compiler they wrap.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

from app.domain.compilers.base import (
    EPHEMERAL_SECTION,
    PROVIDER_SECTION,
    Compiled,
    Compiler,
    Item,
    Snapshot,
)
from app.domain.errors import InvalidInput, UnknownName
from app.domain.messages import Message, TextPart

# A context provider: a message computed from the snapshot, the (rewritten) history and the
# session metadata keys the spec chose; None when it has nothing to say.
Provider = Callable[[Snapshot, Sequence[Item], Sequence[str]], Message | None]


def _user(text: str, provider: str) -> Message:
    return Message(
        role="user", content=(TextPart(text=text),), metadata={"context_provider": provider}
    )


def identity(snapshot: Snapshot, history: Sequence[Item], keys: Sequence[str]) -> Message:
    """The tenant, session and date header (no session line for a stateless compile)."""
    lines = [f"Tenant: {snapshot.tenant}"]
    if snapshot.session_id is not None:
        lines.append(f"Session: {snapshot.session_id}")
    lines.append(f"Date: {snapshot.now.isoformat()}")
    return _user("\n".join(lines), "identity")


def _show(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def metadata(snapshot: Snapshot, history: Sequence[Item], keys: Sequence[str]) -> Message | None:
    """The chosen session metadata keys that are set, with their values, in the given order."""
    lines = [f"{k}: {_show(snapshot.metadata[k])}" for k in keys if k in snapshot.metadata]
    return _user("\n".join(["Session metadata:", *lines]), "metadata") if lines else None


BUILTIN_PROVIDERS: Mapping[str, Provider] = {"identity": identity, "metadata": metadata}


def _resolve(catalog: Mapping[str, Provider], names: Sequence[str]) -> list[Provider]:
    for n, name in enumerate(names):
        if name not in catalog:
            raise UnknownName("context provider", name, sorted(catalog), f"names[{n}]")
    return [catalog[name] for name in names]


def _tokens(items: Sequence[Item]) -> int:
    return sum(item.tokens for item in items)


def context_providers(catalog: Mapping[str, Provider]) -> Callable[..., Compiler]:
    """The ``providers`` decorator factory over ``catalog`` (name -> provider)."""

    def providers(
        inner: Compiler, names: Sequence[str], metadata_keys: Sequence[str] = ()
    ) -> Compiler:
        """Prepend the messages of the context providers ``names``, in that order."""
        made = _resolve(catalog, names)
        if "metadata" in names and not metadata_keys:
            raise InvalidInput([(("metadata_keys",), "the metadata provider needs keys")])

        def provide(snapshot: Snapshot, history: Sequence[Item]) -> list[Item]:
            found = (p(snapshot, history, metadata_keys) for p in made)
            return [snapshot.item(m, PROVIDER_SECTION) for m in found if m is not None]

        def compile_providers(snapshot: Snapshot) -> Compiled:
            # Claimed before the history is known: exact for providers that ignore it (the
            # built-ins); one that grows with the rewritten history is reported.
            guess = _tokens(provide(snapshot, snapshot.items))
            compiled = inner(snapshot.claiming(guess))
            items = provide(snapshot, compiled.items)
            extra = _tokens(items) - guess
            warnings = [f"providers: {extra} tokens more than claimed"] if extra > 0 else []
            return compiled.then([*items, *compiled.items], warnings=warnings)

        return compile_providers

    return providers


providers = context_providers(BUILTIN_PROVIDERS)


def inject(inner: Compiler, position: Literal["start"] = "start") -> Compiler:
    """Prepend the request's ephemeral messages (retrieved documents...) before the history."""

    def compile_inject(snapshot: Snapshot) -> Compiled:
        items = [snapshot.item(m, EPHEMERAL_SECTION) for m in snapshot.ephemeral]
        compiled = inner(snapshot.claiming(_tokens(items)))
        return compiled.then([*items, *compiled.items])

    return compile_inject
