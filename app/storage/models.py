"""ORM rows. The schema covers all of the design: later capabilities add endpoints, not tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from typing import Any, overload

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

NAMING = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# Plain `json` on Postgres, not `jsonb`: jsonb reorders keys and rewrites numbers, and stored
# messages must come back exactly as they were posted.
Json = JSON()
# SQLite only auto-increments an INTEGER PRIMARY KEY.
BigId = BigInteger().with_variant(Integer(), "sqlite")


class UTCDateTime(TypeDecorator[datetime]):
    """A timezone-aware UTC timestamp on both databases (SQLite stores it naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("naive datetime")
        # SQLite keeps the wall-clock time and drops the offset: store the instant in UTC.
        return None if value is None else value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value


def utc_offset(at: datetime) -> int:
    """Seconds east of UTC of an aware datetime."""
    offset = at.utcoffset()
    if offset is None:
        raise ValueError("naive datetime")
    return int(offset.total_seconds())


def at_offset(utc: datetime, seconds: int) -> datetime:
    """The instant ``utc`` shown at the UTC offset it was given with."""
    return utc.astimezone(timezone(timedelta(seconds=seconds))) if seconds else utc


class LocalTime:
    """A time attribute kept in two columns: its UTC instant and the offset it was given with,
    so it reads back as it was written, on both databases."""

    def __init__(self, utc: str, offset: str) -> None:
        self.utc, self.offset = utc, offset

    @overload
    def __get__(self, row: None, owner: type) -> LocalTime: ...
    @overload
    def __get__(self, row: object, owner: type) -> datetime: ...
    def __get__(self, row: object, owner: type) -> datetime | LocalTime:
        if row is None:  # on the class: the descriptor (the ORM's constructor looks for it)
            return self
        return at_offset(getattr(row, self.utc), getattr(row, self.offset))

    def __set__(self, row: object, value: datetime) -> None:
        setattr(row, self.utc, value)
        setattr(row, self.offset, utc_offset(value))


def _session_fk() -> Mapped[str]:
    return mapped_column(
        String(36), ForeignKey("sessions.pk", ondelete="CASCADE"), primary_key=True
    )


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


class TenantRow(Base):
    __tablename__ = "tenants"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ApiKeyRow(Base):
    __tablename__ = "api_keys"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    prefix: Mapped[str] = mapped_column(String(32), index=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)
    label: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class SessionRow(Base):
    __tablename__ = "sessions"
    __table_args__ = (UniqueConstraint("tenant_id", "id"),)

    pk: Mapped[str] = mapped_column(String(36), primary_key=True)
    tenant_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("tenants.id", ondelete="CASCADE"), index=True
    )
    id: Mapped[str] = mapped_column(String(128))
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", Json)
    system_prompt: Mapped[list[dict[str, Any]]] = mapped_column(Json)
    response_format: Mapped[dict[str, Any] | None] = mapped_column(Json)
    provider: Mapped[str] = mapped_column(String(64))
    # The session's own profile: overrides on its provider's (see ProfileOverrides).
    profile: Mapped[dict[str, Any] | None] = mapped_column(Json)
    resume_key: Mapped[str | None] = mapped_column(String(1024))
    context_window: Mapped[int | None] = mapped_column(Integer)
    compiler: Mapped[dict[str, Any] | None] = mapped_column(Json)
    compaction_policy: Mapped[dict[str, Any] | None] = mapped_column(Json)
    # The highest seq handed out; bumping it row-locks the session, which keeps seq gap-free.
    last_seq: Mapped[int] = mapped_column(BigInteger, default=0)
    cursor_seq: Mapped[int | None] = mapped_column(BigInteger)
    provider_session_id: Mapped[str | None] = mapped_column(String(256))
    # Times are stored as UTC instants with the offset they came with (an import keeps both).
    created_utc: Mapped[datetime] = mapped_column("created_at", UTCDateTime())
    created_offset: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    updated_utc: Mapped[datetime] = mapped_column("updated_at", UTCDateTime())
    updated_offset: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    created_at = LocalTime("created_utc", "created_offset")
    updated_at = LocalTime("updated_utc", "updated_offset")
    # The compaction lease (app/services/compaction/leases.py): who summarises the session now,
    # until when, and the id of the `context_compaction_start` it announced (closed when it ends).
    compaction_holder: Mapped[str | None] = mapped_column(String(64))
    compaction_expires: Mapped[datetime | None] = mapped_column(UTCDateTime(), index=True)
    compaction_start_event: Mapped[int | None] = mapped_column(BigInteger)
    # How many compactions rewrote the history: what digests were made of (storage/digests.py).
    history_version: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Running totals of the live messages, changed in the transaction of every write that
    # changes them (append, compaction, import): reading a session never sums its history.
    message_count: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    tokens_o200k: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")
    tokens_cl100k: Mapped[int] = mapped_column(BigInteger, default=0, server_default="0")


class MessageRow(Base):
    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_section", "session_pk", "section", "seq"),)

    session_pk: Mapped[str] = _session_fk()
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    section: Mapped[str] = mapped_column(String(64))
    role: Mapped[str] = mapped_column(String(16))
    name: Mapped[str | None] = mapped_column(String(256))
    content: Mapped[list[dict[str, Any]]] = mapped_column(Json)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", Json)
    tokens_o200k: Mapped[int] = mapped_column(Integer)
    tokens_cl100k: Mapped[int] = mapped_column(Integer)
    created_utc: Mapped[datetime] = mapped_column("created_at", UTCDateTime())
    created_offset: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    created_at = LocalTime("created_utc", "created_offset")

    def tokens(self, encoding: str) -> int:
        """The stored count in ``encoding``."""
        return self.tokens_o200k if encoding == "o200k_base" else self.tokens_cl100k


class ToolPartRow(Base):
    """Where each tool call and tool result sits, so originals can be found by call id."""

    __tablename__ = "tool_parts"
    __table_args__ = (Index("ix_tool_parts_call", "session_pk", "call_id"),)

    session_pk: Mapped[str] = _session_fk()
    seq: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    idx: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(8))  # "call" or "result"
    call_id: Mapped[str] = mapped_column(String(512))
    tool_name: Mapped[str | None] = mapped_column(String(256))


class IdempotencyKeyRow(Base):
    __tablename__ = "idempotency_keys"

    tenant_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    session_pk: Mapped[str] = mapped_column(
        String(36), ForeignKey("sessions.pk", ondelete="CASCADE"), index=True
    )
    fingerprint: Mapped[str] = mapped_column(String(64))
    status: Mapped[int] = mapped_column(Integer)
    response: Mapped[dict[str, Any]] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())

    # The retention sweep finds expired keys of every tenant by age (app/storage/retention.py).
    __table_args__ = (Index("ix_idempotency_keys_created", "created_at"),)


class CompileRow(Base):
    """One compile answer, kept so a caller can acknowledge it (the cursor) for the retention
    (app/storage/retention.py)."""

    __tablename__ = "compiles"
    __table_args__ = (
        Index("ix_compiles_session", "session_pk", "created_at"),
        # The last reported compile of a session, read as one index entry.
        Index("ix_compiles_reported", "session_pk", "reported_at"),
        # The retention sweep walks old compiles in age order.
        Index("ix_compiles_created", "created_at", "id"),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    session_pk: Mapped[str] = mapped_column(
        String(36), ForeignKey("sessions.pk", ondelete="CASCADE")
    )
    mode: Mapped[str] = mapped_column(String(8))  # "full" or "delta"
    seq_from: Mapped[int | None] = mapped_column(BigInteger)
    seq_to: Mapped[int | None] = mapped_column(BigInteger)
    token_total: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    usage: Mapped[dict[str, Any] | None] = mapped_column(Json)
    error_kind: Mapped[str | None] = mapped_column(String(32))
    # When the caller last reported how the model call went (success or error).
    reported_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # A full compile to a profile whose tokenizer is not public: the raw estimate (token_total is
    # the figure answered, calibrated or not) and what a reported count of it teaches (the key of
    # app/domain/calibration.py). Null otherwise: nothing to learn.
    estimate: Mapped[int | None] = mapped_column(Integer)
    count_key: Mapped[str | None] = mapped_column(String(255))


class SessionCalibrationRow(Base):
    """A session's newest samples of reported against estimated counts, by count key
    (app/domain/calibration.py): ``[[estimated, reported, given], ...]``, oldest first."""

    __tablename__ = "session_calibrations"

    session_pk: Mapped[str] = _session_fk()
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    samples: Mapped[list[list[int]]] = mapped_column(Json)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ProfileCalibrationRow(Base):
    """A tenant's newest samples for a count key, across its sessions."""

    __tablename__ = "profile_calibrations"

    tenant_id: Mapped[str] = mapped_column(
        String(36), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    samples: Mapped[list[list[int]]] = mapped_column(Json)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class CompactionRow(Base):
    """One compaction and the archive of what it removed, exactly as stored."""

    __tablename__ = "compactions"
    __table_args__ = (Index("ix_compactions_session", "session_pk", "created_at"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    session_pk: Mapped[str] = mapped_column(
        String(36), ForeignKey("sessions.pk", ondelete="CASCADE")
    )
    kind: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(String(32))
    seq_from: Mapped[int | None] = mapped_column(BigInteger)
    seq_to: Mapped[int | None] = mapped_column(BigInteger)
    summary_seq: Mapped[int | None] = mapped_column(BigInteger)
    archived: Mapped[list[dict[str, Any]]] = mapped_column(Json)
    tokens_before: Mapped[int] = mapped_column(Integer)
    tokens_after: Mapped[int] = mapped_column(Integer)
    summary_tokens: Mapped[int] = mapped_column(Integer)
    cache_rewrite_tokens: Mapped[int] = mapped_column(Integer)
    resets_provider_session: Mapped[bool] = mapped_column(Boolean, default=False)
    summarizer: Mapped[str | None] = mapped_column(String(128))  # which one wrote the summary
    # Why not the one its policy names (app.domain.summaries.SUMMARIZER_REASONS; None: it did).
    summarizer_reason: Mapped[str | None] = mapped_column(String(32), nullable=True)
    loss: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)  # Loss.as_json()
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # When its summary was made in the background (None: by the request that applied it).
    prepared_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), nullable=True)
    # The cache-economic gate's figures (request-boundary compactions of a compile).
    economics: Mapped[dict[str, Any] | None] = mapped_column(Json, nullable=True)


class PreparedCompactionRow(Base):
    """A request-boundary compaction summarised in the background and not yet applied: the seqs
    it takes, a digest of their stored content (swapped in only if both still hold) and the
    summary. At most one per session; gone with every rewrite of the history."""

    __tablename__ = "prepared_compactions"

    session_pk: Mapped[str] = _session_fk()
    seqs: Mapped[list[int]] = mapped_column(Json)
    digest: Mapped[str] = mapped_column(String(64))
    summary: Mapped[dict[str, Any]] = mapped_column(Json)
    prepared_at: Mapped[datetime] = mapped_column(UTCDateTime())


class EventRow(Base):
    """The durable event log; ids increase and drive SSE Last-Event-ID replay. They are never
    reused, also after a session's events go with it: SQLite's AUTOINCREMENT (a plain rowid
    would hand the highest deleted id out again), a sequence on Postgres."""

    __tablename__ = "events"
    __table_args__ = (
        Index("ix_events_session", "session_pk", "id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    session_pk: Mapped[str] = mapped_column(
        String(36), ForeignKey("sessions.pk", ondelete="CASCADE")
    )
    type: Mapped[str] = mapped_column(String(64))
    data: Mapped[dict[str, Any]] = mapped_column(Json)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class PayloadRow(Base):
    """An original tool payload field, retrievable by its sha256 after compaction."""

    __tablename__ = "payloads"

    session_pk: Mapped[str] = _session_fk()
    sha256: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[Any] = mapped_column(Json)
    bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())


class ProxyThreadRow(Base):
    """What the sidecar proxy knows of the history an agent resends on every turn
    (app/services/sidecar/threads.py): hash chains over the first ``sent`` messages as the agent
    sent them (``raw``, compared first, and ``chain``, of their canonical keys), and the digest
    of the ``replies`` messages ctxc stored after them (the upstream's answer, which the agent
    resends in its own serialisation). The conversations beside a session (``family``: its id)
    are found by their ``root``."""

    __tablename__ = "proxy_threads"
    __table_args__ = (Index("ix_proxy_threads_family", "family", "root"),)

    session_pk: Mapped[str] = _session_fk()
    format: Mapped[str] = mapped_column(String(16))  # "openai" or "anthropic"
    sent: Mapped[int] = mapped_column(BigInteger)
    chain: Mapped[str] = mapped_column(String(64))
    raw: Mapped[str] = mapped_column(String(32))  # a fast hash of the same messages as sent
    replies: Mapped[int] = mapped_column(Integer)
    reply: Mapped[str] = mapped_column(String(64))
    turns: Mapped[int] = mapped_column(BigInteger)  # turns stored: what a racing turn checks
    forks: Mapped[int] = mapped_column(Integer)  # branches moved aside under this id so far
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    # The chain of the conversation's system prompt and first message (its root), and for a
    # conversation beside another under one session id, that session's id (its family).
    root: Mapped[str | None] = mapped_column(String(64))
    family: Mapped[str | None] = mapped_column(String(128))


class DigestRow(Base):
    """A digest of the older part of a session's history for one view (base compiler, target,
    encoding), or for the view and one execution with trace messages in the history (its
    ``view_key`` then names both): what a compile reads instead of it
    (app/domain/compilers/digests.py). Dropped with every compaction of the session; a new
    ``generation`` when made again from the whole history, which retires the ids of the one
    before."""

    __tablename__ = "digests"

    session_pk: Mapped[str] = _session_fk()
    view_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    generation: Mapped[str] = mapped_column(String(36))
    upto: Mapped[int] = mapped_column(BigInteger)
    digest: Mapped[dict[str, Any]] = mapped_column(Json)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())


class DigestIdRow(Base):
    """A tool call id the older part of a digest's history holds (``kind`` "id") or calls
    (``kind`` "call", as the repairs renamed it), from the digest that reached ``upto``: a
    compile asks only about the ids its tail holds."""

    __tablename__ = "digest_ids"

    session_pk: Mapped[str] = _session_fk()
    view_key: Mapped[str] = mapped_column(String(64), primary_key=True)
    generation: Mapped[str] = mapped_column(String(36), primary_key=True)
    # Looked up by id: the id before the kind in the key.
    call_id: Mapped[str] = mapped_column(String(600), primary_key=True)
    kind: Mapped[str] = mapped_column(String(8), primary_key=True)
    upto: Mapped[int] = mapped_column(BigInteger, primary_key=True)
