"""The sidecar's HTTP client for the provider APIs it forwards to (its upstreams).

One pooled client for the process: connections to an upstream are kept and reused across turns
and tenants (the credentials travel per request, in the forwarded headers, never stored). The
request is sent and its answer's head read; the body is read or streamed by the caller, who
closes it (which closes the upstream request when the agent went away).
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx

# Headers of one connection, not of the request (RFC 9110 7.6.1): never passed on either way.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-authenticate",
        "proxy-authorization",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
    }
)
# What the sidecar does not forward of the agent's request headers: the connection's, the
# length of a body it may rewrite, and the encodings it asks for itself (it reads the answer).
# Everything else reaches the upstream as sent, but ctxc's own ``X-Ctxc-*`` headers.
NOT_FORWARDED = HOP_BY_HOP | {"host", "content-length", "accept-encoding"}
# What it does not pass back of the upstream's answer headers: those of the connection and the
# encoding (the body is passed decoded), which the server sets for its own answer.
NOT_RETURNED = HOP_BY_HOP | {"content-length", "content-encoding", "date", "server"}
CTXC_PREFIX = "x-ctxc-"


class Upstreams:
    """Pooled HTTP to the upstreams, with the deployment's time limits."""

    def __init__(self, timeout: float, connect_timeout: float, connections: int) -> None:
        self.client = httpx.AsyncClient(
            timeout=httpx.Timeout(timeout, connect=connect_timeout),
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            follow_redirects=False,
        )

    async def open(
        self,
        url: str,
        body: bytes,
        headers: Mapping[str, str],
        method: str = "POST",
        params: str = "",
    ) -> httpx.Response:
        """Send ``body`` to ``url`` (with the query string ``params``) with the agent's
        forwarded ``headers``: the answer with its body not read yet (close it)."""
        sent = forwarded_headers(headers)
        sent["accept-encoding"] = "identity"
        if body:
            sent["content-type"] = headers.get("content-type", "application/json")
        url = f"{url}?{params}" if params else url
        request = self.client.build_request(method, url, content=body, headers=sent)
        return await self.client.send(request, stream=True)

    async def aclose(self) -> None:
        await self.client.aclose()


def forwarded_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """The agent's request headers the upstream gets (names in lower case)."""
    named = ((name.lower(), value) for name, value in headers.items())
    return {
        name: value
        for name, value in named
        if name not in NOT_FORWARDED and not name.startswith(CTXC_PREFIX)
    }


def returned_headers(response: httpx.Response) -> dict[str, str]:
    """The upstream answer's headers the agent gets back."""
    return {k: v for k, v in response.headers.items() if k.lower() not in NOT_RETURNED}
