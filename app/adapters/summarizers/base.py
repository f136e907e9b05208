"""The summariser interface, the summary it returns, and the backends ``Resilient`` drives."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from app.domain.messages import Message
from app.domain.summaries import Reason
from app.domain.summaries.loss import Loss


@dataclass(frozen=True)
class Summary:
    """A summary's text, the backend that wrote it, why it fell back (if it did), how many
    requests went to the configured backend for it, whether it was cut to its budget, the
    model and deployment profile that wrote it (when not the built-in summariser), and what it
    kept and lost (``loss``, when the summariser knows: a ledger summary)."""

    text: str
    backend: str
    fallback_reason: str | None = None
    requests: int = 0
    cut: bool = False
    model: str | None = None
    profile: str | None = None
    loss: Loss | None = None


@dataclass(frozen=True)
class Source:
    """Where the messages to summarise stand in their session: the seq of each (a summary's
    pointers into the history and the compaction's archive), the messages that lead the
    conversation ahead of them and stay (its system prompt), and the shape the session's
    prompts are sent in (its profile's ``output``). Empty when unknown."""

    seqs: tuple[int, ...] = ()
    system: tuple[Message, ...] = ()
    target: str | None = None


class Summarizer(Protocol):
    """Summarises old history within ``max_tokens`` (the compaction policy's budget; None: the
    summariser's own default), knowing where it stands (``source``) when the caller does.
    Backend failures never raise: the summary falls back."""

    async def summarize(
        self,
        messages: Sequence[Message],
        reason: Reason,
        max_tokens: int | None = None,
        source: Source | None = None,
    ) -> Summary: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Request:
    """One request to a backend: a chunk of history (part ``k`` of ``n`` when cut), with the
    model asked instead of the backend's and further instructions when a session chose them."""

    messages: tuple[Message, ...]
    reason: Reason
    max_tokens: int
    part: tuple[int, int] | None = None
    model: str | None = None
    extra: str | None = None


class BackendError(Exception):
    """A backend request failed; ``retryable`` when trying again may help."""

    def __init__(self, message: str, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class Backend(Protocol):
    """A remote summariser: one request in, the summary text out, or a ``BackendError``."""

    name: str

    async def complete(self, request: Request) -> str: ...

    async def aclose(self) -> None: ...
