"""An unexpected error becomes one logged 500 problem with no internals."""

from __future__ import annotations

import asyncio
import logging

import httpx
import pytest
from starlette.types import Receive, Scope, Send

from app.api.middleware import CatchAll


async def broken(scope: Scope, receive: Receive, send: Send) -> None:
    raise RuntimeError("secret internals")


async def get(path: str) -> httpx.Response:
    transport = httpx.ASGITransport(app=CatchAll(broken))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        return await client.get(path)


def test_unexpected_errors_are_a_problem_without_internals(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.ERROR, logger="ctxc"):
        response = asyncio.run(get("/anything"))
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json()["detail"] == "unexpected error"
    assert "secret" not in response.text
    [record] = caplog.records
    assert record.exc_info is not None and "secret internals" in str(record.exc_info[1])
