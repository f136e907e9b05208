"""Facts of an immutable value kept while it lives, for the values a compile meets again.

A session's stored messages are parsed once and kept (app/services/compiling/stored.py), so
every compile of the session meets the same message objects: what a pure function of one of
them and a small argument (a target) answers is kept beside it, by the object's identity, until
the object is gone. Values are frozen (pydantic ``frozen``): an identity names one value.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Hashable
from typing import TypeVar

V = TypeVar("V")
A = TypeVar("A", bound=Hashable)
R = TypeVar("R")


def per_value(fn: Callable[[V, A], R]) -> Callable[[V, A], R]:
    """``fn(value, arg)``, computed once per live ``value`` and ``arg``."""
    memo: dict[tuple[int, A], tuple[weakref.ref[V], R]] = {}

    def forget(key: tuple[int, A]) -> Callable[[object], None]:
        def gone(_: object) -> None:
            memo.pop(key, None)

        return gone

    def kept(value: V, arg: A) -> R:
        key = (id(value), arg)
        found = memo.get(key)
        if found is not None and found[0]() is value:
            return found[1]
        result = fn(value, arg)
        memo[key] = (weakref.ref(value, forget(key)), result)
        return result

    kept.__doc__ = fn.__doc__
    kept.__wrapped__ = fn  # type: ignore[attr-defined]
    return kept
