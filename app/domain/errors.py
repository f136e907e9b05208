"""Domain errors. They know nothing of HTTP; the API layer maps them to problem details."""

from __future__ import annotations

from collections.abc import Sequence

Path = tuple[str | int, ...]


class DomainError(Exception):
    """Base of every expected failure the domain reports."""


class FormatError(DomainError):
    """An input document does not have the shape its format requires."""

    def __init__(self, path: Sequence[str | int], message: str) -> None:
        super().__init__(message)
        self.path: Path = tuple(path)
        self.message = message

    def at(self, *prefix: str | int) -> FormatError:
        """The same error, located under ``prefix``."""
        return FormatError((*prefix, *self.path), self.message)


class UnknownName(DomainError):
    """A name (provider profile, encoding, compiler) that is not registered."""

    def __init__(
        self,
        kind: str,
        name: str,
        available: Sequence[str],
        field: str,
        detail: str | None = None,
    ) -> None:
        super().__init__(detail or f"unknown {kind} {name!r}; available: {', '.join(available)}")
        self.kind = kind
        self.name = name
        self.available = tuple(available)
        self.field = field


class InvalidInput(DomainError):
    """Several located problems at once (each a field path and a message)."""

    def __init__(self, problems: Sequence[tuple[Sequence[str | int], str]]) -> None:
        super().__init__("; ".join(message for _, message in problems))
        self.problems: tuple[tuple[Path, str], ...] = tuple((tuple(p), m) for p, m in problems)


class InvalidParams(InvalidInput):
    """A component's params refused while it compiles (on this input), located under the
    component's params by the registry that built it."""


class NotFound(DomainError):
    """A resource that does not exist for this tenant (or belongs to another)."""

    def __init__(self, kind: str, key: str) -> None:
        super().__init__(f"{kind} {key!r} not found")
        self.kind = kind
        self.key = key


class Conflict(DomainError):
    """The request contradicts what is stored (an id taken, a key reused with another body)."""
