"""The typed client against a live server: each test runs with `Client` and with `AsyncClient`
(driven from the test's sync code by one event loop of its own)."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from ctxc_client import AsyncClient, Client

from tests.conftest import Api, make_key


class Blocking:
    """An `AsyncClient` whose methods are called as the sync client's are: each awaitable runs
    to its end, each async iterator is read one item per step, on one event loop."""

    def __init__(self, client: AsyncClient, runner: asyncio.Runner) -> None:
        self.client = client
        self.runner = runner

    def __getattr__(self, name: str) -> Callable[..., Any]:
        method = getattr(self.client, name)

        def call(*args: Any, **kwargs: Any) -> Any:
            result = method(*args, **kwargs)
            if inspect.isawaitable(result):
                return self.runner.run(_awaited(result))
            return self._iterate(result)

        return call

    def _iterate(self, items: AsyncIterator[Any]) -> Iterator[Any]:
        while True:
            try:
                yield self.runner.run(_next(items))
            except StopAsyncIteration:
                return


async def _awaited(result: Any) -> Any:
    return await result


async def _next(items: AsyncIterator[Any]) -> Any:
    return await anext(items)


@contextmanager
def connect(kind: str, url: str, key: str, **options: Any) -> Iterator[Any]:
    """A client of ``kind`` (sync, async) for the block, closed after it."""
    if kind == "sync":
        with Client(url, api_key=key, **options) as client:
            yield client
        return
    with asyncio.Runner() as runner:
        client = AsyncClient(url, api_key=key, **options)
        try:
            yield Blocking(client, runner)
        finally:
            runner.run(client.aclose())


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def ctxc(api: Api, kind: str) -> Iterator[Any]:
    """A client of tenant A."""
    with connect(kind, api.url, api.key_a) as client:
        yield client


def fresh_key(api: Api) -> str:
    """The key of a tenant of its own: what it lists is only what the test made."""
    return make_key(api.database_url, f"tenant-{uuid.uuid4().hex[:8]}")
