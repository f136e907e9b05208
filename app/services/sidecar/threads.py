"""Which stored history a sidecar request continues, and what of it is new.

An agent behind the sidecar resends its whole history on every turn. The session's proxy thread
remembers it as a hash chain over the first ``sent`` messages in their essential form
(``essential``: less what agents move from turn to turn without changing what is said), keyed
as the message cache keys them while the request is parsed, then the digest of the ``replies``
messages ctxc stored after them: the upstream's answer, which the agent resends in its
own serialisation, so it is compared by content. A request whose history starts with exactly that
extends the session: what follows is new. Any other history (the agent edited, trimmed or
compacted it, or retried a turn ctxc had already stored) is a **fork**: the stored history moves
aside under ``<id>:fork-<n>``, unchanged, and the session id starts over with the request's
history, so two histories are never mixed.

What agents move from turn to turn without changing meaning is not part of a history's identity
(``IGNORED``, ``essential``): a request's history is hashed, parsed and stored in its essential
form, so an agent that moves its cache breakpoints, or folds a text block back into a string,
still extends its thread.

Several conversations come under one session id (an agent's main loop, its sub-agents, its
side requests). A conversation is known by its root (``root``: its system prompt and first
message); the first one seen is the session itself, each other one a session beside it,
``<id>:thread-<n>``, whose thread names ``<id>`` as its ``family``. A history of another root
continues the conversation beside that it extends, or starts a new one: a conversation beside
the session never forks while there is room for another (``MAX_THREADS``); only the session's
own conversation does, on an edit.

A session the sidecar has never seen (made through the API) is compared message by message, by
content, while it has never been compacted; a compacted one no longer holds what the agent
resends, and forks.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson
import xxhash
from sqlalchemy.ext.asyncio import AsyncSession

from app.domain.errors import Conflict
from app.domain.formats.convert import Format
from app.domain.messages import (
    DEFAULT_SECTION,
    ImagePart,
    Message,
    Part,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    result_text,
)
from app.domain.sessions import SessionPk
from app.domain.tokens import TokenCounter, count_message
from app.services.compiling import item_of
from app.services.sessions import Stamp, add_session
from app.services.sessions.cache import Entry, canonical_json
from app.services.sessions.messages import Writer, insert_messages
from app.services.sidecar.phases import HASH, phase
from app.services.tenancy import cpu
from app.storage import compiles, queries
from app.storage.models import ProxyThreadRow, SessionRow

FORK = ":fork-"
# The conversations beside a session: ``<id>:thread-<n>``, ``THREAD_OF`` their metadata naming
# ``<id>``, ``THREADS`` the session's naming how many were made. Past ``MAX_THREADS`` of them, a
# new conversation continues (and so forks) the latest of its root, or forks the session.
THREAD = ":thread-"
THREAD_OF = "ctxc_thread_of"
THREADS = "ctxc_threads"
MAX_THREADS = 64
# Room left in a session id (128 characters at most) for the fork suffix.
MAX_THREAD_ID = 112
# A history longer than this is hashed in a worker thread.
INLINE_ITEMS = 1_000
# What a thread's identity ignores (Anthropic and OpenAI chat shapes; docs/sidecar.md lists it):
# - block fields that are transport hints, moved every turn: ``cache_control`` (Anthropic's
#   breakpoints, on any block or tool result; Claude Code moves one to its newest message every
#   turn). Not stored either: the upstream gets the breakpoints of the request it is sent for;
# - a content of one plain text block against the same text as a string (Claude Code folds the
#   block back into a string once its breakpoint leaves it): stored as the string;
# - system blocks that change on every request without saying anything to the model: Claude
#   Code's billing line (``x-anthropic-billing-header: ...``). The upstream gets the request's own.
# Everything else is content, byte for byte: reasoning with ``encrypted_content`` (Codex),
# signatures of thinking blocks, Gemini's ``thoughtSignature``.
IGNORED: Final = frozenset({"cache_control"})
VOLATILE_SYSTEM: Final = ("x-anthropic-billing-header:",)
ESSENTIAL_FORMATS: Final = frozenset({"anthropic", "openai"})


@dataclass(frozen=True)
class History:
    """A request's history as sent (``items``: Anthropic's system prompt first, then the
    messages), parsed and counted from ``offset`` on: ``entries[i]`` is item ``offset + i``,
    ``keys[i]`` its key. A history that starts with what a thread already holds, byte for byte,
    is parsed only after it."""

    format: Format
    items: Sequence[Any]
    entries: Sequence[Entry]
    keys: Sequence[bytes]
    offset: int = 0


@dataclass(frozen=True)
class Sent:
    """A request's history as sent, and how to parse it from an item on (0: all of it)."""

    format: Format
    items: Sequence[Any]
    parse: Callable[[int], Awaitable[History]]


def essential(fmt: Format, messages: list[Any], system: Any) -> tuple[list[Any], Any]:
    """``messages`` and ``system`` without what ``IGNORED`` lists: what a thread is matched on
    and what is stored. Messages left as they are are not copied."""
    if fmt not in ESSENTIAL_FORMATS:
        return messages, system
    if isinstance(system, list):
        system = [_plain(b) for b in system if not _volatile(b)]
    return [_plain_message(m) for m in messages], system


def _volatile(block: Any) -> bool:
    text = block.get("text") if isinstance(block, dict) else None
    return isinstance(text, str) and text.startswith(VOLATILE_SYSTEM)


def _plain_message(message: Any) -> Any:
    if not isinstance(message, dict) or not isinstance(message.get("content"), list):
        return message
    content = _plain_content(message["content"])
    return message if content is message["content"] else {**message, "content": content}


def _plain_content(content: list[Any]) -> Any:
    """A content's blocks without ignored fields; one plain text block as its string."""
    blocks = [_plain(b) for b in content]
    if len(blocks) == 1 and isinstance(blocks[0], dict) and blocks[0].keys() == {"type", "text"}:
        text = blocks[0]["text"]
        if blocks[0]["type"] == "text" and isinstance(text, str):
            return text
    if all(b is c for b, c in zip(blocks, content, strict=True)):
        return content
    return blocks


def _plain(block: Any) -> Any:
    if not isinstance(block, dict):
        return block
    inner = block.get("content")
    plain = (
        _plain_content(inner)
        if block.get("type") == "tool_result" and isinstance(inner, list)
        else inner
    )
    if plain is inner and IGNORED.isdisjoint(block):
        return block
    out = {k: v for k, v in block.items() if k not in IGNORED}
    if plain is not inner:
        out["content"] = plain
    return out


def chain(keys: Iterable[bytes], start: str = "") -> str:
    """One hash over a run of item keys, going on from the chain ``start`` of the run before
    them: equal runs, equal chains."""
    value = bytes.fromhex(start)
    for key in keys:
        value = hashlib.sha256(value + key).digest()
    return value.hex()


def root(history: History) -> str:
    """A conversation's root: the chain of its system prompt and first message, of a history
    parsed whole."""
    assert history.offset == 0
    roles = (message.role for message, _ in history.entries)
    first = next((i for i, role in enumerate(roles) if role != "system"), len(history.keys))
    return chain(history.keys[: first + 1])


def other_root(thread: ProxyThreadRow | None, history: History) -> bool:
    """Whether ``history`` (parsed whole) is another conversation than the thread's: another
    root. A session without a thread, or whose thread never noted its root, has none other."""
    return thread is not None and thread.root is not None and thread.root != root(history)


def raw_digest(items: Sequence[Any]) -> str:
    """A fast hash of ``items`` (in their essential form) as sent: what a thread compares
    first, so that the part it holds need not be parsed again."""
    digest = xxhash.xxh3_128()
    for item in items:
        digest.update(orjson.dumps(item))
        digest.update(b"\x1e")
    return digest.hexdigest()


def content_digest(messages: Iterable[Message]) -> str:
    """One hash over messages by what they say: roles, texts, images, tool calls and results,
    however they were sent. What agents resend differently from what they received is left
    out: reasoning (dropped or kept by choice), provider blocks ctxc keeps opaque, metadata and
    extra fields (``reasoning_content`` of an OpenAI-compatible server), blank texts."""
    digest = hashlib.sha256()
    for message in messages:
        said = [_said(part) for part in message.content]
        essence = [message.role, [p for p in said if p is not None]]
        digest.update(hashlib.sha256(canonical_json(essence)).digest())
    return digest.hexdigest()


def _said(part: Part) -> list[Any] | None:
    match part:
        case TextPart(text=text):
            return ["text", text] if text.strip() else None
        case ImagePart(url=url, data=data):
            return ["image", url or data]
        case ToolCallPart(id=call_id, name=name, arguments=arguments):
            return ["tool_call", call_id, name, arguments]
        case ToolResultPart(call_id=call_id):
            return ["tool_result", call_id, result_text(part)]
        case _:  # reasoning, opaque
            return None


async def thread_row(db: AsyncSession, pk: SessionPk) -> ProxyThreadRow | None:
    return await db.get(ProxyThreadRow, pk, populate_existing=True)


async def held(thread: ProxyThreadRow, sent: Sent) -> bool:
    """Whether the request's items start, byte for byte, with the ones ``thread`` holds."""
    if not thread.raw or thread.format != sent.format:
        return False
    if len(sent.items) < thread.sent + thread.replies:
        return False
    prefix = sent.items[: thread.sent]
    with phase(HASH):
        if len(prefix) > INLINE_ITEMS:
            return await cpu.run_sync(raw_digest, prefix) == thread.raw
        return raw_digest(prefix) == thread.raw


async def new_start(
    db: AsyncSession, row: SessionRow, thread: ProxyThreadRow | None, history: History
) -> int | None:
    """Where the new part of ``history`` starts, when it extends what the session stores; None
    when it does not (a fork)."""
    if thread is not None:
        with phase(HASH):
            if len(history.keys) > INLINE_ITEMS:
                return await cpu.run_sync(_extends, thread, history)
            return _extends(thread, history)
    assert history.offset == 0
    if row.last_seq == 0:
        return 0
    if row.history_version != 0:  # compacted: it no longer holds what the agent resends
        return None
    stored = await compiles.rows_after(db, SessionPk(row.pk), 0, "o200k_base")
    if len(stored) > len(history.entries):
        return None
    messages = [item_of(r).message for r in stored]
    return await cpu.run_sync(_same_content, messages, history)


async def extends(thread: ProxyThreadRow, history: History) -> bool:
    """Whether ``history`` (parsed whole) extends what ``thread`` holds."""
    if len(history.keys) > INLINE_ITEMS:
        return await cpu.run_sync(_extends, thread, history) is not None
    return _extends(thread, history) is not None


def _extends(thread: ProxyThreadRow, history: History) -> int | None:
    sent, replies, offset = thread.sent, thread.replies, history.offset
    if thread.format != history.format or len(history.items) < sent + replies:
        return None
    if offset not in (0, sent):
        return None
    if offset == 0 and chain(history.keys[:sent]) != thread.chain:
        return None
    resent = (message for message, _ in history.entries[sent - offset : sent - offset + replies])
    if replies and content_digest(resent) != thread.reply:
        return None
    return sent + replies


def _same_content(stored: Sequence[Message], history: History) -> int | None:
    sent = (message for message, _ in history.entries[: len(stored)])
    return len(stored) if content_digest(stored) == content_digest(sent) else None


async def start_thread(
    db: AsyncSession, row: SessionRow, history: History, sent: int, now: datetime
) -> ProxyThreadRow:
    """The thread of a session the sidecar meets for the first time, whose stored messages are
    the first ``sent`` of ``history`` (parsed whole); the caller commits. A session made beside
    another (its metadata names it) is of that one's family."""
    assert history.offset == 0
    keyed, raw = await _hashes(history, sent, "")
    family = row.meta.get(THREAD_OF)
    thread = ProxyThreadRow(
        session_pk=row.pk,
        format=history.format,
        sent=sent,
        chain=keyed,
        raw=raw,
        replies=0,
        reply="",
        turns=0,
        forks=0,
        updated_at=now,
        root=root(history),
        family=family if isinstance(family, str) else None,
    )
    db.add(thread)
    return thread


async def _hashes(history: History, upto: int, start: str) -> tuple[str, str]:
    """The chains of ``history``'s items up to ``upto``: of their keys (going on from the chain
    ``start`` of the items before the parsed ones) and the raw one; off the event loop for a
    long history."""

    def work() -> tuple[str, str]:
        return chain(history.keys[: upto - history.offset], start), raw_digest(history.items[:upto])

    return await cpu.run_sync(work) if upto > INLINE_ITEMS else work()


async def fork(
    w: Writer, row: SessionRow, thread: ProxyThreadRow | None, history: History
) -> tuple[SessionRow, str]:
    """Move the session's stored history aside under ``<id>:fork-<n>`` (out of its family) and
    start the id over with ``history``, stored at once (it is the agent's history, whatever the
    upstream answers). The caller holds the session's lock and commits. Returns the new session
    and the id the old history moved to."""
    forks = (thread.forks if thread else 0) + 1
    session_id, branch = row.id, f"{row.id}{FORK}{forks}"
    if await queries.session_row(w.db, w.tenant, branch) is not None:
        raise Conflict(f"session {branch!r} already exists: the fork of {session_id!r} needs it")
    row.id = branch
    row.meta = {**row.meta, "ctxc_fork_of": session_id}
    if thread is not None:
        thread.family = None
    await w.db.flush()
    new = await add_session(w.db, w.tenant, session_id, _fields(row), Stamp.new(w.now), w.catalog)
    entries = history.entries
    pk = SessionPk(new.pk)
    await store(w, pk, [m for m, _ in entries], [c for _, c in entries])
    thread = await start_thread(w.db, new, history, len(history.items), w.now)
    thread.forks = forks
    return new, branch


def _fields(row: SessionRow) -> dict[str, Any]:
    """The API fields of a session like ``row``, for the one that takes its id at a fork."""
    return {
        "metadata": {k: v for k, v in row.meta.items() if k != "ctxc_fork_of"},
        "provider": row.provider,
        "profile": row.profile,
        "context_window": row.context_window,
        "compiler": row.compiler,
        "compaction": row.compaction_policy,
        "system_prompt": row.system_prompt,
        "response_format": row.response_format,
        "resume_key": row.resume_key,
    }


async def store(
    w: Writer, pk: SessionPk, messages: Sequence[Message], counts: Sequence[dict[str, int]]
) -> tuple[int, int] | None:
    """Append ``messages`` (their ``counts`` completed in every encoding) in the caller's
    transaction: their first and last seq."""
    if not messages:
        return None
    await cpu.run_sync(_count_all, w.counter, messages, counts)
    seqs = await insert_messages(w.db, pk, DEFAULT_SECTION, messages, counts, w.now)
    if seqs is None:
        raise Conflict("the session was deleted during the turn")
    return seqs


def _count_all(
    counter: TokenCounter, messages: Sequence[Message], counts: Sequence[dict[str, int]]
) -> None:
    for message, count in zip(messages, counts, strict=True):
        for name, encoder in counter.encoders.items():
            if name not in count:
                count[name] = count_message(message, encoder)


async def advance(
    thread: ProxyThreadRow, history: History, reply: Sequence[Message], now: datetime
) -> None:
    """The thread after a stored turn: the request's whole history as sent, then the reply."""
    assert history.offset in (0, thread.sent)
    start = thread.chain if history.offset else ""
    thread.chain, thread.raw = await _hashes(history, len(history.items), start)
    thread.sent = len(history.items)
    thread.replies = len(reply)
    thread.reply = content_digest(reply)
    thread.turns += 1
    thread.updated_at = now
