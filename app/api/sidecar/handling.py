"""The sidecar's turn: compiled, forwarded, answered, stored; and other calls forwarded."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import httpx
import orjson
from fastapi import Request
from sqlalchemy.ext.asyncio import AsyncSession
from starlette.responses import Response

from app.adapters.upstream import returned_headers
from app.api.deps import AppState, sidecar_tenant
from app.api.schemas import SessionCreate
from app.api.sidecar import recalling, responses
from app.api.sidecar.forwarding import ANSWER_BYTES, ERROR_BYTES, read_body, send, shrink
from app.api.sidecar.refusals import Refused, refusal
from app.api.sidecar.requests import Call, Endpoint, Turn, read_turn
from app.api.sidecar.streams import Passthrough, until_disconnect
from app.domain.compaction import room
from app.domain.compiling import Output
from app.domain.errors import DomainError, FormatError, InvalidInput
from app.domain.formats.convert import Format, parse_messages
from app.domain.messages import Message
from app.domain.tokens import REPLY_PRIMING, Encoder
from app.domain.wire import Reply, WireError, is_overflow
from app.domain.wire import reply_of as wire_reply
from app.services import compiling
from app.services.compiling import Compilation, Options
from app.services.sessions.messages import Writer
from app.services.sidecar import turns
from app.services.sidecar.phases import COMPILE, OPEN, READ, STORE, UPSTREAM, Phases, phase, timing
from app.services.sidecar.turns import Opened
from app.services.tenancy import cpu
from app.storage import queries
from app.storage.faults import is_fault

log = logging.getLogger("ctxc")
# Why a call of the provider's API other than its conversation endpoint is not managed.
FORWARDED = "not a conversation request: forwarded as it is"


async def forward(request: Request, endpoint: Endpoint, path: str) -> Response:
    """Any other call of the provider's API (models, token counts, embeddings, ...), forwarded
    as it is, for a tenant of this ctxc: an SDK pointed at ctxc keeps working for what ctxc
    does not manage."""
    state: AppState = request.state.ctxc
    try:
        await sidecar_tenant(request, state)
        headers = {k.lower(): v for k, v in request.headers.items()}
        upstream = await send(
            state,
            f"{endpoint.base(state)}/{path}",
            await request.body(),
            headers,
            request.method,
            request.url.query,
        )
        state.metrics.sidecar.labels(endpoint.provider, "passed").inc()
        told = {responses.MANAGED: "false", responses.UNMANAGED_REASON: FORWARDED}
        return Passthrough(endpoint.provider, upstream, told, None)
    except Exception as exc:
        return await refusal(request, endpoint.provider, exc, state)


async def _pass_on(
    request: Request, state: AppState, turn: responses.Unmanaged, endpoint: Endpoint
) -> Response:
    """A conversation call ctxc does not manage, passed on as sent and said so in headers."""
    headers = {k.lower(): v for k, v in request.headers.items()}
    upstream = await send(
        state, endpoint.upstream(state), turn.body, headers, params=request.url.query
    )
    state.metrics.sidecar.labels(endpoint.provider, "unmanaged").inc()
    told = {responses.MANAGED: "false", responses.UNMANAGED_REASON: turn.reason}
    return Passthrough(endpoint.provider, upstream, told, None)


async def handle(request: Request, endpoint: Endpoint, call: Call | None = None) -> Response:
    """Answer one sidecar request; every refusal in the provider's own error JSON. ``call``:
    what the route's path says of the request (see ``Call``)."""
    state: AppState = request.state.ctxc
    Phases.begin()
    try:
        with phase(READ):
            turn = await read_turn(request, state, endpoint, call)
        return await until_disconnect(request, lambda: _run(state, turn), endpoint.provider, state)
    except responses.Unmanaged as unmanaged:
        try:
            return await _pass_on(request, state, unmanaged, endpoint)
        except Exception as exc:
            return await refusal(request, endpoint.provider, exc, state)
    except Exception as exc:
        return await refusal(request, endpoint.provider, exc, state)


async def _run(state: AppState, turn: Turn) -> Response:
    opened = None
    if turn.session_id is not None:
        with phase(OPEN):
            opened = await _open(state, turn)
    scale: float | None = None
    for attempt in (1, 2):
        with phase(COMPILE):
            done = await _compile(state, turn, opened, scale)
            payload = _payload(turn, opened, done)
        with phase(UPSTREAM):
            upstream = await send(
                state, turn.upstream(state), payload, turn.headers, params=turn.query
            )
        if upstream.status_code == 200:
            headers = _headers(turn, opened, done, upstream, retried=attempt == 2)
            if turn.stream:
                store = _stored(state, turn, opened, done)
                return Passthrough(
                    turn.endpoint.provider, upstream, headers, store, _asks_usage(turn)
                )
            return await _answered(state, turn, opened, done, upstream, headers, payload)
        data = await read_body(upstream, ERROR_BYTES)
        overflow = is_overflow(turn.endpoint.provider, upstream.status_code, data)
        if opened is not None:
            async with state.sessionmaker() as db:
                await turns.record_failure(
                    db,
                    turn.tenant,
                    opened.session_id,
                    done.compile_id,
                    "prompt_too_long" if overflow else "error",
                    datetime.now(UTC),
                )
        if attempt == 1 and overflow:
            state.metrics.sidecar.labels(turn.endpoint.provider, "retried").inc()
            scale = shrink(turn.endpoint.provider, data)
            continue
        state.metrics.sidecar.labels(turn.endpoint.provider, "upstream_error").inc()
        headers = _headers(turn, opened, done, upstream, retried=attempt == 2)
        return Response(data, upstream.status_code, returned_headers(upstream) | headers)
    raise AssertionError("unreachable")


async def _open(state: AppState, turn: Turn) -> Opened:
    assert turn.session_id is not None

    async def fields() -> dict[str, Any]:
        encoder = state.counter.encoder(turn.profile.encoding)
        fixed = await cpu.run_sync(_fixed_tokens, turn, encoder)
        created = SessionCreate(
            provider=turn.profile.name,
            compaction=room.policy(turn.window, fixed),
            compiler=room.compiler(turn.window, fixed),
        )
        return created.model_dump(mode="json", exclude={"id"})

    async with state.sessionmaker() as db:
        opened = await turns.open_turn(_writer(state, turn, db), turn.session_id, fields, turn.sent)
    if opened.forked_to is not None:
        state.metrics.sidecar.labels(turn.endpoint.provider, "forked").inc()
    return opened


SYSTEM_ROLES = frozenset({"system", "developer"})


def _fixed_tokens(turn: Turn, encoder: Encoder) -> int:
    """The fixed part of the agent's request, estimated: its system prompt and system
    messages (their text, or the JSON of other content) and its tool definitions, as the
    compile counts them, and the reply priming."""
    messages = turn.body[turn.endpoint.history]
    field = turn.endpoint.system  # Anthropic's `system`, Responses' `instructions`, ...
    parts = [turn.body.get(field)] if field is not None else []
    parts += [
        m.get("content") for m in messages if isinstance(m, dict) and m.get("role") in SYSTEM_ROLES
    ]
    texts = [p if isinstance(p, str) else orjson.dumps(p).decode() for p in parts if p]
    tools = turn.body.get("tools")
    listed = tools if isinstance(tools, list) else None
    return encoder.count("\n".join(texts)) + compiling.tools_tokens(listed, encoder) + REPLY_PRIMING


async def _compile(
    state: AppState, turn: Turn, opened: Opened | None, scale: float | None
) -> Compilation:
    window = turn.window if scale is None else max(1, int(turn.window * scale))
    options = Options(
        provider=turn.profile.name, context_window=window, tools=turn.body.get("tools")
    )
    if opened is None:
        async with state.sessionmaker() as db:
            tenant_name = await queries.tenant_name(db, turn.tenant)
        field = turn.endpoint.system
        system = None if field is None else turn.body.get(field)
        posted = compiling.Posted(turn.endpoint.format, turn.body[turn.endpoint.history], system)
        ctx = state.compile_context(turn.tenant)
        return await cpu.run_sync(compiling.compile_posted, ctx, posted, options, tenant_name)
    pending = tuple(opened.new)
    options = replace(options, pending=pending)
    if scale is not None:  # the upstream said too long: compact (a full compaction at least)
        options = replace(options, error_kind="prompt_too_long", compaction={})
    # The session as the open read it, unless a retry's compactions change it.
    read = opened.read if scale is None else None
    async with state.sessionmaker() as db:
        ctx = state.compile_context(turn.tenant, db)
        return await compiling.compile_session(ctx, opened.session_id, options, read=read)


def _asks_usage(turn: Turn) -> bool:
    """Whether ctxc asks a streamed OpenAI answer for the usage the agent did not ask for (it
    records it, and hides that last chunk from the agent, whose code may not expect it)."""
    if turn.endpoint.provider != "openai" or not turn.stream or turn.session_id is None:
        return False
    options = turn.body.get("stream_options")
    return not (isinstance(options, dict) and options.get("include_usage") is True)


def _payload(turn: Turn, opened: Opened | None, done: Compilation) -> bytes:
    """The agent's request with the compiled messages (and system prompt) in place of its own.

    A session turn sends the system prompt of the request (its volatile parts are not stored)
    and the cache breakpoints the agent placed on its new messages (none are stored)."""
    sent = dict(turn.body)
    system = turn.endpoint.system
    _place(turn.endpoint, sent, done.output)
    if opened is not None:
        if system is not None and system in turn.body:
            sent[system] = turn.body[system]
        placed = turn.body[turn.endpoint.history][-len(opened.new) :] if opened.new else []
        sent[turn.endpoint.history] = breakpoints(placed, sent[turn.endpoint.history])
    offered = recalling.tools(turn, done)
    if offered is not None:
        sent["tools"] = offered
    if _asks_usage(turn):
        options = sent.get("stream_options")
        sent["stream_options"] = {
            **(options if isinstance(options, dict) else {}),
            "include_usage": True,
        }
    return orjson.dumps(sent)


def breakpoints(placed: list[Any], compiled: list[Any]) -> list[Any]:
    """``compiled`` with the ``cache_control`` of the agent's last messages ``placed`` put back
    on the same blocks of the compiled messages they end with (the same role and number of
    blocks; a string content counts as one text block)."""
    out = list(compiled)
    for back in range(1, min(len(placed), len(out)) + 1):
        sent, made = placed[-back], out[-back]
        marks = _marks(sent)
        if not marks or not isinstance(made, dict) or made.get("role") != sent.get("role"):
            continue
        content = made.get("content")
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        if not isinstance(blocks, list) or len(blocks) != len(sent["content"]):
            continue
        blocks = [_marked(b, marks.get(i)) for i, b in enumerate(blocks)]
        out[-back] = {**made, "content": blocks}
    return out


def _marks(message: Any) -> dict[int, Any]:
    """The ``cache_control`` of a message's blocks, by block index."""
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, list):
        return {}
    return {i: b["cache_control"] for i, b in enumerate(content) if _has_mark(b)}


def _has_mark(block: Any) -> bool:
    return isinstance(block, dict) and "cache_control" in block


def _marked(block: Any, mark: Any) -> Any:
    return (
        {**block, "cache_control": mark} if mark is not None and isinstance(block, dict) else block
    )


def _place(endpoint: Endpoint, body: dict[str, Any], output: Output) -> None:
    """Put the compiled history (and the system prompt, where the shape keeps it apart) in the
    request's ``body`` (a session turn then sends the agent's own system prompt: ``_payload``)."""
    body[endpoint.history] = output.messages
    if endpoint.system is None:
        return
    body.pop(endpoint.system, None)
    # Responses' instructions are apart from the compiled system prompt (its ``instructions``).
    system = output.instructions if endpoint.provider == "responses" else output.system
    if system is not None:
        body[endpoint.system] = system


def _headers(
    turn: Turn, opened: Opened | None, done: Compilation, upstream: httpx.Response, retried: bool
) -> dict[str, str]:
    """What ctxc tells the agent beside the provider's ``upstream`` answer."""
    out = done.output
    headers = {
        responses.MANAGED: "true",
        "x-ctxc-compile-id": done.compile_id,
        "x-ctxc-tokens": str(out.total),
        "x-ctxc-context-window": str(out.context_window),
        "x-ctxc-budget-used-pct": str(out.budget_used_pct),
        "x-ctxc-compactions": str(len(done.compactions)),
        "x-ctxc-left-out": str(sum(r.count for r in out.left_out)),
    }
    if opened is not None:
        headers["x-ctxc-session"] = opened.session_id
        if opened.forked_to is not None:
            headers["x-ctxc-forked-to"] = opened.forked_to
    if retried:
        headers["x-ctxc-retried"] = "prompt_too_long"
    return headers | timing(upstream.headers)


async def _answered(
    state: AppState,
    turn: Turn,
    opened: Opened | None,
    done: Compilation,
    upstream: httpx.Response,
    headers: dict[str, str],
    payload: bytes,
) -> Response:
    """The upstream's answer to a turn not streamed (``payload``: what was sent), after the
    recalls it asked for, stored (said in ``headers``) and passed on."""
    recalls = 0
    if opened is None:
        data = await read_body(upstream, ANSWER_BYTES)
    else:  # a reply that only calls the recall tool is answered here (``recalling``)
        upstream, data, recalls = await recalling.settle(
            state, turn, opened, done, payload, upstream
        )
        if recalls:  # the answer is the last round's: its upstream's timing
            headers |= {"x-ctxc-recalls": str(recalls)} | timing(upstream.headers)
        if upstream.status_code != 200:
            state.metrics.sidecar.labels(turn.endpoint.provider, "upstream_error").inc()
            return Response(data, upstream.status_code, returned_headers(upstream) | headers)
    outcome = _outcome(opened)
    if opened is not None:
        # After recalls the usage is of the request with their pages: it teaches nothing.
        with phase(STORE):
            stored = await _kept(state, turn, opened, done, data, teaches=not recalls)
        headers.update(stored | timing(upstream.headers))
        outcome = "stored" if stored["x-ctxc-stored"] == "true" else "not_stored"
    state.metrics.sidecar.labels(turn.endpoint.provider, outcome).inc()
    return Response(data, 200, returned_headers(upstream) | headers)


async def _kept(
    state: AppState, turn: Turn, opened: Opened, done: Compilation, data: bytes, teaches: bool
) -> dict[str, str]:
    """Store the answer ``data``; the headers that say whether it was. The model call is paid
    for: its answer reaches the agent even when ctxc cannot store it (the agent resends it next
    turn, and it is stored then)."""
    try:
        reply = wire_reply(turn.endpoint.provider, orjson.loads(data))
        stored = await _store(state, turn, opened, done, reply, teaches)
    except Exception as exc:  # the session deleted meanwhile, the database gone, ...
        expected = isinstance(exc, orjson.JSONDecodeError | WireError | Refused | DomainError)
        log.warning("sidecar turn not stored: %s", exc, exc_info=not (expected or is_fault(exc)))
        return {"x-ctxc-stored": "false"}
    if stored.forked_to is not None:
        return {"x-ctxc-stored": "true", "x-ctxc-forked-to": stored.forked_to}
    return {"x-ctxc-stored": "true"}


def _outcome(opened: Opened | None) -> str:
    return "stateless" if opened is None else "stored"


async def _store(
    state: AppState,
    turn: Turn,
    opened: Opened,
    done: Compilation,
    reply: Reply,
    teaches: bool = True,
) -> turns.Stored:
    """Store the turn: its new messages, the reply and its usage (``teaches``: see
    ``turns.store_turn``)."""
    try:
        messages = await cpu.run_sync(_parsed_reply, turn.endpoint.format, reply)
    except (FormatError, InvalidInput, ValueError) as exc:
        raise Refused(502, f"the upstream's reply cannot be stored: {exc}") from None
    outcome = turns.Outcome(messages, done.compile_id, reply.usage, teaches)
    async with state.sessionmaker() as db:
        return await turns.store_turn(_writer(state, turn, db), opened, turn.sent, outcome)


def _writer(state: AppState, turn: Turn, db: AsyncSession) -> Writer:
    """What the turn's writes in ``db`` need."""
    return Writer(db, turn.tenant, state.counter, state.settings.catalog, datetime.now(UTC))


def _parsed_reply(fmt: Format, reply: Reply) -> list[Message]:
    """The reply's messages: one, or as many as a Responses output's items make."""
    if fmt == "responses":
        return list(parse_messages(fmt, reply.message["output"]))
    [message] = parse_messages(fmt, [reply.message])
    return [message]


def _stored(
    state: AppState, turn: Turn, opened: Opened | None, done: Compilation
) -> Callable[[Reply], Awaitable[None]]:
    """What a streamed answer does once it ended properly."""

    async def store(reply: Reply) -> None:
        if opened is not None:
            await _store(state, turn, opened, done, reply)
        state.metrics.sidecar.labels(turn.endpoint.provider, _outcome(opened)).inc()

    return store
