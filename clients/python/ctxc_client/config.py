"""Where and how both clients send their calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from ctxc_client import calls
from ctxc_client.calls import Call


@dataclass(frozen=True)
class Config:
    base_url: str
    api_key: str | None
    timeout: float
    max_retries: int

    def _headers(self, extra: dict[str, str]) -> dict[str, str]:
        auth = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return {**auth, **extra}

    def url(self, path: str) -> str:
        return self.base_url.rstrip("/") + path

    def request(self, call: Call[Any]) -> dict[str, Any]:
        """The keyword arguments of ``httpx.Client.request`` for ``call``."""
        return {
            "method": call.method,
            "url": self.url(call.path),
            "params": call.params,
            "json": call.json,
            "headers": self._headers(dict(call.headers)),
            "timeout": self.timeout,
        }

    def stream(
        self, session_id: str, headers: dict[str, str], timeout: httpx.Timeout
    ) -> dict[str, Any]:
        """The keyword arguments of ``httpx.Client.stream`` for a session's events."""
        return {
            "method": "GET",
            "url": self.url(calls.events_path(session_id)),
            "headers": self._headers({"Accept": "text/event-stream", **headers}),
            "timeout": timeout,
        }

    def retry_wait(self, call: Call[Any], attempt: int, error: Exception) -> float | None:
        """The wait before resending ``call`` (None: raise ``error``), at most ``max_retries``
        times."""
        return calls.retry_wait(call, attempt, error) if attempt < self.max_retries else None
