"""Summariser settings: checked when the service starts, secrets never echoed, and the factory
builds what they name."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import ValidationError

from app.adapters.summarizers import Summary, summarizer_from_settings
from app.adapters.summarizers.extractive import Extractive
from app.adapters.summarizers.factory import summarizers_from_settings
from app.adapters.summarizers.ledger import LedgerSummarizer
from app.adapters.summarizers.resilient import Resilient
from app.domain.summaries.profiles import SummarizerChoice
from app.settings import Settings
from tests.adapters.helpers import COUNTER, summarize
from tests.adapters.stubs import StubServer
from tests.unit.test_extractive_summary import build_failure


@pytest.mark.parametrize(
    ("fields", "problems"),
    [
        (
            {"summarizer": "openai"},
            [
                "CTXC_SUMMARIZER=openai needs CTXC_SUMMARIZER_URL",
                "CTXC_SUMMARIZER=openai needs CTXC_SUMMARIZER_MODEL",
            ],
        ),
        (
            {"summarizer": "anthropic", "summarizer_model": "m"},
            ["CTXC_SUMMARIZER=anthropic needs CTXC_SUMMARIZER_API_KEY"],
        ),
        (
            {"summarizer": "webhook", "summarizer_url": "https://hooks.example.org/s"},
            ["CTXC_SUMMARIZER=webhook needs CTXC_SUMMARIZER_WEBHOOK_SECRET"],
        ),
        (
            {
                "summarizer": "openai",
                "summarizer_url": "file:///etc/passwd",
                "summarizer_model": "m",
            },
            ["CTXC_SUMMARIZER_URL must be an http(s) URL, not 'file:///etc/passwd'"],
        ),
        (
            {
                "summarizer": "openai",
                "summarizer_url": "http://h/v1",
                "summarizer_model": "m",
                "summarizer_window_tokens": 4_000,
            },
            [
                "CTXC_SUMMARIZER_WINDOW_TOKENS must be at least 3 x CTXC_SUMMARIZER_MAX_TOKENS "
                "+ 1024 (7024), so that partial summaries can be merged"
            ],
        ),
    ],
)
def test_an_incomplete_summariser_configuration_is_refused(
    fields: dict[str, object], problems: list[str]
) -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(**fields)
    [error] = caught.value.errors()
    assert error["msg"] == "Value error, " + "; ".join(problems)


def test_a_configuration_error_never_shows_the_secrets() -> None:
    with pytest.raises(ValidationError) as caught:
        Settings(summarizer="anthropic", summarizer_api_key="sk-very-secret")
    assert "sk-very-secret" not in str(caught.value)
    settings = Settings(summarizer_api_key="sk-very-secret")
    assert "sk-very-secret" not in repr(settings)


def test_the_default_summariser_is_the_ledger_one() -> None:
    summarizer = summarizer_from_settings(Settings(), COUNTER)
    assert isinstance(summarizer, LedgerSummarizer)
    summary = summarize(summarizer, build_failure())
    assert (summary.backend, summary.fallback_reason, summary.requests) == ("ledger", None, 0)
    assert summary.loss is not None and summary.loss.kept


def test_the_extractive_summariser_stays_selectable() -> None:
    summarizer = summarizer_from_settings(Settings(summarizer="extractive"), COUNTER)
    assert isinstance(summarizer, Extractive)
    summary = summarize(summarizer, build_failure())
    assert summary.text.startswith("[ctxc extractive summary of 6 messages")


def test_a_remote_summariser_is_wrapped_to_fall_back() -> None:
    settings = Settings(summarizer="anthropic", summarizer_model="m", summarizer_api_key="k")
    summarizer = summarizer_from_settings(settings, COUNTER)
    assert isinstance(summarizer, Resilient) and summarizer.name == "anthropic"
    summarize(summarizer, [])  # closes its HTTP client


def _profiles(**declared: dict[str, object]) -> Settings:
    return Settings(summarizer_profiles=json.dumps(declared))


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        (
            {"a": {"kind": "openai", "model": "m"}},
            "CTXC_SUMMARIZER_PROFILES['a']: kind openai needs url",
        ),
        (
            {"a": {"kind": "webhook", "url": "ftp://h/x", "webhook_secret": "s"}},
            "CTXC_SUMMARIZER_PROFILES['a']: url must be an http(s) URL, not 'ftp://h/x'",
        ),
        (
            {"default": {"kind": "extractive"}},
            "CTXC_SUMMARIZER_PROFILES['default']: the name 'default' is reserved",
        ),
        (
            {"a": {"kind": "extractive", "fallback": "b"}},
            "CTXC_SUMMARIZER_PROFILES: profile 'a': fallback 'b' is not a profile",
        ),
        (
            {
                "a": {"kind": "extractive", "fallback": "b"},
                "b": {"kind": "extractive", "fallback": "a"},
            },
            "CTXC_SUMMARIZER_PROFILES: profile 'a': the fallbacks loop (a -> b -> a)",
        ),
        (
            {"a": {"kind": "extractive", "window_tokens": 2_000}},
            "CTXC_SUMMARIZER_PROFILES['a']: window_tokens must be at least 3 x max_tokens + 1024",
        ),
        (
            {"a": {"kind": "anthropic", "model": "m", "api_key": "sk-hidden", "colour": "red"}},
            "CTXC_SUMMARIZER_PROFILES['a']['colour']: Extra inputs are not permitted",
        ),
    ],
)
def test_unusable_summarizer_profiles_are_refused_at_start_up(
    declared: dict[str, dict[str, object]], problem: str
) -> None:
    with pytest.raises(ValidationError) as caught:
        _profiles(**declared)
    [error] = caught.value.errors()
    assert error["msg"].startswith("Value error, " + problem), error["msg"]
    assert "sk-hidden" not in str(caught.value)


def test_profiles_take_the_default_limits_and_are_built_once_each() -> None:
    settings = _profiles(
        fast={"kind": "anthropic", "model": "m", "api_key": "k", "timeout_seconds": 5},
        hook={
            "kind": "webhook",
            "url": "http://127.0.0.1:9/h",
            "webhook_secret": "s",
            "fallback": "fast",
        },
    )
    fast = settings.profiles["fast"]
    assert (fast.timeout_seconds, fast.retries, fast.max_tokens) == (5, 2, 2_000)
    assert set(settings.profiles) == {"default", "ledger", "extractive", "fast", "hook"}
    built = summarizers_from_settings(settings, COUNTER)
    assert built.names == frozenset(settings.profiles)
    assert isinstance(built.default, LedgerSummarizer)
    assert built.kind(SummarizerChoice(profile="hook")) == "webhook"
    assert built.kind(SummarizerChoice(profile="removed-since")) == "ledger"  # the default
    chosen = built.choose(SummarizerChoice(profile="fast", model="other"))
    assert isinstance(chosen, Resilient) and chosen.model == "other"
    asyncio.run(built.aclose())


def test_a_sessions_time_limit_replaces_the_profiles() -> None:
    """A real endpoint that never answers: the profile waits 30 s a request, the session 0.3 s."""
    with StubServer(lambda _: None) as stub:
        settings = _profiles(
            slow={
                "kind": "openai",
                "url": f"{stub.url}/v1",
                "model": "m",
                "retries": 0,
                "timeout_seconds": 30,
            },
        )
        built = summarizers_from_settings(settings, COUNTER)
        chosen = built.choose(SummarizerChoice(profile="slow", timeout_seconds=0.3))

        async def run() -> Summary:
            try:
                return await chosen.summarize(build_failure(), "session_compaction", 300)
            finally:
                await built.aclose()

        summary = asyncio.run(run())
    assert (summary.backend, summary.fallback_reason) == (
        "ledger",
        "openai: no answer within 0.3 s (1 attempt)",
    )


def test_a_profile_the_deployment_does_not_have_is_the_default_saying_so() -> None:
    """A stored policy naming a profile removed since (or one another replica has): the
    default writes the summary, and it says why it stands in."""
    built = summarizers_from_settings(_profiles(), COUNTER)
    chosen = built.choose(SummarizerChoice(profile="removed-since"))
    named = built.choose(SummarizerChoice(profile="ledger"))

    async def run() -> tuple[Summary, Summary]:
        history = build_failure()
        return (
            await chosen.summarize(history, "session_compaction", 300),
            await named.summarize(history, "session_compaction", 300),
        )

    stood_in, wrote = asyncio.run(run())
    assert (stood_in.backend, stood_in.summarizer_reason) == ("ledger", "summarizer_unavailable")
    assert stood_in.fallback_reason == "no summariser profile 'removed-since' in this deployment"
    assert stood_in.text == wrote.text
    assert (wrote.summarizer_reason, wrote.fallback_reason) == (None, None)
    writer = built.writer(SummarizerChoice(profile="removed-since"))
    assert writer == {
        "profile": "default",
        "kind": "ledger",
        "choice": {"profile": "removed-since"},
        "available": False,
    }
