"""A sidecar request read: which endpoint, tenant, model, window and session, and its history
parsed and counted."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import orjson
from fastapi import Request

from app.api.deps import AppState, sidecar_tenant
from app.api.sidecar.refusals import Refused
from app.domain.errors import InvalidInput, Path
from app.domain.formats.convert import Format
from app.domain.providers import ProviderProfile
from app.domain.sessions import SESSION_ID_RE, TenantId
from app.domain.wire import Provider
from app.services import compiling, cpu
from app.services.sidecar.threads import MAX_THREAD_ID, History, Sent

SESSION_HEADER: Final = "x-ctxc-session"
WINDOW_HEADER: Final = "x-ctxc-context-window"

# Bodies parsed on the event loop below this size; bigger ones in a worker thread.
INLINE_BODY = 256 * 1024


@dataclass(frozen=True)
class Endpoint:
    provider: Provider
    path: str  # after the upstream's base URL
    profile: str  # the provider profile of a model the catalog does not know

    def upstream(self, state: AppState) -> str:
        base = state.settings.openai_upstream if self.provider == "openai" else (
            state.settings.anthropic_upstream)  # fmt: skip
        return base + self.path

    @property
    def format(self) -> Format:
        return self.provider


OPENAI = Endpoint("openai", "/chat/completions", "openai")
ANTHROPIC = Endpoint("anthropic", "/v1/messages", "anthropic")


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


async def read_turn(request: Request, state: AppState, endpoint: Endpoint) -> Turn:
    tenant = await sidecar_tenant(request, state)
    raw = await request.body()
    try:
        big = len(raw) >= INLINE_BODY
        body = await cpu.run_sync(orjson.loads, raw) if big else orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise Refused(400, "the body is not valid JSON") from None
    if not isinstance(body, dict):
        raise Refused(400, "the body must be a JSON object")
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise Refused(400, "`model` is required: the model to call", "model")
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise Refused(400, "`messages` must be a non-empty array", "messages")
    stream = body.get("stream", False)
    if not isinstance(stream, bool):
        raise Refused(400, "`stream` must be a boolean", "stream")
    session_id = request.headers.get(SESSION_HEADER)
    if session_id is not None and (
        not SESSION_ID_RE.match(session_id) or len(session_id) > MAX_THREAD_ID
    ):
        raise Refused(400, f"{SESSION_HEADER} must be a session id (letters, digits, `._:-`, at "
                      f"most {MAX_THREAD_ID} characters)")  # fmt: skip
    profile = _profile(state, endpoint, model)
    window = _window(request, profile)
    system = body.get("system") if endpoint.provider == "anthropic" else None
    sent = _sent(state, tenant, endpoint.format, messages, system, profile.encoding)
    headers = {k.lower(): v for k, v in request.headers.items()}
    return Turn(endpoint, tenant, body, headers, sent, profile, window, stream, session_id)


def _sent(
    state: AppState, tenant: TenantId, fmt: Format, messages: list[Any], system: Any,
    encoding: str,
) -> Sent:  # fmt: skip
    """The history as sent (Anthropic's system prompt is one more item, first: it is parsed
    into one system message), parsed on demand from an item on, off the event loop."""
    first = 0 if system is None else 1
    items = messages if system is None else [system, *messages]

    async def parse(offset: int) -> History:
        keys: list[bytes] = []
        if offset == 0:
            entries = await cpu.run_sync(
                compiling.parse_posted, state.cache, tenant, fmt, messages, system, "messages",
                (encoding,), keys,
            )  # fmt: skip
            return History(fmt, items, entries, keys)
        try:
            entries = await cpu.run_sync(
                compiling.parse_posted, state.cache, tenant, fmt, messages[offset - first :],
                None, "messages", (encoding,), keys,
            )  # fmt: skip
        except InvalidInput as exc:  # problems named by their index in the whole history
            raise InvalidInput(
                [(_shifted(p, offset - first), m) for p, m in exc.problems]
            ) from None
        return History(fmt, items, entries, keys, offset)

    return Sent(fmt, items, parse)


def _shifted(path: Path, by: int) -> Path:
    if len(path) > 1 and path[0] == "messages" and isinstance(path[1], int):
        return ("messages", path[1] + by, *path[2:])
    return path


def _profile(state: AppState, endpoint: Endpoint, model: str) -> ProviderProfile:
    """The model's profile when the catalog knows it for this endpoint's shape; else the
    endpoint's (any model an OpenAI-compatible server serves)."""
    catalog = state.settings.catalog
    if catalog.model(model) is not None:
        profile = catalog.resolve(model)
        if profile.output == endpoint.provider:
            return profile
    return catalog.resolve(endpoint.profile)


def _window(request: Request, profile: ProviderProfile) -> int:
    given = request.headers.get(WINDOW_HEADER)
    if given is None:
        return profile.context_window
    if not given.isdigit() or not 1 <= int(given) <= 100_000_000:
        raise Refused(400, f"{WINDOW_HEADER} must be a number of tokens (1 to 100000000)")
    return int(given)
