"""The summariser interface, the summary it returns, and the backends ``Resilient`` drives."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from app.domain.messages import Message
from app.domain.summaries import Reason, SummarizerReason
from app.domain.summaries.loss import Loss


@dataclass(frozen=True)
class Usage:
    """What a remote summariser reported its requests cost, summed: prompt tokens, those read
    from the provider's prompt cache (OpenAI ``prompt_tokens_details.cached_tokens``, Anthropic
    ``cache_read_input_tokens``) and those written to it (Anthropic
    ``cache_creation_input_tokens``). Anthropic's ``input_tokens`` leaves the cached ones out:
    ``prompt_tokens`` adds them back, so it is the whole prompt for both."""

    prompt_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens,
            self.cached_tokens + other.cached_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )

    def as_json(self) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "cache_write_tokens": self.cache_write_tokens,
        }


@dataclass(frozen=True)
class Answer:
    """A backend's summary text and the usage its provider reported (None: none reported)."""

    text: str
    usage: Usage | None = None


@dataclass(frozen=True)
class Summary:
    """A summary's text, the backend that wrote it, why it fell back (if it did), how many
    requests went to the configured backend for it, whether it was cut to its budget, the
    model and deployment profile that wrote it (when not the built-in summariser), what it
    kept and lost (``loss``, when the summariser knows: a ledger summary), the checksums of the
    constraints its opening block carries (app/domain/summaries/constraints.py), what the
    remote summariser's requests cost (``usage``, when it reported it), and why a summariser
    other than the one asked for wrote it (``summarizer_reason``, one of
    ``SUMMARIZER_REASONS``; None: the one asked for did)."""

    text: str
    backend: str
    fallback_reason: str | None = None
    requests: int = 0
    cut: bool = False
    model: str | None = None
    profile: str | None = None
    loss: Loss | None = None
    constraints: tuple[str, ...] = ()
    usage: Usage | None = None
    summarizer_reason: SummarizerReason | None = None


@dataclass(frozen=True)
class Source:
    """Where the messages to summarise stand in their session: the seq of each (a summary's
    pointers into the history and the compaction's archive), the messages that lead the
    conversation ahead of them and stay (its system prompt), and the shape the session's
    prompts are sent in (its profile's ``output``), how many constraints the service carries
    ahead of the summary (the summariser is told not to repeat them), and every message left
    ahead of them (``lead``: the system prompt, a kept opening task, pinned messages; what a
    request reusing the conversation's cached prefix sends first) and every message kept after
    them (``rest``: with them, the whole prompt the agent last sent, whose cached prefix such a
    request reads). Empty when unknown."""

    seqs: tuple[int, ...] = ()
    system: tuple[Message, ...] = ()
    target: str | None = None
    carried: int = 0
    lead: tuple[Message, ...] = ()
    rest: tuple[Message, ...] = ()


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
    model asked instead of the backend's and further instructions when a session chose them.
    ``source``: where the messages stand, given only when they are the whole history taken (not
    a chunk nor partial summaries), so a backend may send them as the conversation's own
    prefix."""

    messages: tuple[Message, ...]
    reason: Reason
    max_tokens: int
    part: tuple[int, int] | None = None
    model: str | None = None
    extra: str | None = None
    source: Source | None = None
    carried: int = 0


class BackendError(Exception):
    """A backend request failed; ``retryable`` when trying again may help."""

    def __init__(self, message: str, retryable: bool, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


class Backend(Protocol):
    """A remote summariser: one request in, the summary text out (with the usage reported,
    when the backend reads it), or a ``BackendError``."""

    name: str

    async def complete(self, request: Request) -> str | Answer: ...

    async def aclose(self) -> None: ...
