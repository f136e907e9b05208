"""Model names resolve to provider profiles: the table, snapshot suffixes, declared models."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import date

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.domain.errors import UnknownName
from app.domain.models import (
    BUILTIN_CATALOG,
    BUILTIN_MODELS,
    Model,
    ModelDeclaration,
    build_catalog,
    snapshot_bases,
)
from app.domain.providers import PROFILES


@pytest.mark.parametrize(
    ("name", "output", "window", "encoding", "exact"),
    [
        ("claude-sonnet-4-5", "anthropic", 200_000, "o200k_base", False),
        ("claude-opus-4-1", "anthropic", 200_000, "o200k_base", False),
        ("claude-3-7-sonnet", "anthropic", 200_000, "o200k_base", False),
        ("gpt-4.1", "openai", 1_047_576, "o200k_base", True),
        ("gpt-4.1-mini", "openai", 1_047_576, "o200k_base", True),
        ("gpt-4o-mini", "openai", 128_000, "o200k_base", True),
        ("o3", "openai", 200_000, "o200k_base", True),
        ("o4-mini", "openai", 200_000, "o200k_base", True),
        ("gpt-5", "openai", 272_000, "o200k_base", True),
        ("gpt-4", "openai", 8_192, "cl100k_base", True),
        ("gpt-3.5-turbo", "openai", 16_385, "cl100k_base", True),
    ],
)
def test_a_model_name_resolves_to_its_providers_profile_with_its_window(
    name: str, output: str, window: int, encoding: str, exact: bool
) -> None:
    profile = BUILTIN_CATALOG.resolve(name)
    assert (profile.name, profile.output, profile.context_window) == (name, output, window)
    assert (profile.encoding, profile.exact) == (encoding, exact)


@pytest.mark.parametrize(
    ("name", "model"),
    [
        ("claude-sonnet-4-5-20250929", "claude-sonnet-4-5"),
        ("claude-opus-4-20250514", "claude-opus-4"),
        ("claude-3-5-sonnet-latest", "claude-3-5-sonnet"),
        ("claude-opus-4-1@20250805", "claude-opus-4-1"),
        ("gpt-4.1-2025-04-14", "gpt-4.1"),
        ("gpt-4o-mini-2024-07-18", "gpt-4o-mini"),
        ("gpt-4-0613", "gpt-4"),
        ("gpt-3.5-turbo-0125", "gpt-3.5-turbo"),
        ("o3-2025-04-16", "o3"),
    ],
)
def test_dated_snapshots_and_aliases_resolve_to_their_model(name: str, model: str) -> None:
    found = BUILTIN_CATALOG.model(name)
    assert found is not None and found.name == model
    assert BUILTIN_CATALOG.resolve(name).context_window == found.context_window


@pytest.mark.parametrize(
    "name",
    [
        "gpt-4.1-2025-13-14",  # no month 13
        "gpt-4.1-2025-04-14-2025-04-14",  # one suffix only
        "claude-sonnet-4-5-2025",
        "gpt-4o-minix",
        "gpt-4-2024",  # not a month and day
        "claude-sonnet-4.5",
        "-20250929",
        "",
    ],
)
def test_names_that_are_no_snapshot_of_a_model_are_unknown(name: str) -> None:
    assert BUILTIN_CATALOG.model(name) is None
    with pytest.raises(UnknownName):
        BUILTIN_CATALOG.resolve(name)


@given(
    st.sampled_from(BUILTIN_MODELS),
    st.dates(),
    st.sampled_from(["-{y}-{m}-{d}", "-{y}{m}{d}", "@{y}{m}{d}", "-{m}{d}", "-latest"]),
)
def test_every_model_with_any_snapshot_suffix_resolves_to_it(
    model: Model, day: date, suffix: str
) -> None:
    name = model.name + suffix.format(y=f"{day.year:04d}", m=f"{day.month:02d}", d=f"{day.day:02d}")
    found = BUILTIN_CATALOG.model(name)
    assert found is not None and found.name == model.name


def test_profile_names_resolve_to_the_profiles_themselves() -> None:
    for name, profile in PROFILES.items():
        assert BUILTIN_CATALOG.resolve(name) == profile


def test_modern_openai_models_count_with_o200k_and_older_ones_with_cl100k() -> None:
    for model in BUILTIN_MODELS:
        profile = BUILTIN_CATALOG.resolve(model.name)
        old = model.name.startswith(("gpt-4-", "gpt-3.5")) or model.name == "gpt-4"
        assert profile.encoding == ("cl100k_base" if old else "o200k_base"), model.name
        assert profile.exact == (profile.output == "openai"), model.name


def test_an_unknown_name_says_how_to_declare_a_model() -> None:
    with pytest.raises(UnknownName) as caught:
        BUILTIN_CATALOG.resolve("my-model", "provider")
    message = str(caught.value)
    assert caught.value.field == "provider"
    assert "'my-model'" in message and "CTXC_MODELS" in message
    assert "context_window" in message and "GET /v1/models" in message


def test_a_very_long_name_is_looked_up_in_linear_time() -> None:
    name = "gpt-4.1" + "-2025-04-14" * 200_000
    started = time.perf_counter()
    assert BUILTIN_CATALOG.model(name) is None
    assert len(list(snapshot_bases(name))) == 1
    assert time.perf_counter() - started < 1.0


def test_declared_models_join_the_table_and_may_replace_a_built_in_one() -> None:
    catalog = build_catalog(
        {
            "llama-3.1-70b": ModelDeclaration(provider="ollama", context_window=131_072),
            "ft:gpt-4o-mini:acme": ModelDeclaration(provider="gpt-4o-mini-2024-07-18"),
            "gpt-4o-mini": ModelDeclaration(provider="openai", context_window=64_000),
            "legacy": ModelDeclaration(provider="anthropic", encoding="cl100k_base"),
        }
    )
    llama = catalog.resolve("llama-3.1-70b")
    assert (llama.output, llama.context_window, llama.exact) == ("openai", 131_072, False)
    tuned = catalog.resolve("ft:gpt-4o-mini:acme")
    assert (tuned.context_window, tuned.encoding, tuned.exact) == (128_000, "o200k_base", True)
    assert catalog.resolve("gpt-4o-mini-2024-07-18").context_window == 64_000
    assert catalog.models["gpt-4o-mini"].declared
    assert catalog.resolve("legacy").encoding == "cl100k_base"
    assert catalog.resolve("claude-sonnet-4-5").context_window == 200_000


@pytest.mark.parametrize(
    ("declared", "problem"),
    [
        (
            {"m": ModelDeclaration(provider="nope")},
            "CTXC_MODELS['m']: provider 'nope' is neither a provider profile",
        ),
        (
            {"openai": ModelDeclaration(provider="openai")},
            "CTXC_MODELS['openai']: a model name must be non-empty and not a provider profile's",
        ),
    ],
)
def test_a_bad_declaration_is_refused_naming_it(
    declared: dict[str, ModelDeclaration], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem.replace("[", r"\[").replace("]", r"\]")):
        build_catalog(declared)


def test_a_snapshot_of_a_model_with_its_own_profile_is_that_profile_renamed() -> None:
    for name in ("gpt-4o", "gpt-4.1", "o3", "gpt-4", "gpt-4-turbo", "gpt-3.5-turbo"):
        dated = BUILTIN_CATALOG.resolve(f"{name}-2024-01-25")
        assert replace(dated, name=name) == replace(PROFILES[name], description=dated.description)
