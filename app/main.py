"""The application factory. `ctxc serve` runs it (it refuses local mode off loopback)."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager, suppress
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import fastapi.routing
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.adapters.events import create_bus
from app.adapters.summarizers.factory import summarizers_from_settings
from app.adapters.tokenizers import load_counter
from app.adapters.upstream import Upstreams
from app.api import openapi, problems
from app.api.compile_schemas import CompileRequest
from app.api.deps import AppState
from app.api.metrics import CacheCollector, Metrics
from app.api.middleware import BodyLimit, CatchAll, RequestId, RequestMetrics
from app.api.model_schemas import TokenCount
from app.api.routes import (
    compactions,
    compilation,
    events,
    health,
    messages,
    originals,
    providers,
    recall,
    sessions,
    sidecar,
    tokens,
    transfer,
)
from app.api.schemas import MessagesAppend, SessionExport
from app.api.transfer_schemas import SessionExportV2
from app.domain.sessions import TenantId
from app.domain.tokens import TokenCounter
from app.services.compaction import leases
from app.services.compaction.preparing import Preparer
from app.services.compiling.digesting import Digester
from app.services.compiling.plugins import load_registry
from app.services.sessions.cache import Lru, MessageCache
from app.services.sessions.events import EventReader
from app.services.sessions.retention import Retention, prune_forever
from app.services.tenancy.cpu import Lane, TenantLimiters
from app.services.tenancy.keys import KeyCache, local_tenant
from app.settings import Settings
from app.storage.db import create_engine, create_sessionmaker
from app.storage.migrate import check_schema

DOCS_STATIC = "/docs-static"
ROUTERS = (
    sessions,
    transfer,
    messages,
    compilation,
    compactions,
    originals,
    recall,
    events,
    tokens,
    providers,
    sidecar,
    health,
)


def create_app(settings: Settings | None = None) -> FastAPI:
    """A configured app; the lifespan opens the database, loads the tokenizers and builds the
    summariser."""
    settings = settings or Settings()
    metrics = Metrics()
    # /docs and /redoc with Swagger UI and ReDoc served from the installed package, not a CDN.
    app = FastAPIOffline(
        title="ctxc",
        version="0.1.0",
        summary="Context compilation as a service.",
        lifespan=_lifespan(settings, metrics),
        static_url=DOCS_STATIC,
    )
    problems.install(app)
    openapi.document(
        app, CompileRequest, MessagesAppend, SessionExport, SessionExportV2, TokenCount
    )
    for module in ROUTERS:
        app.include_router(module.router)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(CatchAll)
    app.add_middleware(RequestMetrics, metrics=metrics)
    app.add_middleware(RequestId)  # outermost: every log line of a request carries its id
    return app


Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[dict[str, AppState]]]


def _lifespan(settings: Settings, metrics: Metrics) -> Lifespan:
    """The app's lifespan: the state every request shares, closed in the reverse order."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, AppState]]:
        async with AsyncExitStack() as stack:
            state = await _open_state(settings, metrics, stack)
            _prime_endpoints()
            _settle(stack)
            yield {"ctxc": state}

    return lifespan


# Process-local state, and why each piece is correct with `--workers N` (every worker builds its
# own): the message and answer caches are keyed by what was posted (and the tenant) and hold what
# is a pure function of it, never stored data, so a miss in another worker recomputes the same
# bytes; the key cache re-reads a key within CTXC_KEY_CACHE_SECONDS in each worker (see
# KeyCache); the event bus wakes this worker's subscribers for every worker's commits (Postgres
# NOTIFY; on SQLite, at once in-process and by polling across processes); the event reader only
# shares in-flight reads; the CPU limiters bound a tenant per worker; leases, idempotency keys
# and cursors live in the database. Metrics are the answering worker's.
async def _open_state(settings: Settings, metrics: Metrics, stack: AsyncExitStack) -> AppState:
    """Open what the requests share, each closer pushed on ``stack`` once it is open."""
    engine = create_engine(
        settings.database_url, settings.db_pool_size, settings.sqlite_busy_timeout_seconds
    )
    stack.push_async_callback(engine.dispose)
    bus = create_bus(engine, settings.sse_queue_size)
    stack.push_async_callback(bus.close)
    await check_schema(engine)
    await bus.start()
    maker = create_sessionmaker(engine)
    local = await _local_tenant(settings, maker)
    counter = await anyio.to_thread.run_sync(load_counter)
    summarizer = summarizers_from_settings(settings, counter)
    stack.push_async_callback(summarizer.aclose)
    cache, answers = _caches(settings, counter, metrics, stack)
    upstreams, digester, preparer = await _background(settings, metrics, maker, stack)
    return AppState(
        settings=settings,
        engine=engine,
        sessionmaker=maker,
        counter=counter,
        metrics=metrics,
        local_tenant=local,
        registry=load_registry(),
        cache=cache,
        answers=answers,
        summarizer=summarizer,
        events=bus,
        event_reader=EventReader(maker),
        keys=KeyCache(settings.key_cache_seconds),
        cpu=TenantLimiters(settings.tenant_cpu_concurrency),
        digester=digester,
        upstreams=upstreams,
        preparer=preparer,
    )


def _caches(
    settings: Settings, counter: TokenCounter, metrics: Metrics, stack: AsyncExitStack
) -> tuple[MessageCache, Lru[bytes, bytes]]:
    """The parsed-message cache (with its stored, view and tail parts) and the answer cache,
    their sizes reported in /metrics while the app runs."""
    cache = MessageCache(
        counter,
        settings.compile_cache_bytes,
        stored_bytes=settings.stored_cache_bytes,
        view_bytes=settings.view_cache_bytes,
        tail_bytes=settings.tail_cache_bytes,
    )
    answers: Lru[bytes, bytes] = Lru(settings.answer_cache_bytes)
    caches: dict[str, Lru[Any, Any]] = {
        "messages": cache.entries,
        "stored": cache.stored,
        "answers": answers,
        "views": cache.views,
        "tails": cache.tails,
    }
    _collect(metrics, stack, CacheCollector(caches))
    return cache, answers


def _prime_endpoints() -> None:
    """Find each endpoint's source line now, as FastAPI does on the first request to it (for
    its error messages, by `inspect`: the module's lines read, the function's block tokenized),
    so that no request of a fresh server pays it (2.5-3.3 ms the first, for the stateless
    compile). Nothing to do on a FastAPI that does not do that, or does it differently."""
    extract = getattr(fastapi.routing, "_extract_endpoint_context", None)
    if extract is None:
        return
    try:
        for module in ROUTERS:
            for route in module.router.routes:
                if isinstance(route, APIRoute):
                    extract(route.dependant.call)
    except TypeError:  # a FastAPI whose private helper takes other arguments
        return


def _settle(stack: AsyncExitStack) -> None:
    """Leave what start-up made (modules, the tokenizers' tables) out of the garbage collector's
    scans until the app closes: otherwise the first big request pays a full collection over all
    of it (tens of ms for 1,000 messages), and every later full collection scans it again."""
    gc.collect()
    gc.freeze()
    stack.callback(gc.unfreeze)


async def _local_tenant(
    settings: Settings, maker: async_sessionmaker[AsyncSession]
) -> TenantId | None:
    """The tenant of local mode (made on first use), or None with keys."""
    if settings.auth != "local":
        return None
    async with maker() as db:
        return await local_tenant(db, datetime.now(UTC))


def _collect(metrics: Metrics, stack: AsyncExitStack, caches: CacheCollector) -> None:
    """Report the caches' sizes in /metrics while the app runs."""
    metrics.registry.register(caches)
    stack.callback(metrics.registry.unregister, caches)


async def _background(
    settings: Settings,
    metrics: Metrics,
    maker: async_sessionmaker[AsyncSession],
    stack: AsyncExitStack,
) -> tuple[Upstreams, Digester, Preparer]:
    """What works beside the requests (the upstreams' pool, the digests and compactions made
    after them, the lease sweeper, the retention sweep), stopped first on the way out."""
    sweeper = asyncio.create_task(leases.sweep_forever(maker, settings.compaction_lease_seconds))
    stack.push_async_callback(_cancelled, sweeper)
    retention = Retention(
        timedelta(seconds=settings.idempotency_ttl_seconds),
        timedelta(seconds=settings.compile_retention_seconds),
    )
    pruner = asyncio.create_task(prune_forever(maker, retention, settings.retention_sweep_seconds))
    stack.push_async_callback(_cancelled, pruner)
    upstreams = Upstreams(
        settings.upstream_timeout_seconds,
        settings.upstream_connect_timeout_seconds,
        settings.upstream_connections,
    )
    stack.push_async_callback(upstreams.aclose)
    lane = Lane()  # the background's CPU work, one step at a time, a bounded share
    digester = Digester(maker, lambda outcome: metrics.digests.labels(outcome).inc(), lane)
    metrics.digest_jobs.set_function(digester.running)
    stack.push_async_callback(digester.close)
    preparer = Preparer(
        maker,
        settings.compaction_lease_seconds,
        settings.background_compactions,
        lambda outcome: metrics.preparations.labels(outcome).inc(),
        lane,
    )
    stack.push_async_callback(preparer.close)
    return upstreams, digester, preparer


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with suppress(asyncio.CancelledError):
        await task
