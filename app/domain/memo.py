"""Facts of an immutable value kept while it lives, for the values a compile meets again.

A session's stored messages are parsed once and kept (app/services/compiling/stored.py), so
every compile of the session meets the same message objects: what a pure function of one of
them and a small argument (a target) answers is kept beside it, by the object's identity, until
the object is gone. Values are frozen (pydantic ``frozen``): an identity names one value.

A kept answer costs the garbage collector as little as it can: a value has one weak reference,
whichever functions keep answers for it, and each function one small dict of answers per value
(a full collection walks every object that can hold others, and the caches keep millions of
messages). When the value is freed, the reference's callback drops all of them, before its
identity can name another object; a lookup still checks that the reference is the value's, so
answers a failed callback left behind are never given to another value.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

V = TypeVar("V")
A = TypeVar("A", bound=Hashable)
R = TypeVar("R")


class _Ref(weakref.ref):  # type: ignore[type-arg]
    """The weak reference of a value with kept answers, knowing the value's identity."""

    __slots__ = ("key",)
    key: int


_MISSING: Any = object()
_REFS: dict[int, _Ref] = {}  # by the value's identity
_MEMOS: list[dict[int, dict[Any, Any]]] = []  # each function's answers, by value identity


def _gone(ref: _Ref) -> None:
    """The value of ``ref`` is being freed: its answers go, in every function."""
    if _REFS.get(ref.key) is ref:
        del _REFS[ref.key]
    for memo in _MEMOS:
        memo.pop(ref.key, None)


def _watch(value: object) -> None:
    """Make sure ``value``'s answers go when it is freed (one reference per value)."""
    key = id(value)
    found = _REFS.get(key)
    if found is None or found() is not value:
        ref = _Ref(value, _gone)
        ref.key = key
        _REFS[key] = ref


def per_value(fn: Callable[[V, A], R]) -> Callable[[V, A], R]:
    """``fn(value, arg)``, computed once per live ``value`` and ``arg``."""
    memo: dict[int, dict[A, R]] = {}
    _MEMOS.append(memo)

    def kept(value: V, arg: A) -> R:
        key = id(value)
        answers = memo.get(key)
        if answers is not None:
            ref = _REFS.get(key)
            if ref is None or ref() is not value:  # left by a freed value whose callback failed
                memo.pop(key, None)
                answers = None
            elif (found := answers.get(arg, _MISSING)) is not _MISSING:
                return found  # type: ignore[no-any-return]
        result = fn(value, arg)
        if answers is None:
            _watch(value)
            answers = memo.setdefault(key, {})
        answers[arg] = result
        return result

    kept.__doc__ = fn.__doc__
    kept.__wrapped__ = fn  # type: ignore[attr-defined]
    return kept
