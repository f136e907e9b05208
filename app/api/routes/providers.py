"""Provider profiles and the models that resolve to them."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter

from app.api.deps import StateDep, TenantDep
from app.api.model_schemas import ModelList, ModelRead, ProviderList, ProviderRead
from app.api.problems import responses
from app.domain.models import Model, model_profile
from app.domain.providers import BUILTIN_PROFILES

router = APIRouter(tags=["providers"])


@router.get("/v1/providers", responses=responses(401), operation_id="list_providers")
async def list_providers(state: StateDep, _: TenantDep) -> ProviderList:
    """The built-in provider profiles: output shape, encoding, context window, capabilities.

    A session or a compile request may override the context window. A model name
    (`GET /v1/models`) may be given wherever a provider profile is.
    """
    items = [ProviderRead(**asdict(p)) for p in BUILTIN_PROFILES]
    return ProviderList(items=items, default=state.settings.default_provider)


@router.get("/v1/models", responses=responses(401), operation_id="list_models")
async def list_models(state: StateDep, _: TenantDep) -> ModelList:
    """The models a `provider` field may name, built in and declared in `CTXC_MODELS`, each
    with the profile it is sent as, its context window and encoding.

    A name resolves as a provider profile first, then as a model exactly, then as a model
    followed by one snapshot suffix (`-2025-04-14`, `-20250929`, `@20250929`, `-0613` or
    `-latest`).
    """
    return ModelList(items=[_model_read(m) for m in state.settings.catalog.models.values()])


def _model_read(model: Model) -> ModelRead:
    profile = model_profile(model, model.name)
    return ModelRead(
        name=model.name,
        provider=model.provider,
        output=profile.output,
        encoding=profile.encoding,
        exact=profile.exact,
        context_window=profile.context_window,
        declared=model.declared,
        description=profile.description,
    )
