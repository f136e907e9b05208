"""The deployment's summarisers by profile, and the one a session's choice makes of them."""

from __future__ import annotations

from collections.abc import Mapping

from app.adapters.summarizers.base import Summarizer
from app.adapters.summarizers.resilient import Resilient
from app.domain.summaries.profiles import DEFAULT_PROFILE, SummarizerChoice


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

    def choose(self, choice: SummarizerChoice | None) -> Summarizer:
        """The summariser ``choice`` asks for: its profile with its changes. A profile the
        deployment no longer has (a session stored before it was removed) is the default."""
        chosen = self._built[self._profile(choice)]
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
