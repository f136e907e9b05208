"""Provider profiles."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter

from app.api.deps import StateDep, TenantDep
from app.api.problems import responses
from app.api.schemas import ProviderList, ProviderRead
from app.domain.providers import BUILTIN_PROFILES

router = APIRouter(prefix="/v1/providers", tags=["providers"])


@router.get("", responses=responses(401), operation_id="list_providers")
async def list_providers(state: StateDep, _: TenantDep) -> ProviderList:
    """The built-in provider profiles: output shape, encoding, context window, capabilities.

    A session or a compile request may override the context window.
    """
    items = [ProviderRead(**asdict(p)) for p in BUILTIN_PROFILES]
    return ProviderList(items=items, default=state.settings.default_provider)
