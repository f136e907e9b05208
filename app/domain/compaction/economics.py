"""Whether a request-boundary compaction pays: what it sheds against what it costs.

A compaction makes every later prompt ``shed`` tokens shorter, but it changes the prompt at the
first summarised message, so a provider's prompt cache writes everything from the summary on
again (``rewrite``, the record's ``cache_rewrite_tokens``). In units of the input price, over
the ``turns`` still expected, it saves ``shed * turns * read`` (those tokens would have been
read from the cache) and costs ``rewrite * (write - read)`` (written instead of read once). It
is applied when the saving is at least the cost. Without a prompt cache nothing is rewritten at
a premium: the gate is off.

A compaction must also shed at least ``min_shed_pct`` of the history's tokens: one that sheds
less would leave the history over its trigger again a few turns later (a compact/grow loop).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from app.domain.compilers.base import Item
from app.domain.providers import ProviderProfile

# The expected remaining turns, when the policy does not say: as many API rounds as the session
# has had so far over its whole life (a conversation that ran n turns is as likely to run about
# n more as it is to stop sooner), within these bounds.
MIN_TURNS = 1
MAX_TURNS = 100
# A summary message's metadata: the API rounds it stands for (those it took, and those the
# summaries it took stood for), so the rounds so far survive compaction.
ROUNDS_KEY = "summarized_rounds"


@dataclass(frozen=True)
class Prices:
    """A provider's prompt-cache prices per token, in units of its input price."""

    read: float
    write: float


# By the profile's output shape: Anthropic bills a cache read at a tenth of input and a write at
# 1.25 times; OpenAI reads at half price with no write premium; Gemini's implicit cache reads at
# a quarter, again without a write premium.
PRICES: dict[str, Prices] = {
    "anthropic": Prices(0.1, 1.25),
    "openai": Prices(0.5, 1.0),
    "responses": Prices(0.5, 1.0),
    "gemini": Prices(0.25, 1.0),
}


def prices_of(profile: ProviderProfile) -> Prices | None:
    """The profile's cache prices; None when it keeps no prompt cache (the gate is off)."""
    return PRICES.get(profile.output) if profile.prompt_cache else None


def rounds_of(items: Sequence[Item]) -> int:
    """The API rounds ``items`` stand for: their assistant messages, and the rounds each
    summary among them summarised (archived, so no longer in the history)."""
    rounds = 0
    for item in items:
        carried = item.message.metadata.get(ROUNDS_KEY)
        rounds += carried if isinstance(carried, int) else 0
        rounds += item.message.role == "assistant"
    return rounds


def expected_turns(items: Sequence[Item], given: int | None) -> int:
    """``given``, else the API rounds of the session's life so far (``rounds_of`` the history:
    a compaction does not make a session younger), within the bounds."""
    if given is not None:
        return given
    return max(MIN_TURNS, min(MAX_TURNS, rounds_of(items)))


@dataclass(frozen=True)
class Economics:
    """Both sides of the gate, in input-price units, and whether the compaction was applied."""

    shed_tokens: int
    expected_turns: int
    rewrite_tokens: int
    saved: float
    cost: float
    applied: bool

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def weigh(
    shed: int, rewrite: int, turns: int, prices: Prices | None, forced: bool = False
) -> Economics:
    """The gate's figures; applied when the saving covers the cost, when there are no cache
    prices, or when ``forced`` (the history does not fit the window: it must be compacted)."""
    read, write = (prices.read, prices.write) if prices else (1.0, 1.0)
    saved = round(shed * turns * read, 2)
    cost = round(rewrite * max(0.0, write - read), 2) if prices else 0.0
    return Economics(shed, turns, rewrite, saved, cost, forced or saved >= cost)


def sheds_enough(shed: int, tokens_before: int, min_shed_pct: float) -> bool:
    """Whether ``shed`` tokens are at least ``min_shed_pct`` percent of ``tokens_before``."""
    return 100 * shed >= min_shed_pct * tokens_before
