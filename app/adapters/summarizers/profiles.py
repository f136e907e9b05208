"""The deployment's summarisers by profile, and the one a session's choice makes of them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from app.adapters.summarizers.base import Source, Summarizer, Summary
from app.adapters.summarizers.resilient import Resilient
from app.domain.messages import Message
from app.domain.summaries import Reason
from app.domain.summaries.profiles import DEFAULT_PROFILE, SummarizerChoice, writer_of


class Summarizers:
    """One summariser per profile, built once with the service; ``choose`` makes a session's
    summariser of them without a new HTTP client (it shares the profile's)."""

    def __init__(self, built: Mapping[str, Summarizer], kinds: Mapping[str, str]) -> None:
        self._built = dict(built)
        self._kinds = dict(kinds)
        self.names = frozenset(self._built)

    @property
    def default(self) -> Summarizer:
        return self._built[DEFAULT_PROFILE]

    def kind(self, choice: SummarizerChoice | None) -> str:
        """The backend kind ``choice`` runs first (for metrics)."""
        return self._kinds[self._profile(choice)]

    def writer(self, choice: SummarizerChoice | None) -> dict[str, Any]:
        """What names the summariser ``choice`` asks for: the changes asked (as JSON), the
        profile it resolves to here and its backend kind, and whether this deployment has the
        profile named (``available``)."""
        named = choice.profile if choice is not None else None
        available = named is None or named in self._built
        return writer_of(choice, self._profile(choice), self.kind(choice), available)

    def choose(self, choice: SummarizerChoice | None) -> Summarizer:
        """The summariser ``choice`` asks for: its profile with its changes. A profile the
        deployment does not have (a session stored before it was removed, or by a replica
        configured with more) is the default, whose summaries say so (``Unavailable``)."""
        chosen = self._tuned(self._built[self._profile(choice)], choice)
        named = choice.profile if choice is not None else None
        if named is None or named in self._built:
            return chosen
        return Unavailable(chosen, named)

    def _tuned(self, chosen: Summarizer, choice: SummarizerChoice | None) -> Summarizer:
        if choice is None or not isinstance(chosen, Resilient):
            return chosen  # the built-in summariser has neither model nor instructions
        fallback = self._built.get(choice.fallback) if choice.fallback else None
        return chosen.tuned(choice.model, choice.instructions, choice.timeout_seconds, fallback)

    def _profile(self, choice: SummarizerChoice | None) -> str:
        name = choice.profile if choice is not None else None
        return name if name is not None and name in self._built else DEFAULT_PROFILE

    async def aclose(self) -> None:
        """Closes every profile's HTTP client."""
        for summarizer in self._built.values():
            await summarizer.aclose()


class Unavailable:
    """The default summariser standing in for ``profile``, which the deployment does not have:
    each summary says so (``summarizer_unavailable``, and why in ``fallback_reason``)."""

    def __init__(self, default: Summarizer, profile: str) -> None:
        self._default, self.profile = default, profile

    async def summarize(
        self,
        messages: Sequence[Message],
        reason: Reason,
        max_tokens: int | None = None,
        source: Source | None = None,
    ) -> Summary:
        summary = await self._default.summarize(messages, reason, max_tokens, source)
        why = f"no summariser profile {self.profile!r} in this deployment"
        if summary.fallback_reason is not None:  # the default fell back too
            why = f"{why}; then {summary.fallback_reason}"
        return replace(summary, fallback_reason=why, summarizer_reason="summarizer_unavailable")

    async def aclose(self) -> None:
        return None  # the default's client is the deployment's to close
