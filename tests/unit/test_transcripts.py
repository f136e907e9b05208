"""Real recorded transcripts convert to canonical messages and back without loss."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from app.domain.formats.anthropic import from_anthropic, to_anthropic
from app.domain.formats.openai import from_openai, to_openai
from app.domain.messages import Message

# The transcripts live beside the repository (CI has them, a fresh clone does not).
TRANSCRIPTS = Path(__file__).resolve().parents[3] / "shared" / "transcripts"

if not TRANSCRIPTS.is_dir():
    pytest.skip(f"no transcripts folder at {TRANSCRIPTS}", allow_module_level=True)


def load(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def names(provider: str) -> list[str]:
    return sorted(path.name for path in (TRANSCRIPTS / provider).glob("*.json"))


def test_there_are_transcripts_of_both_providers() -> None:
    assert names("openai")
    assert names("anthropic")


@pytest.mark.parametrize("name", names("openai"))
def test_openai_transcript_round_trips_exactly(name: str) -> None:
    messages = load(TRANSCRIPTS / "openai" / name)["messages"]
    converted = from_openai(messages)
    assert len(converted) == len(messages)
    assert to_openai(converted) == messages


@pytest.mark.parametrize("name", names("anthropic"))
def test_anthropic_transcript_round_trips_exactly(name: str) -> None:
    document = load(TRANSCRIPTS / "anthropic" / name)
    system, messages = document.get("system"), document["messages"]
    assert to_anthropic(from_anthropic(messages, system)) == (system, messages)


@pytest.mark.parametrize(
    "path",
    [f"openai/{n}" for n in names("openai")] + [f"anthropic/{n}" for n in names("anthropic")],
)
def test_transcript_messages_survive_storage_and_the_other_provider(path: str) -> None:
    document = load(TRANSCRIPTS / path)
    if path.startswith("openai/"):
        converted = from_openai(document["messages"])
        system, turns = to_anthropic(converted)
        from_anthropic(turns, system)
    else:
        converted = from_anthropic(document["messages"], document.get("system"))
        from_openai(to_openai(converted))
    assert all(Message.model_validate(m.to_json()) == m for m in converted)
