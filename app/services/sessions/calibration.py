"""Counts that learn (app/domain/calibration.py): what a compile applies, and what a reported
usage teaches.

A full compile to a profile whose tokenizer is not public records its raw estimate and count key
on its compile row. When the provider's usage for it arrives (a cursor acknowledgement, or the
sidecar's stored turn), in that transaction and under the session's lock, the sample is kept in
the session's ring and in the tenant's for the key. A delta compile teaches nothing: the provider
counts the whole session it holds, not the delta sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.calibration import (
    Calibration,
    cache_apart,
    choose,
    key_of,
    reported_prompt,
    sample_of,
)
from app.domain.providers import ProviderProfile
from app.domain.sessions import SessionPk, TenantId
from app.storage import calibrations
from app.storage.models import CompileRow


def key_for(profile: ProviderProfile) -> str | None:
    """The count key of a profile's estimates (None: its counts are exact)."""
    return None if profile.exact else key_of(profile.name, profile.encoding, profile.output)


async def calibration_for(
    db: AsyncSession, tenant: TenantId, pk: SessionPk, profile: ProviderProfile
) -> Calibration | None:
    """What a compile of the session to ``profile`` applies: the session's, else the tenant's."""
    key = key_for(profile)
    if key is None:
        return None
    return choose(*(await calibrations.samples(db, tenant, pk, key)))


async def learn(
    db: AsyncSession,
    tenant: TenantId,
    pk: SessionPk,
    compiled: CompileRow,
    usage: Mapping[str, Any] | None,
    now: datetime,
) -> bool:
    """Keep the sample ``usage`` makes of the compile, unless the compile teaches nothing or a
    prompt count was reported for it before (call it before the row's usage is replaced; the
    caller holds the session's lock). Whether a sample was kept."""
    key, estimate = compiled.count_key, compiled.estimate
    if key is None or estimate is None:
        return False
    apart = cache_apart(key)
    if reported_prompt(compiled.usage, apart) is not None:  # a repeated report is not a new one
        return False
    sample = sample_of(estimate, compiled.token_total, usage, apart)
    if sample is None:
        return False
    await calibrations.add_sample(db, tenant, pk, key, sample, now)
    return True
