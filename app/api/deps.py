"""Request dependencies: app state, database session, the caller's tenant."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession, async_sessionmaker

from app.adapters.events import EventBus
from app.adapters.summarizers.profiles import Summarizers
from app.adapters.upstream import Upstreams
from app.api.metrics import Metrics, Trigger, metered_compactor
from app.api.problems import ProblemError
from app.domain.compilers.registry import Registry
from app.domain.sessions import TenantId
from app.domain.tokens import TokenCounter
from app.services.compaction.compactor import Compactor, Deployment
from app.services.compaction.preparing import Preparer
from app.services.compiling import Context
from app.services.compiling.catching_up import catch_up
from app.services.compiling.digesting import Digester
from app.services.compiling.warming import warm
from app.services.sessions.cache import Lru, MessageCache
from app.services.sessions.events import EventReader
from app.services.tenancy import cpu, keys
from app.settings import Settings, is_loopback


@dataclass(frozen=True)
class AppState:
    """What the lifespan builds once and every request shares."""

    settings: Settings
    engine: AsyncEngine
    sessionmaker: async_sessionmaker[AsyncSession]
    counter: TokenCounter
    metrics: Metrics
    local_tenant: TenantId | None
    registry: Registry
    cache: MessageCache
    answers: Lru[bytes, bytes]  # /v1/compile answers (without their compile id) by request
    summarizer: Summarizers  # one per deployment profile
    events: EventBus
    event_reader: EventReader
    keys: keys.KeyCache
    cpu: cpu.TenantLimiters  # CPU-heavy work's worker threads, a few per tenant
    digester: Digester  # digests of long histories, made after the compiles that need them
    upstreams: Upstreams  # the sidecar's pooled HTTP to the provider APIs
    preparer: Preparer  # request-boundary compactions prepared in the background

    def compactor(
        self, db: AsyncSession, now: datetime, trigger: Trigger, preparer: Preparer | None = None
    ) -> Compactor:
        """A compactor in ``db``, its compactions counted under ``trigger``; ``preparer``:
        what prepares request-boundary compactions in the background (none: inline)."""
        deployment = Deployment(
            self.counter,
            self.summarizer.choose(None),
            self.settings.catalog,
            self.settings.compaction_lease_seconds,
            self.summarizer,
            preparer,
        )
        return metered_compactor(db, now, deployment, self.metrics, trigger)

    def compile_context(self, tenant: TenantId, db: AsyncSession | None = None) -> Context:
        """What a compile needs: a posted one's (no ``db``), or a session's with its
        compactions metered."""
        now, catalog = datetime.now(UTC), self.settings.catalog
        if db is None:
            return Context(self.cache, self.registry, catalog, tenant, now)
        compactor = self.compactor(db, now, "compile", self.preparer)
        return Context(
            self.cache, self.registry, catalog, tenant, now, db, compactor, self.digester
        )

    async def caught_up(self, tenant: TenantId, session_id: str) -> None:
        """After a write grew a session: its own view's digest brought up to date, and when
        that moved it, the compile with no options warmed."""
        catalog = self.settings.catalog
        done = await catch_up(self.digester, tenant, session_id, self.registry, catalog, self.cache)
        if done in ("made", "moved") and self.cache.views.max_bytes > 0:
            context = partial(self.compile_context, tenant)
            self.metrics.warmed.labels(await warm(self.sessionmaker, context, session_id)).inc()


async def get_state(request: Request) -> AppState:
    # async, though it awaits nothing: FastAPI runs a plain function dependency in a worker
    # thread, a thread round trip on every request.
    state: AppState = request.state.ctxc
    return state


StateDep = Annotated[AppState, Depends(get_state)]


async def get_db(state: StateDep) -> AsyncIterator[AsyncSession]:
    async with state.sessionmaker() as session:
        yield session


# scope="function": the session is closed before the response is sent, never after.
DbDep = Annotated[AsyncSession, Depends(get_db, scope="function")]
# Where a sidecar request carries ctxc's own key.
SIDECAR_KEY_HEADER = "x-ctxc-api-key"


def _unauthorized(detail: str) -> ProblemError:
    return ProblemError(
        401, "unauthorized", "Unauthorized", detail, headers={"WWW-Authenticate": "Bearer"}
    )


# Declares the scheme in OpenAPI for every route that needs a tenant; `get_tenant` reads the
# header itself (a non-Bearer Authorization is a 401, not "no key").
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    description="An API key from `ctxc keys create`: `Authorization: Bearer <key>`. Required "
    "with `CTXC_AUTH=keys`; in local mode requests from loopback without one act as tenant "
    "`local`.",
)
Declared = Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)]


async def get_tenant(request: Request, state: StateDep, declared: Declared) -> TenantId:
    """The tenant of the Bearer key; in local mode, keyless loopback callers are `local`. The
    request's CPU-heavy work then takes that tenant's worker slots (``cpu.run_sync``)."""
    tenant = await _tenant(request, state)
    cpu.enter(state.cpu, str(tenant))
    return tenant


async def _tenant(request: Request, state: StateDep) -> TenantId:
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, key = header.partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise _unauthorized("use `Authorization: Bearer <key>`")
        return await _keyed(state, key.strip())
    return _keyless(request, state)


async def sidecar_tenant(request: Request, state: AppState) -> TenantId:
    """The tenant of a sidecar request: its key travels in ``X-Ctxc-Api-Key``, since
    ``Authorization`` (or ``x-api-key``) carries the provider's, which ctxc passes on."""
    key = request.headers.get(SIDECAR_KEY_HEADER, "").strip()
    tenant = await _keyed(state, key) if key else _keyless(request, state)
    cpu.enter(state.cpu, str(tenant))
    return tenant


async def _keyed(state: AppState, key: str) -> TenantId:
    # A session of its own: the key is read (when not remembered) outside the route's
    # transaction, and its connection goes back to the pool at once.
    async with state.sessionmaker() as db:
        tenant = await keys.authenticate(db, key, state.keys)
    if tenant is None:
        raise _unauthorized("unknown or revoked API key")
    return tenant


def _keyless(request: Request, state: AppState) -> TenantId:
    client = request.client.host if request.client else ""
    if state.local_tenant is not None and is_loopback(client):
        return state.local_tenant
    raise _unauthorized("an API key is required")


TenantDep = Annotated[TenantId, Depends(get_tenant)]
