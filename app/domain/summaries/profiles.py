"""Summariser profiles: the deployment's named summarisers, and a session's choice among them.

A profile (``CTXC_SUMMARIZER_PROFILES``) holds everything a backend needs, credentials
included; ``default`` is the one the ``CTXC_SUMMARIZER*`` settings describe, ``ledger`` and
``extractive`` the built-in summarisers (``ledger`` the default and every fallback). A session's
compaction policy (or one request's override) chooses a profile by name and may change its
model, add instructions, shorten or lengthen its request time limit and name another profile to
fall back to: never a URL or a credential.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

BackendKind = Literal["ledger", "extractive", "openai", "anthropic", "webhook"]
DEFAULT_PROFILE = "default"
EXTRACTIVE_PROFILE = "extractive"
LEDGER_PROFILE = "ledger"
BUILT_IN = frozenset({LEDGER_PROFILE, EXTRACTIVE_PROFILE})
RESERVED = frozenset({DEFAULT_PROFILE, *BUILT_IN})
MAX_INSTRUCTIONS_CHARS = 2_000
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class ProfileSpec(BaseModel):
    """One deployment profile: the backend, where it is, its credentials and its limits (the
    ``CTXC_SUMMARIZER_*`` defaults where a field is left out)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: BackendKind
    url: str | None = None
    model: str | None = None
    api_key: SecretStr | None = None
    webhook_secret: SecretStr | None = None
    timeout_seconds: float | None = Field(None, gt=0)
    retries: int | None = Field(None, ge=0, le=10)
    deadline_seconds: float | None = Field(None, gt=0)
    window_tokens: int | None = Field(None, ge=1_024)
    max_tokens: int | None = Field(None, ge=64)
    fallback: str | None = Field(
        None, description="The profile used when this one fails (default: ledger)."
    )


class SummarizerChoice(BaseModel):
    """The summariser a session (or one request) uses: a deployment profile and what changes.
    Credentials and URLs stay in the deployment's profiles: such fields are refused here."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    profile: str | None = Field(
        None, pattern=NAME_PATTERN, description="A deployment profile (default: `default`)."
    )
    model: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        pattern=r"^[^\x00-\x1f]*$",
        description="The model asked, instead of the profile's (openai, anthropic).",
    )
    instructions: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_INSTRUCTIONS_CHARS,
        pattern=r"^[^\x00]*$",
        description="Further instructions for LLM summarisers, after the built-in ones.",
    )
    timeout_seconds: float | None = Field(
        None, gt=0, le=600, description="Time limit of one summariser request."
    )
    fallback: str | None = Field(
        None,
        pattern=NAME_PATTERN,
        description="The profile used when this one fails (`ledger`, `extractive`, or another "
        "profile).",
    )

    def names(self) -> list[tuple[str, str]]:
        """The (field, profile name) pairs this choice refers to."""
        return [(f, n) for f, n in (("profile", self.profile), ("fallback", self.fallback)) if n]


def writer_of(
    choice: SummarizerChoice | None, profile: str | None, kind: str | None, available: bool
) -> dict[str, Any]:
    """What names the summariser ``choice`` asks for, as a prepared summary stores it: the
    changes asked (as JSON), the profile it resolves to and its backend kind, and whether the
    deployment has the profile named (a prepared summary is swapped in only under a policy
    naming the same)."""
    changes = None if choice is None else choice.model_dump(mode="json", exclude_none=True)
    return {"choice": changes, "profile": profile, "kind": kind, "available": available}


def fallback_chain_problem(specs: dict[str, ProfileSpec]) -> str | None:
    """Why the profiles' fallbacks are unusable (an unknown name or a loop), or None."""
    known = set(specs) | BUILT_IN
    for name, spec in specs.items():
        seen = [name]
        current = spec.fallback
        while current is not None and current not in BUILT_IN:
            if current not in known:
                return f"profile {name!r}: fallback {current!r} is not a profile"
            if current in seen:
                return f"profile {name!r}: the fallbacks loop ({' -> '.join([*seen, current])})"
            seen.append(current)
            current = specs[current].fallback
    return None
