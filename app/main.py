"""The application factory. `ctxc serve` runs it (it refuses local mode off loopback)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from datetime import UTC, datetime

import anyio
from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from app.adapters.events import create_bus
from app.adapters.summarizers.factory import summarizers_from_settings
from app.adapters.summarizers.profiles import Summarizers
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
from app.services import leases
from app.services.cache import Lru, MessageCache
from app.services.cpu import TenantLimiters
from app.services.digesting import Digester
from app.services.events import EventReader
from app.services.keys import KeyCache, local_tenant
from app.services.plugins import load_registry
from app.services.preparing import Preparer
from app.settings import Settings
from app.storage.db import create_engine, create_sessionmaker
from app.storage.migrate import check_schema

DOCS_STATIC = "/docs-static"


def create_app(settings: Settings | None = None) -> FastAPI:
    """A configured app; the lifespan opens the database, loads the tokenizers and builds the
    summariser."""
    settings = settings or Settings()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, AppState]]:
        engine = create_engine(
            settings.database_url, settings.db_pool_size, settings.sqlite_busy_timeout_seconds
        )
        summarizer: Summarizers | None = None
        caches: CacheCollector | None = None
        bus = create_bus(engine, settings.sse_queue_size)
        try:
            await check_schema(engine)
            await bus.start()
            maker = create_sessionmaker(engine)
            local = None
            if settings.auth == "local":
                async with maker() as db:
                    local = await local_tenant(db, datetime.now(UTC))
            # Process-local state, and why each piece is correct with `--workers N` (every
            # worker builds its own): the message and answer caches are keyed by what was posted
            # (and the tenant) and hold what is a pure function of it, never stored data, so a
            # miss in another worker recomputes the same bytes; the key cache re-reads a key
            # within CTXC_KEY_CACHE_SECONDS in each worker (see KeyCache); the event bus wakes
            # this worker's subscribers for every worker's commits (Postgres NOTIFY; on SQLite,
            # at once in-process and by polling across processes); the event reader only shares
            # in-flight reads; the CPU limiters bound a tenant per worker; leases, idempotency
            # keys and cursors live in the database. Metrics are the answering worker's.
            counter = await anyio.to_thread.run_sync(load_counter)
            cache = MessageCache(counter, settings.compile_cache_bytes)
            answers: Lru[bytes, bytes] = Lru(settings.answer_cache_bytes)
            summarizer = summarizers_from_settings(settings, counter)
            caches = CacheCollector({"messages": cache.entries, "answers": answers})
            metrics.registry.register(caches)
            digester = Digester(maker, lambda outcome: metrics.digests.labels(outcome).inc())
            upstreams = Upstreams(
                settings.upstream_timeout_seconds, settings.upstream_connect_timeout_seconds,
                settings.upstream_connections,
            )  # fmt: skip
            preparer = Preparer(
                maker,
                settings.compaction_lease_seconds,
                settings.background_compactions,
                lambda outcome: metrics.preparations.labels(outcome).inc(),
            )
            state = AppState(
                settings, engine, maker, counter, metrics, local, load_registry(), cache, answers,
                summarizer, bus, EventReader(maker), KeyCache(settings.key_cache_seconds),
                TenantLimiters(settings.tenant_cpu_concurrency), digester, upstreams, preparer,
            )  # fmt: skip
            sweeper = asyncio.create_task(
                leases.sweep_forever(maker, settings.compaction_lease_seconds)
            )
            try:
                yield {"ctxc": state}
            finally:
                await preparer.close()
                await digester.close()
                await upstreams.aclose()
                sweeper.cancel()
                with suppress(asyncio.CancelledError):
                    await sweeper
        finally:
            if caches is not None:
                metrics.registry.unregister(caches)
            await bus.close()
            if summarizer is not None:
                await summarizer.aclose()
            await engine.dispose()

    # /docs and /redoc with Swagger UI and ReDoc served from the installed package, not a CDN.
    app = FastAPIOffline(
        title="ctxc",
        version="0.1.0",
        summary="Context compilation as a service.",
        lifespan=lifespan,
        static_url=DOCS_STATIC,
    )
    problems.install(app)
    openapi.document(
        app, CompileRequest, MessagesAppend, SessionExport, SessionExportV2, TokenCount
    )
    routers = (
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
    )
    for module in (*routers, health):
        app.include_router(module.router)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(CatchAll)
    app.add_middleware(RequestMetrics, metrics=metrics)
    app.add_middleware(RequestId)  # outermost: every log line of a request carries its id
    return app
