"""The application factory. `uvicorn --factory app.main:create_app` serves it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import anyio
from fastapi import FastAPI
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from app.adapters.tokenizers import load_counter
from app.api import problems
from app.api.deps import AppState
from app.api.middleware import BodyLimit, Metrics, RequestMetrics
from app.api.routes import health, messages, sessions, tokens
from app.domain.sessions import TenantId
from app.services.keys import ensure_tenant
from app.settings import LOCAL_TENANT, Settings
from app.storage.db import create_engine, create_sessionmaker
from app.storage.migrate import check_schema


def create_app(settings: Settings | None = None) -> FastAPI:
    """A configured app; the lifespan opens the database and loads the tokenizers."""
    settings = settings or Settings()
    metrics = Metrics()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[dict[str, AppState]]:
        engine = create_engine(settings.database_url, settings.db_pool_size)
        try:
            await check_schema(engine)
            maker = create_sessionmaker(engine)
            local = await _local_tenant(maker) if settings.auth == "local" else None
            counter = await anyio.to_thread.run_sync(load_counter)
            yield {"ctxc": AppState(settings, engine, maker, counter, metrics, local)}
        finally:
            await engine.dispose()

    app = FastAPI(
        title="ctxc",
        version="0.1.0",
        summary="Context compilation as a service.",
        lifespan=lifespan,
    )
    problems.install(app)
    for module in (sessions, messages, tokens, health):
        app.include_router(module.router)
    app.add_middleware(BodyLimit, limit=settings.max_body_bytes)
    app.add_middleware(RequestMetrics, metrics=metrics)
    return app


async def _local_tenant(maker: async_sessionmaker[AsyncSession]) -> TenantId:
    """The tenant keyless loopback callers act as in local mode."""
    async with maker() as db:
        tenant = await ensure_tenant(db, LOCAL_TENANT, datetime.now(UTC))
        await db.commit()
        return tenant
