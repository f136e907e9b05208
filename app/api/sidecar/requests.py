"""A sidecar request read: which endpoint, tenant, model, window and session, and its history
parsed and counted."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Final

import orjson
from fastapi import Request

from app.api.deps import AppState, sidecar_tenant
from app.api.sidecar import responses
from app.api.sidecar.refusals import Refused
from app.domain.errors import InvalidInput, Path
from app.domain.formats.convert import Format
from app.domain.providers import ProviderProfile
from app.domain.sessions import SESSION_ID_RE, TenantId
from app.domain.wire import Provider
from app.services import compiling
from app.services.sidecar.threads import MAX_THREAD_ID, History, Sent, essential
from app.services.tenancy import cpu

SESSION_HEADER: Final = "x-ctxc-session"
WINDOW_HEADER: Final = "x-ctxc-context-window"

# Bodies parsed on the event loop below this size; bigger ones in a worker thread.
INLINE_BODY = 256 * 1024


@dataclass(frozen=True)
class Endpoint:
    """A managed sidecar route: the provider's wire (its answers and errors), where the history
    sits in the request's body, and where the request goes."""

    provider: Provider
    path: str  # after the upstream's base URL
    profile: str  # the provider profile of a model the catalog does not know
    upstream_setting: str  # the setting naming the upstream's base URL
    history: str = "messages"  # the body's field holding the history
    system: str | None = None  # the body's field holding the system prompt, when apart

    def base(self, state: AppState) -> str:
        """The upstream's base URL."""
        base: str = getattr(state.settings, self.upstream_setting)
        return base

    def upstream(self, state: AppState) -> str:
        return self.base(state) + self.path

    @property
    def format(self) -> Format:
        return self.provider


OPENAI = Endpoint("openai", "/chat/completions", "openai", "openai_upstream")
ANTHROPIC = Endpoint(
    "anthropic", "/v1/messages", "anthropic", "anthropic_upstream", system="system"
)
RESPONSES = Endpoint(
    "responses", "/responses", "openai-responses", "openai_upstream", "input", "instructions"
)

# Gemini's path names the model and the method: the route gives them (``Call``).
GEMINI = Endpoint(
    "gemini", "", "gemini", "gemini_upstream", history="contents", system="systemInstruction"
)


@dataclass(frozen=True)
class Call:
    """What a route's path says of a request that its body does not (Gemini's): the model,
    whether the answer streams as events, and the path after the upstream's base URL."""

    model: str
    stream: bool
    path: str


@dataclass(frozen=True)
class Turn:
    """One sidecar request, parsed."""

    endpoint: Endpoint
    tenant: TenantId
    body: dict[str, Any]
    headers: dict[str, str]
    sent: Sent
    profile: ProviderProfile
    window: int
    stream: bool
    session_id: str | None
    query: str = ""  # the request's query string, passed on as sent
    path: str | None = None  # after the upstream's base URL, when the route gave it

    def upstream(self, state: AppState) -> str:
        """The URL the turn is forwarded to."""
        if self.path is not None:
            return self.endpoint.base(state) + self.path
        return self.endpoint.upstream(state)


async def read_turn(
    request: Request, state: AppState, endpoint: Endpoint, call: Call | None = None
) -> Turn:
    """The request read and checked; ``call``: what the route's path says of it."""
    tenant = await sidecar_tenant(request, state)
    raw = await request.body()
    big = len(raw) >= INLINE_BODY
    body = await _body(raw, big)
    model, stream = _model_and_stream(body, call)
    if endpoint.provider == "responses" and (reason := responses.unmanaged(body)) is not None:
        raise responses.Unmanaged(reason, raw)
    messages = _history(body, endpoint)
    session_id = _session_id(request)
    profile = _profile(state, endpoint, model)
    window = _window(request, profile)
    system = None if endpoint.system is None else body.get(endpoint.system)
    plain = (endpoint.format, messages, system)
    kept: tuple[list[Any], Any] = (
        await cpu.run_sync(essential, *plain) if big else essential(*plain)
    )
    sent = _sent(state, tenant, endpoint, *kept, profile.encoding)
    headers = {k.lower(): v for k, v in request.headers.items()}
    path = None if call is None else call.path
    turn = Turn(endpoint, tenant, body, headers, sent, profile, window, stream, session_id)
    return replace(turn, query=request.url.query, path=path)


async def _body(raw: bytes, big: bool) -> dict[str, Any]:
    """The body's JSON object (``big``: parsed in a worker thread)."""
    try:
        body = await cpu.run_sync(orjson.loads, raw) if big else orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise Refused(400, "the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise Refused(400, "the body must be a JSON object")
    return body


def _history(body: dict[str, Any], endpoint: Endpoint) -> list[Any]:
    """The body's history: a non-empty array (a Responses input string is one user item)."""
    field = endpoint.history
    if endpoint.provider == "responses" and isinstance(body.get(field), str):
        body[field] = responses.user_input(body[field])
    messages = body.get(field)
    if not isinstance(messages, list) or not messages:
        raise Refused(400, f"`{field}` must be a non-empty array", field)
    return messages


def _session_id(request: Request) -> str | None:
    """The session the request names, checked (with room for a fork's suffix)."""
    session_id = request.headers.get(SESSION_HEADER)
    if session_id is not None and (
        not SESSION_ID_RE.match(session_id) or len(session_id) > MAX_THREAD_ID
    ):
        raise Refused(
            400,
            f"{SESSION_HEADER} must be a session id (letters, digits, `._:-`, at "
            f"most {MAX_THREAD_ID} characters)",
        )
    return session_id


def _model_and_stream(body: dict[str, Any], call: Call | None) -> tuple[str, bool]:
    """The model and whether the answer streams: the route's, else the body's."""
    if call is not None:
        return call.model, call.stream
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Refused(400, "`model` is required: the model to call", "model")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise Refused(400, "`stream` must be a boolean", "stream")
    return model, stream


def _sent(
    state: AppState,
    tenant: TenantId,
    endpoint: Endpoint,
    messages: list[Any],
    system: Any,
    encoding: str,
) -> Sent:
    """The history as sent, in its essential form (``threads.essential``; a system prompt given
    apart is one more item, first: it is parsed into one system message), parsed on demand from
    an item on, off the event loop."""
    if endpoint.provider == "responses":
        return responses.sent(state, tenant, messages, system, encoding)
    fmt, field = endpoint.format, endpoint.history
    first = 0 if system is None else 1
    items = messages if system is None else [system, *messages]

    async def parse(offset: int) -> History:
        keys: list[bytes] = []
        tail, head = (messages, system) if offset == 0 else (messages[offset - first :], None)
        work = (state.cache, tenant, fmt, tail, head, field, (encoding,), keys)
        try:
            entries = await cpu.run_sync(compiling.parse_posted, *work)
        except InvalidInput as exc:  # problems named by their index in the whole history
            if offset == 0:
                raise
            shifted = [(_shifted(p, field, offset - first), m) for p, m in exc.problems]
            raise InvalidInput(shifted) from None
        return History(fmt, items, entries, keys, offset)

    return Sent(fmt, items, parse)


def _shifted(path: Path, field: str, by: int) -> Path:
    if len(path) > 1 and path[0] == field and isinstance(path[1], int):
        return (field, path[1] + by, *path[2:])
    return path


def _profile(state: AppState, endpoint: Endpoint, model: str) -> ProviderProfile:
    """The model's profile when the catalog knows it for this endpoint's shape; else the
    endpoint's (any model an OpenAI-compatible server serves)."""
    catalog = state.settings.catalog
    if catalog.model(model) is not None:
        profile = catalog.resolve(model)
        if profile.output == endpoint.provider:
            return profile
        if endpoint.provider == "responses" and profile.output == "openai":
            # An OpenAI model through the Responses API: the endpoint's shape, its window.
            return replace(catalog.resolve(endpoint.profile), context_window=profile.context_window)
    return catalog.resolve(endpoint.profile)


def _window(request: Request, profile: ProviderProfile) -> int:
    given = request.headers.get(WINDOW_HEADER)
    if given is None:
        return profile.context_window
    if not given.isdigit() or not 1 <= int(given) <= 100_000_000:
        raise Refused(400, f"{WINDOW_HEADER} must be a number of tokens (1 to 100000000)")
    return int(given)
