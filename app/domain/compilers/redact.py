"""``redact``: hide secrets in the compiled view; the stored messages are never touched.

Patterns apply to text parts, tool call arguments (a raw string, or every string value of the
JSON object), tool result text and reasoning text. When a pattern has a group named ``secret``
only that group is replaced (``Bearer [REDACTED]``, ``postgres://app:[REDACTED]@db``); otherwise
the whole match is. Image data and opaque provider blocks are left as they are.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from functools import partial
from typing import Any

from app.domain.compilers.base import Compiled, Compiler, Item, Snapshot
from app.domain.errors import InvalidInput
from app.domain.messages import (
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    provider_meta,
    with_provider_meta,
)

BUILTIN_PATTERNS: dict[str, str] = {
    "private_key": (
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)"  # a truncated block: up to the end
    ),
    "api_key": r"\bsk-(?:ant-)?[A-Za-z0-9_-]{20,}",  # OpenAI sk-..., sk-proj-...; Anthropic
    # A token has a digit somewhere: "the bearer settlement" is prose, not a credential.
    "bearer_token": r"(?i)\bbearer\s+(?P<secret>(?=[\w.~+/=-]*\d)[\w.~+/=-]{12,})",
    "aws_access_key_id": r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b",
    "aws_secret_access_key": (
        r"(?i)aws_?secret_?access_?key[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+=]{40})"
    ),
    "github_token": r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
    "connection_password": r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s:/@]*:(?P<secret>[^\s@/]+)@",
}


def compile_patterns(custom: Sequence[str], builtin: bool) -> list[tuple[str, re.Pattern[str]]]:
    """The patterns to apply, named; an invalid custom regex is an error naming it."""
    named = [(name, re.compile(p)) for name, p in BUILTIN_PATTERNS.items()] if builtin else []
    problems: list[tuple[Sequence[str | int], str]] = []
    for n, pattern in enumerate(custom):
        try:
            named.append(("custom", re.compile(pattern)))
        except re.error as err:
            problems.append((("patterns", n), f"invalid regular expression {pattern!r}: {err}"))
    if problems:
        raise InvalidInput(problems)
    return named


def _changed(part: Part, field: str, old: Any, new: Any) -> Part:
    return part if new == old else part.model_copy(update={field: new})


class _Redaction:
    """One compile's redaction pass; it counts what it replaced."""

    def __init__(self, patterns: list[tuple[str, re.Pattern[str]]], replacement: str) -> None:
        self.patterns = patterns
        self.replacement = replacement
        self.counts: Counter[str] = Counter()

    def text(self, text: str) -> str:
        for name, pattern in self.patterns:
            text = pattern.sub(partial(self._replace, name=name), text)
        return text

    def _replace(self, match: re.Match[str], name: str) -> str:
        if not match.group(0):  # a custom pattern that matches the empty string
            return ""
        self.counts[name] += 1
        if match.re.groupindex.get("secret") and match.group("secret") is not None:
            start, end = match.span("secret")
            head, tail = match.string[match.start() : start], match.string[end : match.end()]
            return head + self.replacement + tail
        return self.replacement

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, dict):
            return {k: self.value(v) for k, v in value.items()}
        return value

    def part(self, part: Part) -> Part:
        """The part with its text redacted (the same object when nothing matched)."""
        if isinstance(part, TextPart):
            return _changed(part, "text", part.text, self.text(part.text))
        if isinstance(part, ReasoningPart) and part.text is not None:
            return _changed(part, "text", part.text, self.text(part.text))
        if isinstance(part, ToolResultPart):
            return _changed(part, "content", part.content, self._result(part.content))
        if isinstance(part, ToolCallPart):
            return self._call(part)
        return part

    def _result(self, content: Any) -> Any:
        if isinstance(content, str):
            return self.text(content)
        return tuple(self.part(i) if isinstance(i, TextPart) else i for i in content)

    def _call(self, part: ToolCallPart) -> ToolCallPart:
        arguments = self.value(part.arguments)
        if arguments == part.arguments:
            return part
        # The recorded OpenAI arguments string would still hold the secret: drop it.
        hint = {k: v for k, v in provider_meta(part.metadata, "openai").items() if k != "arguments"}
        metadata = with_provider_meta(part.metadata, "openai", hint)
        return part.model_copy(update={"arguments": arguments, "metadata": metadata})

    def item(self, item: Item, snapshot: Snapshot) -> Item:
        """The item with its message redacted and recounted (the same item when unchanged)."""
        content = tuple(self.part(p) for p in item.message.content)
        if all(new is old for new, old in zip(content, item.message.content, strict=True)):
            return item
        message = item.message.model_copy(update={"content": content})
        return Item(item.seq, item.section, message, snapshot.count(message))

    def warnings(self) -> list[str]:
        if not self.counts:
            return []
        detail = ", ".join(f"{name}: {n}" for name, n in sorted(self.counts.items()))
        return [f"redact: {self.counts.total()} replacements ({detail})"]


def redact(
    inner: Compiler,
    patterns: Sequence[str] = (),
    builtin: bool = True,
    replacement: str = "[REDACTED]",
) -> Compiler:
    """Replace secrets (built-in patterns and ``patterns``) in the view with ``replacement``."""
    compiled_patterns = compile_patterns(patterns, builtin)

    def compile_redact(snapshot: Snapshot) -> Compiled:
        compiled = inner(snapshot)
        redaction = _Redaction(compiled_patterns, replacement)
        items = [redaction.item(item, snapshot) for item in compiled.items]
        return compiled.then(items, warnings=redaction.warnings())

    return compile_redact
