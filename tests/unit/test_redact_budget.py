"""One budget of work and time for a compile's whole redaction; bearer tokens decided in RE2."""

from __future__ import annotations

import pytest

from app.domain.compilers.patterns import (
    BASE_COST,
    COST_PER_BYTE,
    PATTERN_BYTE_COST,
    TEXT_COST,
    Budget,
    Meter,
    Pattern,
    TooCostly,
    builtins,
    custom,
    secrets,
)
from app.domain.compilers.registry import build
from app.domain.compilers.spec import parse_spec
from app.domain.errors import InvalidInput
from tests.unit.compiler_builders import items, snapshot, user


def fill(unit: str, size: int) -> bytes:
    return (unit * (size // len(unit) + 1))[:size].encode()


def redact(patterns: list[str], *texts: str) -> None:
    spec = {
        "base": "all_sections",
        "decorators": [{"name": "redact", "params": {"patterns": patterns}}],
    }
    build(parse_spec(spec))(snapshot(items(*(user(t) for t in texts))))


def test_the_budget_grows_with_each_text_and_a_constant_per_pattern() -> None:
    patterns = [custom("a", 0), custom("b", 1), custom("c", 2)]
    budget = Budget(patterns)
    assert budget.allowed == 3 * BASE_COST
    budget.text(1000)
    budget.text(10)
    per_byte = COST_PER_BYTE + 3 * PATTERN_BYTE_COST
    assert budget.allowed == 3 * BASE_COST + per_byte * 1010 + 2 * 3 * TEXT_COST


def test_patterns_each_under_a_per_pattern_limit_are_refused_together() -> None:
    """Issue 19: 32 patterns each finding `a` every 8 bytes (28 units a byte, under the old
    per-pattern, per-text limit of 32) ran 32 times as long as one; now they share one budget."""
    text = fill("xxxxxxxa", 64_000).decode()
    redact(["a"], text)  # one such pattern fits
    with pytest.raises(InvalidInput) as caught:
        redact(["a"] * 32, text)
    [(path, message)] = caught.value.problems
    assert path[:-1] == ("compiler", "decorators", 0, "params", "patterns")
    assert "'a'" in message and "narrow it" in message


def test_the_budget_is_shared_by_every_text_of_the_compile() -> None:
    """Many texts, each within what one pattern may spend on it alone, together over the
    compile's budget (a per-text meter never saw them add up)."""
    text = fill("xxxxxxxa", 4000).decode()
    with pytest.raises(InvalidInput):
        redact(["a"] * 32, *[text] * 40)


def test_the_pattern_that_spent_the_most_is_named() -> None:
    quiet, busy = custom("q", 0), custom("a", 1)
    budget = Budget([quiet, busy])
    data = fill("a", 10_000)
    budget.text(len(data))
    list(secrets(quiet, data, Meter(quiet, budget)))
    with pytest.raises(TooCostly) as caught:
        list(secrets(busy, data, Meter(busy, budget)))
    assert caught.value.pattern is busy
    assert "'a' did 9" in str(caught.value)  # 9x% of the work


def test_the_deadline_stops_a_redaction_within_its_budget() -> None:
    """Dense real secrets: within the work budget, but the clock runs out first."""
    password = next(p for p in builtins() if p.name == "connection_password")
    data = fill("a://:x@", 1 << 20)
    budget = Budget(builtins(), seconds=0.05)
    budget.text(len(data))
    with pytest.raises(TooCostly) as caught:
        list(secrets(password, data, Meter(password, budget)))
    assert caught.value.pattern is password
    message = str(caught.value)
    assert "took more than 0.05 s" in message and "built-in pattern connection_password" in message
    assert budget.spent < budget.allowed


class Calls(Meter):
    """A meter that counts the engine calls (each a return to Python)."""

    calls = 0

    def charge(self, window: int) -> None:
        self.calls += 1
        super().charge(window)


BEARER: Pattern = next(p for p in builtins() if p.name == "bearer_token")


@pytest.mark.parametrize("unit", ["bearer 1 ", "Bearer abcdefghij1 ", "bearer x,"])
def test_short_bearer_near_misses_never_come_back_to_python(unit: str) -> None:
    """Issue 19: each `bearer 1 ` (shorter than 12) was a match RE2 handed back to Python."""
    data = fill(unit, 1 << 20)
    budget = Budget([BEARER])
    budget.text(len(data))
    meter = Calls(BEARER, budget)
    assert list(secrets(BEARER, data, meter)) == []
    assert meter.calls < 64  # the doubling windows over 1 MiB, no call per near-miss


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer abc123def456ghi", "abc123def456ghi"),
        ("bearer 123456789012", "123456789012"),
        ("bearer 12345678901 short", None),  # 11 characters
        ("the bearer settlement agreement was signed", None),  # no digit
        ("bearer abcdefghijklmnop bearer x9yz.abcdefgh", "x9yz.abcdefgh"),
    ],
)
def test_a_bearer_token_has_12_characters_and_a_digit(text: str, secret: str | None) -> None:
    data = text.encode()
    budget = Budget([BEARER])
    budget.text(len(data))
    found = [data[s:e].decode() for s, e in secrets(BEARER, data, Meter(BEARER, budget))]
    assert found == ([] if secret is None else [secret])
