"""Redaction patterns under RE2: linear work on hostile text, for built-ins and tenants' alike.

Work is measured, not timed: the meter counts the bytes of every window given to RE2, whose search
is linear in its window, so the count bounds the engine's work.
"""

from __future__ import annotations

import re

import pytest

from app.domain.compilers.patterns import (
    BASE_COST,
    BUILTIN_PATTERNS,
    COST_PER_BYTE,
    PATTERN_BYTE_COST,
    TEXT_COST,
    Budget,
    Meter,
    Pattern,
    TooCostly,
    alone,
    builtins,
    custom,
    secrets,
)
from app.domain.compilers.registry import build
from app.domain.compilers.spec import parse_spec
from app.domain.errors import InvalidInput
from tests.unit.compiler_builders import items, snapshot, texts, user

SIZE = 256 * 1024
# The Python `re` patterns these replace (backtracking; bearer_token had a lookahead).
BEFORE = {
    **BUILTIN_PATTERNS,
    "private_key": BUILTIN_PATTERNS["private_key"].replace(r"\z", r"\Z"),
    "bearer_token": r"(?i)\bbearer\s+(?P<secret>(?=[\w.~+/=-]*\d)[\w.~+/=-]{12,})",
}


def fill(unit: str, size: int = SIZE) -> str:
    return (unit * (size // len(unit) + 1))[:size]


# Texts built to make a backtracking engine, or a search restarted after every match, work hard:
# near-misses of each built-in repeated, long runs a pattern's loop can eat, dense real matches.
HOSTILE = {
    "dotted": fill("a."),  # issue 19: quadratic connection_password under `re`
    "scheme": fill("a://"),
    "colons": "a://u" + fill(":"),
    "passwords": fill("a://:x@"),
    "letters": "a" * SIZE,
    "sk": fill("sk-"),
    "keys": fill("sk-" + "A" * 20 + " "),
    "bearers": fill("bearer 1,"),
    "bearer space": "bearer" + " " * SIZE,
    "begins": fill("-----BEGIN PRIVATE KEY-----"),
    "blocks": fill("-----BEGIN RSA PRIVATE KEY-----\nab\n-----END RSA PRIVATE KEY-----\n"),
    "aws": fill("aws_secret_access_key = "),
    "aws space": "aws_secret_access_key" + " " * SIZE,
    "akia": fill("AKIA"),
    "gh": fill("ghp_"),
    "words": fill("ab "),
    "accents": fill("é."),
}


def reference(pattern: Pattern, data: bytes) -> list[tuple[int, int]]:
    """What a plain RE2 search restarted after each match finds (no windows, no meter)."""
    found = []
    for match in pattern.regex.finditer(data):
        start, end = match.span(pattern.secret)
        if start < 0:
            start, end = match.span()
        if pattern.keeps(data, start, end):
            found.append((start, end))
    return found


@pytest.mark.timeout(120)
@pytest.mark.parametrize("name", HOSTILE)
def test_every_builtin_does_linear_work_on_hostile_text_and_finds_what_re2_finds(
    name: str,
) -> None:
    data = HOSTILE[name].encode()
    budget = Budget(builtins())  # one compile's: all of them over the text, never refused
    budget.text(len(data))
    for pattern in builtins():
        before = budget.spent
        found = list(secrets(pattern, data, Meter(pattern, budget)))
        # The windows never cut a match short: the built-ins' lookahead claims hold.
        assert found == reference(pattern, data), pattern.name
        work = (budget.spent - before) / len(data)
        assert work <= 16, (pattern.name, work)
    assert budget.spent <= 4 * len(builtins()) * len(data), budget.spent / len(data)


@pytest.mark.timeout(60)
def test_a_256_kb_hostile_message_is_redacted_with_every_builtin() -> None:
    """Issue 19: `a.a.a.…` took 41-51 s under the backtracking connection_password pattern."""
    for text in (HOSTILE["dotted"], HOSTILE["passwords"], HOSTILE["bearers"]):
        compiled = build(parse_spec({"base": "all_sections", "decorators": ["redact"]}))(
            snapshot(items(user(text)))
        )
        assert len(texts(compiled)) == 1


SAMPLES = [
    "key sk-proj-AbCdEfGhIjKlMnOpQrStUv12 ok, and sk-ant-api03-AbCdEfGhIjKlMnOpQrStUv",
    "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.x; bearer 12345678901 short; BEARER "
    "tok_abcdefghij9",
    "id AKIAIOSFODNN7EXAMPLE here, not AKIAIOSFODNN7EXAMPLEX",
    'aws_secret_access_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" AWS_SECRET_ACCESS_KEY:'
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    "token ghp_" + "a1" * 18 + " pat github_pat_" + "B_" * 15,
    "db postgres://app:s3cr3t@db:5432/x cache redis://:hunter2@cache https://x.io/a:b@c",
    "k -----BEGIN RSA PRIVATE KEY-----\nMIIE\nabc\n-----END RSA PRIVATE KEY----- done "
    "-----BEGIN ENCRYPTED PRIVATE KEY-----\ntruncated",
    "the task-runner is fine, the bearer settlement, sk-short, https://example.com/p",
]


@pytest.mark.parametrize("pattern", builtins(), ids=lambda p: p.name)
def test_the_builtins_find_what_the_backtracking_patterns_found(pattern: Pattern) -> None:
    before = re.compile(BEFORE[pattern.name])
    for text in SAMPLES:
        data = text.encode()
        assert text.isascii()  # byte and character offsets agree
        expected = [
            m.span("secret") if "secret" in before.groupindex else m.span()
            for m in before.finditer(text)
        ]
        assert list(secrets(pattern, data, alone(pattern, data))) == expected, text


@pytest.mark.timeout(60)
@pytest.mark.parametrize("size", [24, SIZE])
def test_a_nested_quantifier_runs_in_linear_time(size: int) -> None:
    """Issue 11: `(a+)+$` over 24 characters took 0.77 s under `re`, doubling per character."""
    text = "a" * size + "!"
    out = build(
        parse_spec(
            {
                "base": "all_sections",
                "decorators": [{"name": "redact", "params": {"patterns": ["(a+)+$", "(x+x+)+y"]}}],
            }
        )
    )(snapshot(items(user(text))))
    assert texts(out) == [text]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("a*b|a", "a" * SIZE),  # each match waits on the whole rest of the text
        ("(?s).*x|y", "y" * SIZE),
        ("a", "ab" * (SIZE // 2)),  # a match every other byte
    ],
)
def test_a_pattern_that_would_work_too_hard_is_refused_naming_it(pattern: str, text: str) -> None:
    spec = {
        "base": "all_sections",
        "decorators": [
            {"name": "window", "params": {"messages": 5}},
            {"name": "redact", "params": {"patterns": ["sk-x", pattern]}},
        ],
    }
    compiler = build(parse_spec(spec))
    with pytest.raises(InvalidInput) as caught:
        compiler(snapshot(items(user(text))))
    [(path, message)] = caught.value.problems
    assert path == ("compiler", "decorators", 1, "params", "patterns", 1)
    assert repr(pattern) in message and "narrow it" in message


def test_the_meter_stops_a_pattern_at_its_budget() -> None:
    pattern = custom("a*b|a", 0)
    data = b"a" * 10_000
    meter = alone(pattern, data)
    limit = (COST_PER_BYTE + PATTERN_BYTE_COST) * len(data) + TEXT_COST + BASE_COST
    with pytest.raises(TooCostly):
        list(secrets(pattern, data, meter))
    assert limit < meter.budget.spent <= limit + 2 * len(data)


def test_a_tenant_pattern_finds_matches_as_re2_does_when_they_decide_early() -> None:
    pattern = custom(r"\b\d{3}-\d{4}\b|[A-Z]{3}-\d+", 0)
    text = "call 555-0100, ticket ABC-12345 or 555-01000 " * 200
    data = text.encode()
    assert list(secrets(pattern, data, alone(pattern, data))) == reference(pattern, data)


@pytest.mark.parametrize(
    ("params", "path", "why"),
    [
        ({"patterns": ["a"] * 33}, ("patterns",), "at most 32 items"),
        ({"patterns": ["ok", "a" * 1001]}, ("patterns", 1), "at most 1000 characters"),
        ({"replacement": "x" * 65}, ("replacement",), "at most 64 characters"),
    ],
)
def test_the_size_of_what_a_tenant_may_ask_for_is_bounded(
    params: dict[str, object], path: tuple[str | int, ...], why: str
) -> None:
    with pytest.raises(InvalidInput) as caught:
        build(parse_spec({"decorators": [{"name": "redact", "params": params}]}))
    [(where, message)] = caught.value.problems
    assert where == ("compiler", "decorators", 0, "params", *path)
    assert why in message


@pytest.mark.parametrize(
    "pattern",
    [*builtins(), custom(r"token=\S+", 0), custom(r"(?P<secret>[^\s,]+)@host", 0)],
    ids=lambda p: p.name if p.index is None else p.regex.pattern,
)
def test_a_window_that_cuts_a_character_never_cuts_a_match(pattern: Pattern) -> None:
    """Windows are bytes: wherever one ends inside a multi-byte character, the match found is
    the one RE2 finds over the whole text."""
    for filler in ("é", "😀", "日本", "é😀"):
        for offset in range(0, 260, 3):
            secret = filler * 30
            text = (
                f"{'x' * offset} postgres://u:{secret}@host token={secret}, Bearer 1{secret}"
                f" -----BEGIN PRIVATE KEY-----{secret}"
            )
            data = text.encode()
            found = list(secrets(pattern, data, alone(pattern, data)))
            assert found == reference(pattern, data), (filler, offset)
