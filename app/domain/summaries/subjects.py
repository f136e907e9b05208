"""What a ledger entry is about: its subject (its text with the values masked, the identifiers
that name the thing kept) and its state slot.

Two entries with the same subject say the same thing of the same thing, up to its values: the
later one replaces the earlier ("Budget cap is $400" by "Budget cap is $850"). A state slot is a
piece of session state people restate in other words (a spending limit and what it governs, a
date and what happens on it, a name for the work, the branch, the clock reports use, who holds a
duty, the answer style, an access code): a later entry for the same slot and scope replaces the
earlier one whatever its wording ("From now on, report times in Pacific" replaces "Report all
times in UTC"), while distinct scopes (a project's budget and a conference's) stay apart.

Everything here reads words and tokens split on whitespace or letters: linear, no backtracking.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise


def _lexicon(text: str) -> frozenset[str]:
    return frozenset(text.split())


MONTHS = _lexicon(
    "january february march april may june july august september october november december"
)
ACKS = _lexicon("acknowledged noted done ok okay thanks thank sure recorded continuing got")
_WORD = re.compile(r"[a-z0-9]+")
MONEY_WORDS = _lexicon("dollars dollar euros euro usd eur gbp pounds")
SCOPES = (
    "project",
    "trip",
    "travel",
    "conference",
    "team",
    "marketing",
    "hardware",
    "cloud",
    "event",
    "launch",
    "release",
    "documentation",
    "docs",
    "beta",
    "milestone",
    "production",
    "staging",
)
ROLES = (
    ("on-call", "oncall"),
    ("oncall", "oncall"),
    ("pager", "oncall"),
    ("support", "support"),
    ("approver", "approver"),
    ("reviewer", "reviewer"),
    ("owner", "owner"),
)
BUDGET = _lexicon("budget spend spending expenses expense costs cost ceiling cap")
DATES = _lexicon("deadline launch release ship ships shipping freeze due")
NAMES = _lexicon("codename codenamed designated label calling called renamed")
BRANCHES = _lexicon("branch rebased checkout")
CLOCKS = _lexicon("timezone utc pacific eastern gmt clock clocks timestamp timestamps")
STYLES = _lexicon("answers replies responses tone")
CODES = ("vault", "access")
COPULAS = _lexicon(
    "is are was were be becomes became = == -> => equals listens runs uses holds points lives "
    "moved changed stays remains means costs"
)


def words(text: str) -> list[str]:
    """The lowercase words and numbers of ``text``."""
    return _WORD.findall(text.lower())


def is_value(token: str) -> bool:
    """A token that carries a value: a number of three digits or more, money, a date, a code
    (letters with digits), a URL, a hash."""
    core = _core(token)
    if not core:
        return False
    if core[0] in "$€£" or "://" in core:
        return True
    digits = sum(c.isdigit() for c in core)
    whole = core.replace(",", "").split(".")[0]
    return bool(digits) and (len(whole) >= 3 or any(c.isalpha() for c in core) or "-" in core)


def is_reference(token: str) -> bool:
    """A token naming a file or an identifier (a path, ``snake_case``) rather than a value."""
    core = _core(token)
    return any(c in core for c in "/_") and not is_value(token)


def _core(token: str) -> str:
    return token.strip(".,;:!?()[]{}\"'`")


def names_in(tokens: Sequence[str]) -> int:
    """How many pairs of adjacent capitalised words (a person's or a product's name)."""
    found = 0
    for first, second in pairwise(tokens):
        if _title(first) and _title(second.rstrip(".,;:!?")):
            found += 1
    return found


def _title(token: str) -> bool:
    return len(token) > 1 and token[0].isupper() and token[1:].isalpha() and token[1:].islower()


def subject_of(text: str) -> str:
    """``text`` lowercased, punctuation left out, with its values masked: what names the thing
    (the words before its verb, ``COPULAS``) keeps its identifiers and codes ("svc-1 listens on
    port 8001" and "svc-2 listens on port 8002" are two subjects) and loses only plain numbers,
    money and dates; after the verb every value, number and name is masked ("Budget cap is $400"
    and "Budget cap is $700" are one)."""
    tokens = text.split()
    verb = next((n for n, t in enumerate(tokens) if _is_copula(t)), -1)
    out: list[str] = []
    for n, token in enumerate(tokens):
        if n < verb and not _plain_value(token):
            out += words(token)
            continue
        if n == verb and token.endswith(":"):
            out += words(token)
            continue
        start = n == 0 or tokens[n - 1].endswith((".", ":", ";", "!", "?"))
        named = not start and _title(token.rstrip(".,;:!?)"))
        if any(c.isdigit() for c in token) or is_value(token) or is_reference(token) or named:
            if not out or out[-1] != "#":
                out.append("#")
            continue
        out += words(token)
    return " ".join(out)


def _is_copula(token: str) -> bool:
    """The word that ends what a statement is about: a verb of ``COPULAS``, ``=``, or a word
    ending in a colon."""
    core = token.lower().strip(".,;!?()\"'`")
    return core in COPULAS or (len(core) > 1 and core.endswith(":"))


def _plain_value(token: str) -> bool:
    """A number, an amount of money or a date: a value even where it names nothing."""
    core = _core(token)
    if not core:
        return False
    if core[0] in "$€£":
        return True
    parts = core.replace(",", "").replace(".", "-").replace("/", "-").split("-")
    return all(p.isdigit() for p in parts)


def has_date(text: str, tokens: Sequence[str]) -> bool:
    """A date: ISO (2027-03-14), month and day (03-14), or a month's name before a number."""
    lower = [t.lower().strip(".,;:()") for t in tokens]
    for n, token in enumerate(lower):
        parts = token.split("-")
        if len(parts) in (2, 3) and all(p.isdigit() for p in parts) and len(parts[-1]) <= 2:
            return True
        if token in MONTHS and n + 1 < len(lower) and lower[n + 1][:2].isdigit():
            return True
    return False


def slot_of(text: str) -> str | None:
    """The state slot ``text`` sets (``name:scope``), or None."""
    tokens = text.split()
    lower = words(text)
    found = set(lower)
    valued = any(is_value(t) for t in tokens)
    for first, second in pairwise(lower):
        if second == "code" and first in CODES:
            return f"code:{first}"
    if found & BUDGET and ((valued and "$" in text) or found & MONEY_WORDS):
        return f"budget:{_scope(lower)}"
    if found & NAMES and valued:
        return "name"
    if found & DATES and has_date(text, tokens):
        return f"date:{_scope(lower)}"
    if found & BRANCHES and valued:
        return "branch"
    if found & CLOCKS:
        return "clock"
    role = next((r for cue, r in ROLES if cue in text.lower()), None)
    if role is not None and names_in(tokens):
        return f"duty:{role}"
    if found & STYLES:
        return "style"
    return None


def _scope(lower: Sequence[str]) -> str:
    return next((w for w in lower if w in SCOPES), "")


def low_information(text: str) -> bool:
    """An acknowledgement or filler with nothing to keep ("Acknowledged.", "Done.")."""
    lower = words(text)
    if not lower or len(lower) > 8 or lower[0] not in ACKS:
        return not lower
    return not any(is_value(t) for t in text.split())
