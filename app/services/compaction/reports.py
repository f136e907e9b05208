"""What the caller reported of its last model call: the usage or failure that drives reactive
compaction (app/services/compaction/compactor.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.sessions import SessionPk
from app.storage import queries


@dataclass(frozen=True)
class Report:
    """How the caller's last model call went: the prompt tokens it used, or prompt-too-long."""

    prompt_tokens: int | None = None
    too_long: bool = False

    @classmethod
    def of(cls, usage: dict[str, Any] | None, error_kind: str | None, cache_apart: bool) -> Report:
        """From reported usage. ``cache_apart``: the provider counts cached prompt tokens apart
        from its input tokens (Anthropic), so the prompt is their sum."""
        usage = usage or {}
        prompt = usage.get("prompt_tokens")
        if prompt is not None and cache_apart:
            prompt += (usage.get("cache_read_tokens") or 0) + (usage.get("cache_write_tokens") or 0)
        return cls(prompt, error_kind == "prompt_too_long")


async def reported(
    db: AsyncSession, pk: SessionPk, given: Report | None, cache_apart: bool
) -> Report | None:
    """The report that drives reactive compaction: the request's own, else the last one made
    with a cursor acknowledgement, acted on once: by the first compile after it."""
    if given is not None:
        return given
    found = await queries.unacted_report(db, pk)
    return None if found is None else Report.of(*found, cache_apart)
