"""Configuration: one settings class, read from ``CTXC_*`` environment variables."""

from __future__ import annotations

import ipaddress
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/ctxc.db"


class Settings(BaseSettings):
    """Every setting of the service; the README's configuration table mirrors this class."""

    model_config = SettingsConfigDict(env_prefix="CTXC_", extra="ignore")

    database_url: str = Field(
        DEFAULT_DATABASE_URL,
        description="SQLAlchemy async URL: sqlite+aiosqlite:///path or postgresql+asyncpg://...",
    )
    host: str = Field("127.0.0.1", description="Address `ctxc serve` listens on.")
    port: int = Field(8080, ge=1, le=65535, description="Port `ctxc serve` listens on.")
    auth: Literal["keys", "local"] = Field(
        "local",
        description="`keys`: every request needs a Bearer key. `local`: requests without a key "
        "act as tenant `local`; allowed only on a loopback address.",
    )
    max_body_bytes: int = Field(
        16 * 1024 * 1024, ge=1024, description="Request bodies larger than this get a 413."
    )
    key_cache_seconds: float = Field(
        5.0,
        ge=0,
        description="How long a verified API key is remembered in the process: a revoked key "
        "is refused by running servers within this many seconds (0: read the key on every "
        "request).",
    )
    idempotency_ttl_seconds: int = Field(
        86_400, ge=60, description="How long an Idempotency-Key is remembered."
    )
    compile_cache_bytes: int = Field(
        64 * 1024 * 1024, ge=0, description="Posted JSON kept parsed and counted (LRU bytes)."
    )
    answer_cache_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Answers of `/v1/compile` kept by request body, for requests whose compiler "
        "is repeatable (LRU bytes; 0 turns it off).",
    )
    default_provider: str = Field("openai", description="Provider profile of new sessions.")
    db_pool_size: int = Field(10, ge=1, description="Postgres connection pool size.")
    log_level: str = Field("info", description="Log level of the service.")

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")


LOCAL_TENANT = "local"


def is_loopback(host: str) -> bool:
    """True for addresses that only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
