"""What the Responses endpoint reads differently: its history in groups of items, its string
``input``, and the requests whose conversation the provider holds.

A Responses history is a list of items, several of which (a turn's reasoning, message and calls)
make one message; the thread of a session counts its history in messages (what it stores), so
the endpoint's history is the items grouped (``item_turns``), each group one unit with one key:
a reply resent as its items is one unit again, and is compared as one stored message.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any, Final

from app.api.deps import AppState
from app.domain.errors import InvalidInput, Path
from app.domain.formats.responses_turns import item_turns
from app.domain.sessions import TenantId
from app.services import compiling
from app.services.sessions.cache import Entry
from app.services.sidecar.threads import History, Sent
from app.services.tenancy import cpu

# Why ctxc passes a request on without managing it (the ``x-ctxc-unmanaged-reason`` header).
PROVIDER_STATE: Final = (
    "{field}: the provider holds the conversation, so ctxc can neither see nor compile it; "
    "resend the whole input (store: false) to have it managed"
)
BACKGROUND: Final = (
    "background: the answer is fetched later from the provider, so ctxc cannot store it"
)
UNMANAGED_REASON: Final = "x-ctxc-unmanaged-reason"
MANAGED: Final = "x-ctxc-managed"


class Unmanaged(Exception):
    """A request ctxc passes on as it is (``body``: as sent), saying why."""

    def __init__(self, reason: str, body: bytes) -> None:
        super().__init__(reason)
        self.reason, self.body = reason, body


def unmanaged(body: dict[str, Any]) -> str | None:
    """Why this request is passed on as it is (None: it is managed). A request that continues a
    response (``previous_response_id``) or a conversation (``conversation``) the provider stored
    sends only what is new; a ``background`` one is answered later, through another path."""
    for field in ("previous_response_id", "conversation"):
        if body.get(field) is not None:
            return PROVIDER_STATE.format(field=field)
    if body.get("background") is True:
        return BACKGROUND
    return None


def user_input(value: Any) -> Any:
    """The ``input`` as a list of items (a string is one user message, as the API reads it)."""
    if isinstance(value, str):
        return [{"role": "user", "content": value}]
    return value


def sent(
    state: AppState, tenant: TenantId, items: list[Any], instructions: Any, encoding: str
) -> Sent:
    """The history as sent, in units of messages: the ``instructions`` (when given), then the
    items' groups; parsed on demand from a unit on, off the event loop."""
    groups = item_turns(items)
    heads = 0 if instructions is None else 1
    units: list[Any] = [*([instructions] if heads else []), *groups]

    async def parse(offset: int) -> History:
        start = max(0, offset - heads)
        system = instructions if offset == 0 else None
        lead = heads if offset == 0 else 0
        item_keys: list[bytes] = []
        before = sum(len(group) for group in groups[:start])
        try:
            entries = await cpu.run_sync(
                compiling.parse_posted,
                state.cache,
                tenant,
                "responses",
                _flat(groups[start:]),
                system,
                "input",
                (encoding,),
                item_keys,
            )
        except InvalidInput as exc:
            raise shifted_items(exc, "input", before) from None
        check_groups(entries, groups[start:], lead)
        keys = group_keys(groups[start:], item_keys, lead)
        return History("responses", units, entries, keys, offset)

    return Sent("responses", units, parse)


def _flat(groups: Sequence[Sequence[Any]]) -> list[Any]:
    return [item for group in groups for item in group]


def group_keys(groups: Sequence[Sequence[Any]], keys: Sequence[bytes], heads: int) -> list[bytes]:
    """One key per group, of its items' keys (``heads``: keys of the system prompt first, one
    per unit already)."""
    out, at = list(keys[:heads]), heads
    for group in groups:
        joined = b"".join(keys[at : at + len(group)])
        out.append(hashlib.sha256(joined).digest())
        at += len(group)
    return out


def check_groups(entries: Sequence[Entry], groups: Sequence[Sequence[Any]], heads: int) -> None:
    """The parser made one message of each group (else the two disagree: a bug, said)."""
    if len(entries) != len(groups) + heads:
        raise ValueError(f"{len(groups)} item groups parsed into {len(entries) - heads} messages")


def shifted_items(problems: InvalidInput, field: str, by: int) -> InvalidInput:
    """Problems named by the item's index in the whole ``input``."""
    return InvalidInput([(_shifted(p, field, by), m) for p, m in problems.problems])


def _shifted(path: Path, field: str, by: int) -> Path:
    if len(path) > 1 and path[0] == field and isinstance(path[1], int):
        return (field, path[1] + by, *path[2:])
    return path
