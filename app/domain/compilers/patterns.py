"""Secret patterns for ``redact``, matched by RE2 with a compile's work bounded and linear.

RE2 runs a regular expression in time linear in the text it searches (no backtracking; it refuses
backreferences and lookaround). That bounds one search, not finding every match: each search
starts where the last match ended, and a pattern whose preferred alternative needs text far past a
shorter match (``a*b|a`` over ``aaaa…``) reads the rest of the text for every ``a`` it finds,
which is quadratic.

So every search here is given a window: it may read at most ``lookahead`` bytes past the end
of the match it reports (a built-in pattern's proven lookahead, or ``CUSTOM_LOOKAHEAD`` for a
tenant's), and the window, from ``lookahead`` + 32 bytes, doubles while the match may not be
final yet. A match is final once the engine has read ``lookahead`` bytes past its end (the engine
reads nothing past the point where no better match can come, so for a pattern whose lookahead is
true the answers are RE2's own).

The work is metered, and one budget covers a whole compile's redaction (every text, every
pattern): each search costs the bytes of its window plus ``CALL_COST``; each text brings
``COST_PER_BYTE`` plus ``PATTERN_BYTE_COST`` per pattern times its size, and ``TEXT_COST`` per
pattern; each pattern brings ``BASE_COST``. Scanning a text without a match costs a pattern
about two bytes per byte; the shared allowance pays for matches, wherever they are.
With window doubling a search costs at most about four times (its distance to the match end +
lookahead), so the built-ins stay far below (tests check it on adversarial texts); when the
budget is spent, or the redaction has run ``DEADLINE_SECONDS``, it stops (``TooCostly``, naming
the pattern that spent the most) rather than run on.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache

import re2

from app.domain.errors import DomainError

CUSTOM_LOOKAHEAD = 128  # bytes a tenant's match may wait on past its end
# One compile's budget, all texts and patterns drawing on it together: COST_PER_BYTE and
# PATTERN_BYTE_COST per pattern a byte of text, TEXT_COST per pattern a text (its first engine
# call), BASE_COST per pattern.
COST_PER_BYTE = 64
PATTERN_BYTE_COST = 4
TEXT_COST = 256
BASE_COST = 4096
CALL_COST = 64  # an engine call's fixed cost (the Python around it), in bytes of window
DEADLINE_SECONDS = 5.0  # a compile's redaction stops after this long, whatever is left
MAX_PROGRAM = 2000  # RE2 program size (instructions) of a tenant's pattern
MAX_PATTERN_CHARS = 1000
MAX_PATTERNS = 32
_PROBES = ("", "a-b 0\n")  # a pattern that matches the empty string in these matches it anywhere


def _options(capture: bool) -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    options.never_capture = not capture
    options.max_mem = 8 << 20
    return options


@dataclass(frozen=True)
class Pattern:
    """One secret pattern: RE2-compiled, with how far past a match its engine may read."""

    name: str  # a built-in's name, or "custom"
    regex: re2._Regexp[str]
    lookahead: int
    index: int | None = None  # its place in the tenant's ``patterns``
    digit: bool = False  # a secret without a digit is no match (for what RE2 cannot say)
    secret: int = field(init=False, default=0)  # the group holding it (0: the whole match)

    def __post_init__(self) -> None:
        object.__setattr__(self, "secret", self.regex.groupindex.get("secret", 0))

    def keeps(self, data: bytes, start: int, end: int) -> bool:
        """Whether ``data[start:end]``, found by the engine, is a secret."""
        return end > start and (not self.digit or _DIGIT.search(data, start, end) is not None)


_DIGIT = re.compile(rb"[0-9]")


class TooCostly(DomainError):
    """A compile's redaction spent its budget of work or time; ``pattern`` spent the most."""

    def __init__(self, pattern: Pattern, message: str) -> None:
        super().__init__(message)
        self.pattern = pattern


# Each built-in with its lookahead: how many bytes past the end of a match RE2 may read before it
# is final. Every one ends in a greedy character class (the next character outside it ends the
# match), a fixed-length run or a closing literal, and none has an alternative that could outbid
# a match found: so one character, at most 4 bytes of UTF-8.
_BUILTINS: dict[str, tuple[str, int, bool]] = {
    "private_key": (  # a truncated block: up to the end of the text
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\z)",
        4,
        False,
    ),
    "api_key": (r"\bsk-(?:ant-)?[A-Za-z0-9_-]{20,}", 4, False),  # OpenAI sk-..., Anthropic
    # 12 characters at least, one a digit (checked in Python: RE2 has no lookahead), so
    # "the bearer settlement" is prose, not a credential; shorter runs never leave RE2.
    "bearer_token": (r"(?i)\bbearer\s+(?P<secret>[\w.~+/=-]{12,})", 4, True),
    "aws_access_key_id": (r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b", 4, False),
    "aws_secret_access_key": (
        r"(?i)aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+=]{40})",
        4,
        False,
    ),
    "github_token": (r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})", 4, False),
    "connection_password": (
        r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:(?P<secret>[^\s@/]+)@",
        4,
        False,
    ),
}
BUILTIN_PATTERNS: dict[str, str] = {name: p for name, (p, _, _) in _BUILTINS.items()}


@cache
def builtins() -> tuple[Pattern, ...]:
    """The built-in patterns, compiled once."""
    return tuple(
        Pattern(name, re2.compile(text, _options("(?P<secret>" in text)), lookahead, None, digit)
        for name, (text, lookahead, digit) in _BUILTINS.items()
    )


def _error(err: re2.error) -> str:
    raw = err.args[0] if err.args else ""
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)


def _unescaped(pattern: str, letter: str) -> bool:
    escaped = False
    for char in pattern:
        if escaped and char == letter:
            return True
        escaped = not escaped and char == "\\"
    return False


def custom(pattern: str, index: int) -> Pattern:
    """A tenant's pattern, compiled; ValueError says why it is refused."""
    if _unescaped(pattern, "C"):
        raise ValueError(f"{pattern!r}: \\C (one byte) could split a character")
    try:
        regex = re2.compile(pattern, _options("(?P<secret>" in pattern or "(?<secret>" in pattern))
    except re2.error as err:
        raise ValueError(f"{pattern!r} is not an RE2 regular expression: {_error(err)}") from None
    if regex.programsize > MAX_PROGRAM:
        raise ValueError(
            f"{pattern!r} is too complex: {regex.programsize} RE2 instructions, at most"
            f" {MAX_PROGRAM}"
        )
    if any(m.end() == m.start() for probe in _PROBES for m in regex.finditer(probe)):
        raise ValueError(f"{pattern!r} matches the empty string: it would match everywhere")
    return Pattern("custom", regex, CUSTOM_LOOKAHEAD, index)


def compile_all(patterns: Sequence[str], builtin: bool) -> list[Pattern]:
    """The patterns to apply, built-ins first; ValueError names each refused custom one."""
    found = list(builtins()) if builtin else []
    problems: list[tuple[int, str]] = []
    for n, text in enumerate(patterns):
        try:
            found.append(custom(text, n))
        except ValueError as err:
            problems.append((n, str(err)))
    if problems:
        raise PatternErrors(problems)
    return found


class PatternErrors(ValueError):
    """Refused custom patterns, by their place in ``patterns``."""

    def __init__(self, problems: Sequence[tuple[int, str]]) -> None:
        super().__init__("; ".join(m for _, m in problems))
        self.problems = tuple(problems)


class Budget:
    """The work and time one compile's redaction may spend, every text and pattern together."""

    def __init__(self, patterns: Sequence[Pattern], seconds: float = DEADLINE_SECONDS) -> None:
        self.patterns = len(patterns)
        self.allowed = BASE_COST * self.patterns
        self.spent = 0
        self.size = 0  # bytes of text so far
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.by_pattern: Counter[tuple[str, int | None]] = Counter()
        self.spenders: dict[tuple[str, int | None], Pattern] = {}

    def text(self, size: int) -> None:
        """A text of ``size`` bytes is about to be searched: its share joins the budget."""
        self.size += size
        per_byte = COST_PER_BYTE + PATTERN_BYTE_COST * self.patterns
        self.allowed += per_byte * size + TEXT_COST * self.patterns

    def charge(self, pattern: Pattern, cost: int) -> None:
        key = (pattern.name, pattern.index)
        self.spent += cost
        self.by_pattern[key] += cost
        self.spenders.setdefault(key, pattern)
        if self.spent > self.allowed:
            raise TooCostly(
                self._culprit(),
                self._why(
                    f"needs more than {self.spent:,} bytes of matching (the limit is"
                    f" {COST_PER_BYTE} + {PATTERN_BYTE_COST} per pattern a byte of text,"
                    f" {TEXT_COST} per text and pattern, {BASE_COST:,} per pattern:"
                    f" {self.allowed:,})"
                ),
            )
        if time.monotonic() > self.deadline:
            raise TooCostly(self._culprit(), self._why(f"took more than {self.seconds:g} s"))

    def _culprit(self) -> Pattern:
        return self.spenders[max(self.by_pattern, key=self.by_pattern.__getitem__)]

    def _why(self, what: str) -> str:
        culprit = self._culprit()
        share = self.by_pattern[(culprit.name, culprit.index)] * 100 // max(1, self.spent)
        if culprit.index is None:
            who, advice = (
                f"the built-in pattern {culprit.name}",
                "the text is dense with its matches",
            )
        else:
            who = f"the pattern {culprit.regex.pattern!r}"
            advice = "it matches too often or waits on too much text; narrow it"
        return (
            f"redaction {what} on {self.size:,} bytes of text with {self.patterns} patterns;"
            f" {who} did {share}% of the work: {advice}, or send less text"
        )


@dataclass
class Meter:
    """One pattern's work, charged to a compile's budget, in bytes of engine window."""

    pattern: Pattern
    budget: Budget

    def charge(self, window: int) -> None:
        self.budget.charge(self.pattern, window + CALL_COST)


def alone(pattern: Pattern, data: bytes) -> Meter:
    """A meter for ``pattern`` over ``data`` with a budget of its own (tests and benchmarks)."""
    budget = Budget([pattern])
    budget.text(len(data))
    return Meter(pattern, budget)


def _next_char(data: bytes, at: int) -> int:
    at += 1
    while at < len(data) and data[at] & 0xC0 == 0x80:  # a UTF-8 continuation byte
        at += 1
    return at


def _search(pattern: Pattern, data: bytes, at: int, meter: Meter) -> re2._Match[bytes] | None:
    """The first match at or after ``at``, read in windows that double until it is final."""
    size, n, look = pattern.lookahead + 32, len(data), pattern.lookahead
    while True:
        end = min(n, at + size)
        meter.charge(end - at)
        found = pattern.regex.search(data, at, end)
        if found is not None and (end == n or found.end() < end - look):
            return found
        if found is None and end == n:
            return None
        size *= 2


def secrets(pattern: Pattern, data: bytes, meter: Meter) -> Iterator[tuple[int, int]]:
    """The (start, end) of each secret ``pattern`` finds in ``data`` (UTF-8), in order: the
    ``secret`` group where it took part, else the whole match; empty matches are no secret."""
    at = 0
    while at <= len(data):
        found = _search(pattern, data, at, meter)
        if found is None:
            return
        start, end = found.span(pattern.secret)
        if start < 0:  # the secret group took no part
            start, end = found.span()
        if not pattern.keeps(data, start, end):
            at = _next_char(data, found.start())  # no secret here: on from the next character
            continue
        yield start, end
        at = found.end()
