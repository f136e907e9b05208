"""The redact decorator: built-in secret patterns, custom ones, every text-bearing part."""

from __future__ import annotations

import pytest

from app.domain.compilers.base import Compiled, Item
from app.domain.compilers.builtins import all_sections
from app.domain.compilers.redact import compile_patterns, redact
from app.domain.errors import InvalidInput
from app.domain.formats._openai_parts import arguments_text
from app.domain.messages import (
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)
from tests.unit.compiler_builders import items, snapshot, texts, user

BASE = all_sections()


def redacted(*messages: Message, **params: object) -> Compiled:
    return redact(BASE, **params)(snapshot(items(*messages)))  # type: ignore[arg-type]


def redact_text(text: str, **params: object) -> str:
    return texts(redacted(user(text), **params))[0]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("key sk-proj-AbCdEfGhIjKlMnOpQrStUv12 ok", "key [REDACTED] ok"),
        ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv", "key [REDACTED]"),
        ("Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x", "Authorization: Bearer [REDACTED]"),
        ("id AKIAIOSFODNN7EXAMPLE here", "id [REDACTED] here"),
        (
            "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
            "AWS_SECRET_ACCESS_KEY=[REDACTED]",
        ),
        ("token ghp_" + "a1" * 18, "token [REDACTED]"),
        ("pat github_pat_" + "B" * 30, "pat [REDACTED]"),
        ("db postgres://app:s3cr3t@db:5432/x", "db postgres://app:[REDACTED]@db:5432/x"),
        ("cache redis://:hunter2@cache", "cache redis://:[REDACTED]@cache"),
        (
            "k -----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY----- done",
            "k [REDACTED] done",
        ),
        ("cut -----BEGIN PRIVATE KEY-----\nMIIE truncated", "cut [REDACTED]"),
    ],
)
def test_builtin_patterns_hide_common_secrets(text: str, expected: str) -> None:
    assert redact_text(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "the task-runner is fine",
        "https://example.com/path",
        "sk-short",
        "Bearer",
        "the bearer settlement agreement",
        "postgres://db:5432/x",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    compiled = redacted(user(text))
    assert texts(compiled) == [text]
    assert compiled.warnings == ()


def test_custom_patterns_and_replacement() -> None:
    text = "call 555-0100 or mail a@b.io"
    out = redact_text(text, patterns=[r"\d{3}-\d{4}", r"\S+@\S+"], replacement="***")
    assert out == "call *** or mail ***"


def test_builtins_can_be_turned_off() -> None:
    assert redact_text("sk-proj-AbCdEfGhIjKlMnOpQrStUv12", builtin=False) == (
        "sk-proj-AbCdEfGhIjKlMnOpQrStUv12"
    )


def test_a_custom_pattern_may_mark_the_secret_group() -> None:
    assert redact_text("pin=1234", patterns=[r"pin=(?P<secret>\d+)"]) == "pin=[REDACTED]"


@pytest.mark.parametrize("pattern", ["x*", "a?", "|b", r"\b", "^"])
def test_a_pattern_matching_the_empty_string_is_refused(pattern: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        compile_patterns([pattern], builtin=False)
    path, message = caught.value.problems[0]
    assert path == ("patterns", 0)
    assert "matches the empty string" in message


def test_an_invalid_regex_is_an_error_naming_it() -> None:
    with pytest.raises(InvalidInput) as caught:
        compile_patterns(["ok", "(unclosed"], builtin=True)
    path, message = caught.value.problems[0]
    assert path == ("patterns", 1)
    assert "(unclosed" in message


@pytest.mark.parametrize(
    ("pattern", "why"),
    [
        (r"token(?=\d)", "invalid perl operator: (?="),  # lookahead: RE2 has none
        (r"(?<!x)y", "invalid perl operator: (?<"),
        (r"(a)\1", "invalid escape sequence: \\1"),  # backreference
        (r"a\Cb", "\\C (one byte) could split a character"),
        (r"(?:ab|cd|ef){1,400}", "too complex"),
    ],
)
def test_what_re2_cannot_run_in_linear_time_is_refused_naming_the_pattern(
    pattern: str, why: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        compile_patterns(["ok", pattern], builtin=True)
    [(path, message)] = caught.value.problems
    assert path == ("patterns", 1)
    assert why in message and repr(pattern) in message


def test_secrets_found_by_several_patterns_are_replaced_once() -> None:
    compiled = redacted(
        user(f"Authorization: Bearer {SECRET} and 555-0100"), patterns=[r"\d{3}-\d{4}", r"555-"]
    )
    assert texts(compiled) == ["Authorization: Bearer [REDACTED] and [REDACTED]"]
    assert compiled.warnings == ("redact: 2 replacements (api_key: 1, custom: 1)",)


def test_text_around_secrets_keeps_its_characters() -> None:
    text = f"clé « {SECRET} » 日本 postgres://ü:pässwörd@db ✓"
    assert redact_text(text) == "clé « [REDACTED] » 日本 postgres://ü:[REDACTED]@db ✓"


def test_replacements_are_counted_in_a_warning() -> None:
    compiled = redacted(
        user("sk-proj-AbCdEfGhIjKlMnOpQrStUv12 and Bearer abcdef123456"),
        user("sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv"),
    )
    assert compiled.warnings == ("redact: 3 replacements (api_key: 2, bearer_token: 1)",)


SECRET = "sk-proj-AbCdEfGhIjKlMnOpQrStUv12"


def test_tool_call_arguments_are_redacted_in_every_string_value() -> None:
    call = ToolCallPart(
        id="c",
        name="http",
        arguments={"headers": {"auth": f"Bearer {SECRET}"}, "keys": [SECRET, 3], "n": 1},
        metadata={"openai": {"arguments": '{"keep":"the recorded string"}'}},
    )
    out = redacted(Message(role="assistant", content=(call,))).items[0].message.tool_calls[0]
    assert out.arguments == {
        "headers": {"auth": "Bearer [REDACTED]"},
        "keys": ["[REDACTED]", 3],
        "n": 1,
    }
    assert "arguments" not in out.metadata.get("openai", {})
    assert SECRET not in arguments_text(out)


def test_raw_string_arguments_are_redacted() -> None:
    call = ToolCallPart(id="c", name="sh", arguments=f"export KEY={SECRET}")
    out = redacted(Message(role="assistant", content=(call,))).items[0].message.tool_calls[0]
    assert out.arguments == "export KEY=[REDACTED]"


def test_tool_results_and_reasoning_are_redacted() -> None:
    results = Message(
        role="tool",
        content=(
            ToolResultPart(call_id="a", content=f"env: {SECRET}"),
            ToolResultPart(call_id="b", content=(TextPart(text=SECRET),)),
        ),
    )
    thought = Message(role="assistant", content=(ReasoningPart(text=f"use {SECRET}"),))
    compiled = redacted(results, thought)
    first, second = compiled.items[0].message.tool_results
    assert first.content == "env: [REDACTED]"
    assert second.content == (TextPart(text="[REDACTED]"),)
    reasoning = compiled.items[1].message.content[0]
    assert isinstance(reasoning, ReasoningPart) and reasoning.text == "use [REDACTED]"


def test_redaction_never_changes_the_stored_messages_and_recounts_tokens() -> None:
    stored = items(user(f"one {SECRET} two"), user("clean"), tokens=99)
    snap = snapshot(stored)
    compiled = redact(BASE)(snap)
    assert snap.items[0].message.text == f"one {SECRET} two"
    assert compiled.items[0] == Item(1, "messages", user("one [REDACTED] two"), 7)
    assert compiled.items[1] is snap.items[1]
