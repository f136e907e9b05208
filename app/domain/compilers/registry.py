"""Compilers and decorators by name, and ``build``: from a spec to one compiler.

A registry is a plain value: ``bases`` maps a name to ``factory(**params) -> Compiler`` and
``decorators`` maps a name to ``factory(inner, **params) -> Compiler``. Params are validated
against the factory's signature (strict: no "3" for 3) before it is called, so a factory's type
hints and ``Annotated`` constraints are its parameter schema. Operators extend the built-ins with
``with_base`` / ``with_decorator`` / ``merged``; loading plug-ins is the service layer's job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache

from pydantic import ConfigDict, ValidationError, validate_call

from app.domain.compilers.base import Compiled, Compiler, Snapshot
from app.domain.compilers.builtins import all_sections, current_tool_trace, selected_sections
from app.domain.compilers.compaction import compact_tool_results, tool_compaction
from app.domain.compilers.context import inject, providers
from app.domain.compilers.decorators import token_limit, window
from app.domain.compilers.recalling import recall
from app.domain.compilers.redact import redact
from app.domain.compilers.repairing import repaired
from app.domain.compilers.spec import CompilerSpec, Component, dotted, located
from app.domain.errors import InvalidInput, InvalidParams, UnknownName

Factory = Callable[..., Compiler]
_STRICT = ConfigDict(strict=True, arbitrary_types_allowed=True)


@dataclass(frozen=True)
class Registry:
    """Base compiler factories and decorator factories, by name."""

    bases: Mapping[str, Factory] = field(default_factory=dict)
    decorators: Mapping[str, Factory] = field(default_factory=dict)

    def with_base(self, name: str, factory: Factory) -> Registry:
        """This registry plus (or with a new) base compiler ``name``."""
        return Registry({**self.bases, name: factory}, self.decorators)

    def with_decorator(self, name: str, factory: Factory) -> Registry:
        """This registry plus (or with a new) decorator ``name``."""
        return Registry(self.bases, {**self.decorators, name: factory})

    def merged(self, other: Registry) -> Registry:
        """Both registries; ``other`` wins where a name is in both."""
        return Registry({**self.bases, **other.bases}, {**self.decorators, **other.decorators})


BUILTINS = Registry(
    bases={
        "current_tool_trace": current_tool_trace,
        "all_sections": all_sections,
        "selected_sections": selected_sections,
    },
    decorators={
        "token_limit": token_limit,
        "window": window,
        "redact": redact,
        "tool_compaction": tool_compaction,
        "compact_tool_results": compact_tool_results,
        "inject": inject,
        "providers": providers,
        "recall": recall,
    },
)


@cache
def _validated(factory: Factory) -> Factory:
    return validate_call(config=_STRICT)(factory)


def _make(
    factories: Mapping[str, Factory],
    kind: str,
    part: Component,
    path: tuple[str | int, ...],
    *inner: Compiler,
) -> Compiler:
    factory = factories.get(part.name)
    if factory is None:
        raise UnknownName(kind, part.name, sorted(factories), dotted((*path, "name")))
    where = (*path, "params")
    try:
        return _located(_validated(factory)(*inner, **part.params), where)
    except ValidationError as err:
        raise InvalidInput(located(err, where)) from None
    except InvalidInput as err:
        raise InvalidInput([((*where, *p), message) for p, message in err.problems]) from None
    except UnknownName as err:
        raise UnknownName(
            err.kind, err.name, err.available, f"{dotted(where)}.{err.field}"
        ) from None


def _located(compiler: Compiler, where: tuple[str | int, ...]) -> Compiler:
    """``compiler``, its refusals of its own params located under ``where``."""

    def compile_located(snapshot: Snapshot) -> Compiled:
        try:
            return compiler(snapshot)
        except InvalidParams as err:
            raise InvalidInput([((*where, *p), message) for p, message in err.problems]) from None

    return compile_located


# Transforms rewrite content and so change token counts: after token_limit they could break its
# budget (seeds/003: transforms run first).
TRANSFORMS = frozenset({"redact", "tool_compaction", "compact_tool_results"})
BUDGETS = frozenset({"token_limit"})
# The recall tool's flag and its tokens' claim reach only the decorators it wraps: the steps that
# write placeholders and the trimming that counts the claim.
RECALLED = TRANSFORMS | BUDGETS


def _check_order(spec: CompilerSpec, prefix: str) -> None:
    trimmed = False
    recall: int | None = None
    for n, part in enumerate(spec.decorators):
        trimmed = trimmed or part.name in BUDGETS
        if trimmed and part.name in TRANSFORMS:
            where = (prefix, "decorators", n, "name")
            raise InvalidInput([(where, f"{part.name} must come before token_limit")])
        if recall is not None and part.name in RECALLED:
            where = (prefix, "decorators", recall, "name")
            raise InvalidInput([(where, f"recall must come after {part.name}")])
        recall = n if part.name == "recall" else recall


def build(spec: CompilerSpec, registry: Registry = BUILTINS, prefix: str = "compiler") -> Compiler:
    """One compiler: the base, repaired for the target (see ``repaired``), wrapped by each
    decorator in list order (first listed innermost)."""
    _check_order(spec, prefix)
    compiler = repaired(_make(registry.bases, "compiler", spec.base, (prefix, "base")))
    for n, part in enumerate(spec.decorators):
        path = (prefix, "decorators", n)
        compiler = _make(registry.decorators, "decorator", part, path, compiler)
    return compiler


# Built-ins whose view depends on more than the snapshot's messages and the request: the clock.
CLOCKED = frozenset({"providers"})


def repeatable(spec: CompilerSpec, registry: Registry = BUILTINS) -> bool:
    """True when ``spec`` compiles equal inputs to equal outputs: built-ins only (a plug-in may
    read anything) and none that reads the clock. Such answers can be cached."""
    return built_in(spec, registry) and not any(p.name in CLOCKED for p in spec.decorators)


def built_in(spec: CompilerSpec, registry: Registry = BUILTINS) -> bool:
    """True when every part of ``spec`` is a built-in (a plug-in may read anything)."""
    parts = [(registry.bases, BUILTINS.bases, spec.base)]
    parts += [(registry.decorators, BUILTINS.decorators, part) for part in spec.decorators]
    return all(table.get(part.name) is builtin.get(part.name) for table, builtin, part in parts)


def build_base(spec: CompilerSpec, registry: Registry = BUILTINS) -> Compiler:
    """The base compiler of ``spec`` alone, unrepaired (what a digest reads a history with)."""
    return _make(registry.bases, "compiler", spec.base, ("compiler", "base"))


def names(registry: Registry) -> dict[str, Sequence[str]]:
    """The registered names, sorted, per kind (what a listing endpoint shows)."""
    return {"bases": sorted(registry.bases), "decorators": sorted(registry.decorators)}
