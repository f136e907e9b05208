"""Counts that learn: estimates of a private tokenizer corrected from the counts providers report.

A profile whose tokenizer is not public (``exact=False``) is counted with a public encoding; the
provider's own count differs, by a share that depends on the tokenizer and on how the request is
rendered. Each acknowledged compile whose usage carries a prompt count is a **sample**: the raw
estimate ctxc made of the request, the provider's whole prompt count, and the figure ctxc gave.

What the reported usage means (the API's ``Usage`` fields, as the wire readers fill them):

- Anthropic-shaped profiles: ``prompt_tokens`` is ``input_tokens``, which *excludes* the cached
  prompt; the whole prompt is ``prompt_tokens + cache_read_tokens + cache_write_tokens``
  (``cache_read_input_tokens`` and ``cache_creation_input_tokens``).
- OpenAI-shaped profiles: ``prompt_tokens`` is the whole prompt; ``cache_read_tokens``
  (``prompt_tokens_details.cached_tokens``) is a share already inside it, so it is not added.

The estimator, over the newest ``KEPT`` samples of a scope (a session, or a tenant's profile):

- a sample whose ratio (reported / estimated) is outside ``PLAUSIBLE`` is not kept at all (a
  usage of another request, or one that left the cache out);
- the median ratio is found, and samples further than ``BAND`` (relative) from it are outliers,
  ignored;
- with at least ``MIN_SAMPLES`` inliers, the factor is their summed reported count over their
  summed estimates (large requests weigh more: a fixed overhead skews small ones), clamped to
  ``[1 - MARGIN, HIGHEST]`` and rounded to four decimals. So a calibrated count is never below
  the raw estimate by more than ``MARGIN`` (5%), nor above twice it.

A calibrated count is ``ceil(estimate * factor)``; the budget a compile trims to is
``floor(context_window / factor)`` estimated tokens, so a request within it is within the window
once calibrated (both in exact rational arithmetic). Everything here is pure and deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from statistics import median
from typing import Any, Literal

MARGIN = 0.05
LOWEST = 1 - MARGIN
HIGHEST = 2.0
KEPT = 16
MIN_SAMPLES = 3
BAND = 0.15
PLAUSIBLE = (0.25, 4.0)
KEY_NAME_CHARS = 200

Scope = Literal["session", "profile"]


@dataclass(frozen=True)
class Sample:
    """One acknowledged compile: ctxc's raw estimate, the provider's whole prompt count, and the
    figure ctxc answered with (the estimate, or its calibrated count)."""

    estimated: int
    reported: int
    given: int

    @property
    def ratio(self) -> float:
        return self.reported / self.estimated


@dataclass(frozen=True)
class Calibration:
    """The factor a scope's samples call for, and how the last figure given compared."""

    factor: float
    samples: int  # the inliers the factor was learnt from
    scope: Scope
    last: Sample

    def count(self, estimate: int) -> int:
        """The calibrated count of a raw ``estimate``."""
        return math.ceil(estimate * Fraction(self.factor))

    def budget(self, context_window: int) -> int:
        """The most estimated tokens whose calibrated count fits ``context_window``."""
        return math.floor(context_window / Fraction(self.factor))

    @property
    def error_tokens(self) -> int:
        """How far the last figure given was from the reported count (positive: over)."""
        return self.last.given - self.last.reported

    @property
    def error_share(self) -> float:
        """``error_tokens`` as a share of the reported count."""
        return round(self.error_tokens / self.last.reported, 4)


def key_of(name: str, encoding: str, output: str) -> str:
    """What samples are kept under: the target shape (how usage reads), the encoding (what the
    estimate counts) and the profile or model name."""
    return f"{output}:{encoding}:{name[:KEY_NAME_CHARS]}"


def cache_apart(key: str) -> bool:
    """Whether the provider of ``key`` reports cached prompt tokens apart (Anthropic)."""
    return key.split(":", 1)[0] == "anthropic"


def reported_prompt(usage: Mapping[str, Any] | None, apart: bool) -> int | None:
    """The provider's whole prompt count from reported usage (None without a prompt count)."""
    prompt = (usage or {}).get("prompt_tokens")
    if not isinstance(prompt, int) or isinstance(prompt, bool):
        return None
    if apart:
        assert usage is not None
        for name in ("cache_read_tokens", "cache_write_tokens"):
            extra = usage.get(name)
            prompt += extra if isinstance(extra, int) and not isinstance(extra, bool) else 0
    return prompt


def sample_of(
    estimated: int, given: int, usage: Mapping[str, Any] | None, apart: bool
) -> Sample | None:
    """The sample a reported usage makes, or None: no prompt count, nothing estimated, or a
    ratio no tokenizer difference explains."""
    reported = reported_prompt(usage, apart)
    if reported is None or reported <= 0 or estimated <= 0:
        return None
    sample = Sample(estimated, reported, given)
    low, high = PLAUSIBLE
    return sample if low <= sample.ratio <= high else None


def kept(samples: Sequence[Sample], new: Sample) -> tuple[Sample, ...]:
    """The ring after ``new``: the newest ``KEPT`` samples, oldest first."""
    return (*samples, new)[-KEPT:]


def inliers(samples: Sequence[Sample]) -> list[Sample]:
    """The samples within ``BAND`` of the median ratio."""
    if not samples:
        return []
    middle = median(s.ratio for s in samples)
    return [s for s in samples if abs(s.ratio / middle - 1) <= BAND]


def factor_of(samples: Sequence[Sample]) -> tuple[float, int] | None:
    """The clamped factor and the inliers it was learnt from (None: too few inliers)."""
    used = inliers(samples)
    if len(used) < MIN_SAMPLES:
        return None
    raw = sum(s.reported for s in used) / sum(s.estimated for s in used)
    return round(min(max(raw, LOWEST), HIGHEST), 4), len(used)


def calibration_of(samples: Sequence[Sample], scope: Scope) -> Calibration | None:
    """The scope's calibration, when its samples are enough."""
    found = factor_of(samples)
    if found is None:
        return None
    return Calibration(found[0], found[1], scope, samples[-1])


def choose(session: Sequence[Sample], profile: Sequence[Sample]) -> Calibration | None:
    """The session's calibration when it has enough samples, else the tenant's for the
    profile, else none."""
    return calibration_of(session, "session") or calibration_of(profile, "profile")


def to_json(samples: Sequence[Sample]) -> list[list[int]]:
    """Samples as stored: ``[estimated, reported, given]`` each."""
    return [[s.estimated, s.reported, s.given] for s in samples]


def from_json(raw: Any) -> tuple[Sample, ...]:
    """Stored samples back (entries that are not three positive integers are skipped)."""
    if not isinstance(raw, list):
        return ()
    found = []
    for entry in raw[-KEPT:]:
        if (
            isinstance(entry, list)
            and len(entry) == 3
            and all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in entry)
        ):
            found.append(Sample(*entry))
    return tuple(found)
