"""``redact``: hide secrets in the compiled view; the stored messages are never touched.

Patterns apply to text parts, tool call arguments (a raw string, or every string value of the
JSON object), tool result text and reasoning text. When a pattern has a group named ``secret``
only that group is replaced (``Bearer [REDACTED]``, ``postgres://app:[REDACTED]@db``); otherwise
the whole match is. Every pattern looks at the text as it was: secrets found by several patterns,
overlapping or touching, are replaced once. Image data and opaque provider blocks are left as
they are. Patterns are RE2 (see ``patterns``): one budget, linear in the text and the number of
patterns, and a deadline bound the work of the whole compile's redaction.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Annotated, Any

from pydantic import Field

from app.domain.compilers.base import Compiled, Compiler, Item, Snapshot
from app.domain.compilers.patterns import (
    BUILTIN_PATTERNS,
    MAX_PATTERN_CHARS,
    MAX_PATTERNS,
    Budget,
    Meter,
    Pattern,
    PatternErrors,
    TooCostly,
    compile_all,
    secrets,
)
from app.domain.compilers.replacements import Replaced, replacements_warning
from app.domain.errors import InvalidInput, InvalidParams
from app.domain.messages import (
    Part,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    provider_meta,
    with_provider_meta,
)

__all__ = ["BUILTIN_PATTERNS", "compile_patterns", "redact"]
MAX_REPLACEMENT = 64


def compile_patterns(custom: Sequence[str], builtin: bool) -> list[Pattern]:
    """The patterns to apply; a refused custom pattern is an error naming it."""
    try:
        return compile_all(custom, builtin)
    except PatternErrors as err:
        raise InvalidInput([(("patterns", n), message) for n, message in err.problems]) from None


def _changed(part: Part, field: str, old: Any, new: Any) -> Part:
    return part if new == old else part.model_copy(update={field: new})


class _Redaction:
    """One compile's redaction pass; it counts what it replaced."""

    def __init__(self, patterns: list[Pattern], replacement: str) -> None:
        self.patterns = patterns
        self.replacement = replacement.encode()
        self.counts: Counter[tuple[int, str]] = Counter()  # by seq and pattern
        self.budget = Budget(patterns)
        self._seq = 0  # of the item being redacted

    def text(self, text: str) -> str:
        if not text or not self.patterns:
            return text
        data = text.encode()
        self.budget.text(len(data))
        found = sorted(
            (start, n, end)
            for n, pattern in enumerate(self.patterns)
            for start, end in self._secrets(pattern, data)
        )
        if not found:
            return text
        pieces: list[bytes] = []
        last = 0
        for start, n, end in found:
            if start <= last and pieces:  # overlapping or touching the one before: one secret
                last = max(last, end)
                continue
            pieces += (data[last:start], self.replacement)
            last = end
            self.counts[self._seq, self.patterns[n].name] += 1
        pieces.append(data[last:])
        return b"".join(pieces).decode()

    def _secrets(self, pattern: Pattern, data: bytes) -> list[tuple[int, int]]:
        try:
            return list(secrets(pattern, data, Meter(pattern, self.budget)))
        except TooCostly as err:
            culprit = err.pattern
            where = ("builtin",) if culprit.index is None else ("patterns", culprit.index)
            raise InvalidParams([(where, str(err))]) from None

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
            return self._reasoning(part)
        if isinstance(part, ToolResultPart):
            return _changed(part, "content", part.content, self._result(part.content))
        if isinstance(part, ToolCallPart):
            return self._call(part)
        return part

    def _result(self, content: Any) -> Any:
        if isinstance(content, str):
            return self.text(content)
        return tuple(self.part(i) if isinstance(i, TextPart) else i for i in content)

    def _reasoning(self, part: ReasoningPart) -> Part:
        changed = _changed(part, "text", part.text, self.text(part.text or ""))
        item = provider_meta(part.metadata, "responses").get("item")
        if changed is part or not isinstance(item, dict):
            return changed
        # A Responses reasoning item goes out verbatim: its summaries would still hold it.
        item = {**item, "summary": self.value(item.get("summary"))}
        return changed.model_copy(
            update={"metadata": {**part.metadata, "responses": {"item": item}}}
        )

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
        self._seq = item.seq
        content = tuple(self.part(p) for p in item.message.content)
        if all(new is old for new, old in zip(content, item.message.content, strict=True)):
            return item
        message = item.message.model_copy(update={"content": content})
        return Item(item.seq, item.section, message, snapshot.count(message))

    def done(self, compiled: Compiled, items: list[Item]) -> Compiled:
        """``compiled`` with the redacted ``items``, the warning and what it counts."""
        by_name: Counter[str] = Counter()
        for (_, name), n in self.counts.items():
            by_name[name] += n
        warning = replacements_warning(by_name)
        if warning is None:
            return compiled.then(items)
        found = tuple((seq, name, n) for (seq, name), n in sorted(self.counts.items()))
        done = compiled.then(items, warnings=[warning])
        return replace(done, replaced=(*done.replaced, Replaced(len(compiled.warnings), found)))


def redact(
    inner: Compiler,
    patterns: Annotated[
        Sequence[Annotated[str, Field(min_length=1, max_length=MAX_PATTERN_CHARS)]],
        Field(max_length=MAX_PATTERNS),
    ] = (),
    builtin: bool = True,
    replacement: Annotated[str, Field(max_length=MAX_REPLACEMENT)] = "[REDACTED]",
) -> Compiler:
    """Replace secrets (built-in patterns and ``patterns``) in the view with ``replacement``."""
    compiled_patterns = compile_patterns(patterns, builtin)

    def compile_redact(snapshot: Snapshot) -> Compiled:
        compiled = inner(snapshot)
        redaction = _Redaction(compiled_patterns, replacement)
        items = [redaction.item(item, snapshot) for item in compiled.items]
        return redaction.done(compiled, items)

    return compile_redact
