"""The sidecar's HTTP client for the provider APIs it forwards to (its upstreams).

One pooled client for the process: connections to an upstream are kept and reused across turns
and tenants (the credentials travel per request, in the forwarded headers, never stored). The
request is sent and its answer's head read; the body is read or streamed by the caller, who
closes it (which closes the upstream request when the agent went away).
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

# What the sidecar forwards of the agent's request headers: the provider's credentials and
# options. Nothing else (not ctxc's own key, not hop-by-hop or length headers).
FORWARDED = frozenset({
    "authorization", "x-api-key", "anthropic-version", "anthropic-beta", "openai-organization",
    "openai-project", "openai-beta", "user-agent",
})  # fmt: skip
# What it does not pass back of the upstream's answer headers: those of the connection and the
# encoding (the body is passed decoded), which the server sets for its own answer.
NOT_RETURNED = frozenset({
    "content-length", "content-encoding", "transfer-encoding", "connection", "keep-alive",
    "date", "server",
})  # fmt: skip


class Upstreams:
    """Pooled HTTP to the upstreams, with the deployment's time limits."""

    def __init__(self, timeout: float, connect_timeout: float, connections: int) -> None:
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            follow_redirects=False,
        )

    async def open(
        self, url: str, body: bytes, headers: Mapping[str, str], method: str = "POST",
        params: str = "",
    ) -> httpx.Response:  # fmt: skip
        """Send ``body`` to ``url`` (with the query string ``params``) with the agent's
        forwarded ``headers``: the answer with its body not read yet (close it)."""
        sent = {name: value for name, value in headers.items() if name in FORWARDED}
        sent["accept-encoding"] = "identity"
        if body:
            sent["content-type"] = headers.get("content-type", "application/json")
        url = f"{url}?{params}" if params else url
        request = self.client.build_request(method, url, content=body, headers=sent)
        return await self.client.send(request, stream=True)

    async def aclose(self) -> None:
        await self.client.aclose()


def returned_headers(response: httpx.Response) -> dict[str, str]:
    """The upstream answer's headers the agent gets back."""
    return {k: v for k, v in response.headers.items() if k.lower() not in NOT_RETURNED}
