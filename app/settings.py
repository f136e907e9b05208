"""Configuration: one settings class, read from ``CTXC_*`` environment variables."""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path
from typing import Literal

from pydantic import (
    Field,
    PrivateAttr,
    SecretStr,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from app.domain.errors import UnknownName
from app.domain.models import BUILTIN_CATALOG, Catalog, ModelDeclaration, build_catalog
from app.domain.summaries.profiles import (
    DEFAULT_PROFILE,
    EXTRACTIVE_PROFILE,
    LEDGER_PROFILE,
    BackendKind,
    ProfileSpec,
    fallback_chain_problem,
)
from app.settings_profiles import declared_profiles, is_http_url, window_problem

DEFAULT_DATABASE_URL = "sqlite+aiosqlite:///./data/ctxc.db"
DATABASE_DRIVERS = ("sqlite+aiosqlite", "postgresql+asyncpg")
DATABASE_URL_FORMS = "sqlite+aiosqlite:///path or postgresql+asyncpg://user:pass@host/db"
ANTHROPIC_URL = "https://api.anthropic.com"
GEMINI_URL = "https://generativelanguage.googleapis.com"
SummarizerKind = BackendKind
# Workers `ctxc serve` runs when CTXC_WORKERS is unset: one per usable core, at most this many
# (each holds its tokenizers, caches and database pool: about 230 MiB).
DEFAULT_WORKERS_AT_MOST = 4


class Settings(BaseSettings):
    """Every setting of the service; the README's configuration table mirrors this class."""

    # hide_input_in_errors: a configuration error must not print the keys and secrets it holds.
    model_config = SettingsConfigDict(env_prefix="CTXC_", extra="ignore", hide_input_in_errors=True)

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
    tenant_cpu_concurrency: int = Field(
        2,
        ge=1,
        description="Worker threads one tenant's CPU-heavy work (compiles, big bodies, imports, "
        "token counts) may hold at once; its further work waits for one of them.",
    )
    request_read_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="Time a client has to send a whole request, headers and body, from its "
        "first byte (or from connecting); a slower one gets a 408 and its connection is closed.",
    )
    response_write_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="Time an answer may wait for a client that stopped reading it (the send "
        "buffers are full); then the connection is dropped.",
    )
    keep_alive_seconds: int = Field(
        75,
        ge=1,
        le=3600,
        description="How long an idle kept-alive connection stays open for its next request; "
        "longer than client pools keep theirs (httpx: 5 s), so the client closes first and "
        "never sends a request into a connection the server is closing.",
    )
    workers: int | None = Field(
        None,
        ge=1,
        le=64,
        description="Server processes `ctxc serve` runs on one port (`--workers`); unset: one "
        "per core this process may use, at most 4.",
    )
    key_cache_seconds: float = Field(
        5.0,
        ge=0,
        description="How long a verified API key is remembered in the process: a revoked key "
        "is refused by running servers within this many seconds (0: read the key on every "
        "request).",
    )
    idempotency_ttl_seconds: int = Field(
        86_400,
        ge=60,
        description="How long an Idempotency-Key is remembered; a retry after it is a new request.",
    )
    compile_retention_seconds: int = Field(
        86_400,
        ge=60,
        description="How long a compile can be acknowledged: older compile records are "
        "deleted, but a session's newest and last reported ones.",
    )
    retention_sweep_seconds: float = Field(
        60.0,
        gt=0,
        le=86_400,
        description="How often each process deletes expired idempotency keys and compile "
        "records (in batches of 500 rows).",
    )
    compile_cache_bytes: int = Field(
        64 * 1024 * 1024, ge=0, description="Posted JSON kept parsed and counted (LRU bytes)."
    )
    stored_cache_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Stored messages kept parsed for session compiles (and the tail an append "
        "that moves a digest parsed), by session and seq (LRU, estimated bytes; 0 turns it off).",
    )
    view_cache_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Session compiles kept by session, history version and last seq, and what "
        "else they depend on, for compilers that are repeatable, with the compile a write that "
        "moved a digest warms (LRU, estimated bytes; 0 turns both off).",
    )
    tail_cache_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="The tails long session compiles read, and the short histories full compiles "
        "read whole, kept by session (and view or encoding) so the next compile reads only the "
        "rows stored since (LRU, estimated bytes; 0 turns it off).",
    )
    answer_cache_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Answers of `/v1/compile` kept by request body, for requests whose compiler "
        "is repeatable (LRU bytes; 0 turns it off).",
    )
    metrics_token: SecretStr | None = Field(
        None,
        description="With `CTXC_AUTH=keys`, `/metrics` answers only `Authorization: Bearer "
        "<this token>` (a scraper's credential, not a tenant's key); unset, it is off (404).",
    )
    default_provider: str = Field(
        "openai", description="Provider profile or model of new sessions."
    )
    models: str | None = Field(
        None,
        description="Models of your own, as a JSON object or the path of a JSON file: "
        '{"name": {"provider": "<profile or built-in model>", "context_window": N, '
        '"encoding": "o200k_base" | "cl100k_base", "description": "..."}}.',
    )
    sse_heartbeat_seconds: float = Field(
        15,
        gt=0,
        description="Seconds between heartbeat comments on an idle event stream, so proxies "
        "keep it open.",
    )
    sse_queue_size: int = Field(
        8,
        ge=1,
        description="Wake-ups an event subscriber can have pending; more are merged (events "
        "are read from the database, so none is lost).",
    )
    compaction_lease_seconds: float = Field(
        30.0,
        ge=1,
        le=3600,
        description="Lifetime of a compaction lease: the request summarising a session renews "
        "it every third of this; one a stopped process leaves is taken over once it expires.",
    )
    background_compactions: int = Field(
        4,
        ge=1,
        le=64,
        description="Compactions this process prepares in the background at once (one per "
        "session; more wait their turn).",
    )
    db_pool_size: int = Field(10, ge=1, description="Postgres connection pool size.")
    sqlite_busy_timeout_seconds: float = Field(
        30.0,
        gt=0,
        description="How long a SQLite write waits for another writer's lock before the "
        "request gets a 503 (database unavailable).",
    )
    log_level: str = Field("info", description="Log level of the service.")
    summarizer: SummarizerKind = Field(
        "ledger",
        description="Who writes summaries: the built-in `ledger` summariser (offline, "
        "deterministic: typed entries merged across compactions), the older built-in "
        "`extractive` one, an "
        "`openai`-compatible chat endpoint, the `anthropic` Messages API or your `webhook`.",
    )
    summarizer_url: str | None = Field(
        None,
        description="openai: the base URL ending in /v1 (posts to {url}/chat/completions); "
        f"anthropic: the base URL (posts to {{url}}/v1/messages; default {ANTHROPIC_URL}); "
        "webhook: the URL posted to.",
    )
    summarizer_model: str | None = Field(None, description="Model name (openai, anthropic).")
    summarizer_api_key: SecretStr | None = Field(
        None, description="Bearer key (openai, optional) or x-api-key (anthropic, required)."
    )
    summarizer_webhook_secret: SecretStr | None = Field(
        None, description="HMAC-SHA256 key that signs each webhook body (webhook, required)."
    )
    summarizer_timeout_seconds: float = Field(
        30.0, gt=0, description="Time limit of one summariser request."
    )
    summarizer_retries: int = Field(
        2, ge=0, le=10, description="Retries after a timeout, connection error, 408, 429 or 5xx."
    )
    summarizer_deadline_seconds: float = Field(
        120.0, gt=0, description="Time limit of one whole summary (chunks and retries included)."
    )
    summarizer_window_tokens: int = Field(
        32_000, ge=1_024, description="Context window of the summariser's model."
    )
    summarizer_max_tokens: int = Field(
        2_000,
        ge=64,
        description="Length of a summary: the model's max_tokens, the built-in summarisers' "
        "budget (the ledger's is exact; the extractive one keeps references beyond it).",
    )
    summarizer_profiles: str | None = Field(
        None,
        description="Named summariser profiles a session's compaction policy may choose, as a "
        'JSON object or the path of a JSON file: {"name": {"kind": "openai" | "anthropic" | '
        '"webhook" | "ledger" | "extractive", "url", "model", "api_key", "webhook_secret", '
        '"timeout_seconds", "retries", "deadline_seconds", "window_tokens", "max_tokens", '
        '"fallback": "<profile, ledger or extractive>"}}; limits left out are the '
        "CTXC_SUMMARIZER_* ones. `default` (the CTXC_SUMMARIZER* settings), `ledger` and "
        "`extractive` are always there.",
    )
    openai_upstream: str = Field(
        "https://api.openai.com/v1",
        description="Where the sidecar's OpenAI endpoint (`/openai/v1`) forwards: the base URL of "
        "any OpenAI-compatible API.",
    )
    anthropic_upstream: str = Field(
        ANTHROPIC_URL, description="Where the sidecar's Anthropic endpoint (`/anthropic`) forwards."
    )
    gemini_upstream: str = Field(
        GEMINI_URL,
        description="Where the sidecar's Gemini endpoint (`/gemini`) forwards: the base URL of "
        "the Gemini API (before `/v1beta`).",
    )
    upstream_timeout_seconds: float = Field(
        600.0,
        gt=0,
        description="Time limit of the sidecar's upstream request: for an answer, or between two "
        "pieces of a streamed one.",
    )
    upstream_connect_timeout_seconds: float = Field(
        10.0, gt=0, description="Time limit of connecting to an upstream."
    )
    upstream_connections: int = Field(
        100, ge=1, description="Connections the sidecar keeps open to each upstream, at most."
    )

    _catalog: Catalog = PrivateAttr(BUILTIN_CATALOG)
    _profiles: dict[str, ProfileSpec] = PrivateAttr(default_factory=dict)

    @property
    def serve_workers(self) -> int:
        """The workers `ctxc serve` runs: ``workers``, else one per usable core (at most
        ``DEFAULT_WORKERS_AT_MOST``)."""
        if self.workers is not None:
            return self.workers
        return max(1, min(len(os.sched_getaffinity(0)), DEFAULT_WORKERS_AT_MOST))

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def catalog(self) -> Catalog:
        """The provider profiles and models (built-in and ``CTXC_MODELS``)."""
        return self._catalog

    @property
    def profiles(self) -> dict[str, ProfileSpec]:
        """The summariser profiles, every limit filled in: ``default`` (``CTXC_SUMMARIZER*``),
        ``ledger``, ``extractive`` and those of ``CTXC_SUMMARIZER_PROFILES``."""
        return self._profiles

    @field_validator("database_url")
    @classmethod
    def _database_url_is_supported(cls, url: str) -> str:
        try:
            driver = make_url(url).drivername
        except ArgumentError:
            raise ValueError(f"not a database URL; use {DATABASE_URL_FORMS}") from None
        if driver not in DATABASE_DRIVERS:
            raise ValueError(f"the driver {driver!r} is not supported; use {DATABASE_URL_FORMS}")
        return url

    @field_validator("openai_upstream", "anthropic_upstream", "gemini_upstream")
    @classmethod
    def _upstream_is_http(cls, url: str) -> str:
        if not is_http_url(url):
            raise ValueError(f"must be an http(s) URL, not {url!r}")
        return url.rstrip("/")

    @model_validator(mode="after")
    def _summarizer_is_complete(self) -> Settings:
        problems = summarizer_problems(self)
        if problems:
            raise ValueError("; ".join(problems))
        self._profiles = resolved_profiles(self)
        return self

    @model_validator(mode="after")
    def _models_are_valid(self) -> Settings:
        self._catalog = build_catalog(declared_models(self.models))
        try:
            self._catalog.resolve(self.default_provider)
        except UnknownName:
            raise ValueError(
                f"CTXC_DEFAULT_PROVIDER {self.default_provider!r} is neither a provider profile "
                "nor a known model"
            ) from None
        return self


LOCAL_TENANT = "local"


def summarizer_problems(settings: Settings) -> list[str]:
    """What the configured summariser lacks (empty when it is complete)."""
    kind = settings.summarizer
    if kind in ("ledger", "extractive"):
        return []
    needs = {
        "openai": ("url", "model"),
        "anthropic": ("model", "api_key"),
        "webhook": ("url", "webhook_secret"),
    }[kind]
    problems = [
        f"CTXC_SUMMARIZER={kind} needs CTXC_SUMMARIZER_{name.upper()}"
        for name in needs
        if not getattr(settings, f"summarizer_{name}")
    ]
    url = settings.summarizer_url
    if url is not None and not is_http_url(url):
        problems.append(f"CTXC_SUMMARIZER_URL must be an http(s) URL, not {url!r}")
    least = 3 * settings.summarizer_max_tokens + 1_024
    if settings.summarizer_window_tokens < least:
        problems.append(
            f"CTXC_SUMMARIZER_WINDOW_TOKENS must be at least 3 x CTXC_SUMMARIZER_MAX_TOKENS "
            f"+ 1024 ({least}), so that partial summaries can be merged"
        )
    return problems


def resolved_profiles(settings: Settings) -> dict[str, ProfileSpec]:
    """``default``, ``ledger``, ``extractive`` and the declared profiles with the default limits
    filled in (ValueError when one is unusable)."""
    limits = {
        "timeout_seconds": settings.summarizer_timeout_seconds,
        "retries": settings.summarizer_retries,
        "deadline_seconds": settings.summarizer_deadline_seconds,
        "window_tokens": settings.summarizer_window_tokens,
        "max_tokens": settings.summarizer_max_tokens,
    }
    default = ProfileSpec(
        kind=settings.summarizer,
        url=settings.summarizer_url,
        model=settings.summarizer_model,
        api_key=settings.summarizer_api_key,
        webhook_secret=settings.summarizer_webhook_secret,
        **limits,
    )
    profiles = {
        DEFAULT_PROFILE: default,
        LEDGER_PROFILE: ProfileSpec(kind="ledger", **limits),
        EXTRACTIVE_PROFILE: ProfileSpec(kind="extractive", **limits),
    }
    problems: list[str] = []
    for name, spec in declared_profiles(settings.summarizer_profiles).items():
        given = spec.model_dump(exclude_none=True)
        filled = spec.model_copy(update={k: v for k, v in limits.items() if k not in given})
        problem = window_problem(name, filled.window_tokens or 0, filled.max_tokens or 0)
        if problem is not None:
            problems.append(problem)
        profiles[name] = filled
    chain = fallback_chain_problem(profiles)
    if chain is not None:
        problems.append(f"CTXC_SUMMARIZER_PROFILES: {chain}")
    if problems:
        raise ValueError("; ".join(problems))
    return profiles


_DECLARATIONS = TypeAdapter(dict[str, ModelDeclaration])


def declared_models(value: str | None) -> dict[str, ModelDeclaration]:
    """``CTXC_MODELS``: a JSON object, or the path of a file holding one (ValueError when not)."""
    if value is None or not value.strip():
        return {}
    text = value
    if not value.lstrip().startswith(("{", "[")):
        try:
            text = Path(value).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(
                f"CTXC_MODELS is neither a JSON object nor a readable file: {exc}"
            ) from None
    try:
        return _DECLARATIONS.validate_python(json.loads(text))
    except json.JSONDecodeError as exc:
        raise ValueError(f"CTXC_MODELS is not valid JSON: {exc}") from None
    except ValidationError as exc:
        found = "; ".join(
            f"CTXC_MODELS{''.join(f'[{part!r}]' for part in e['loc'])}: {e['msg']}"
            for e in exc.errors()
        )
        raise ValueError(found) from None


def is_loopback(host: str) -> bool:
    """True for addresses that only this machine can reach."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
