"""The sidecar's calls to its upstream: sent, read within bounds, and what a "prompt too long"
says fits."""

from __future__ import annotations

import httpx

from app.api.deps import AppState
from app.api.sidecar.refusals import Refused
from app.domain.wire import Provider, fitting_share

# An upstream error body is read up to this size (past it, it is cut): errors are small.
ERROR_BYTES = 1 << 20
# A non-streamed upstream answer is read up to this size.
ANSWER_BYTES = 64 << 20
# The retried compile's budget: what the upstream said fits, less this margin.
RETRY_MARGIN = 0.95


async def send(
    state: AppState,
    url: str,
    body: bytes,
    headers: dict[str, str],
    method: str = "POST",
    params: str = "",
) -> httpx.Response:
    """The upstream's answer, its body not read yet; what goes wrong before it, a refusal."""
    try:
        return await state.upstreams.open(url, body, headers, method, params)
    except httpx.TimeoutException:
        raise Refused(504, "the upstream did not answer in time") from None
    except httpx.TransportError as exc:
        raise Refused(502, f"the upstream could not be reached: {type(exc).__name__}") from None


async def read_body(upstream: httpx.Response, limit: int) -> bytes:
    """The upstream answer's body, up to ``limit`` bytes; closes it."""
    data = bytearray()
    try:
        async for chunk in upstream.aiter_bytes():
            data += chunk
            if len(data) > limit:
                raise Refused(502, f"the upstream's answer is over {limit} bytes")
    except httpx.TimeoutException:
        raise Refused(504, "the upstream did not finish its answer in time") from None
    except httpx.TransportError as exc:
        raise Refused(502, f"the upstream's answer broke off: {type(exc).__name__}") from None
    finally:
        await upstream.aclose()
    return bytes(data)


def shrink(provider: Provider, data: bytes) -> float:
    """The share of the budget a retry compiles for: what the upstream said fits, less a
    margin; 0.9 when it said no numbers."""
    share = fitting_share(provider, data)
    return 0.9 if share is None else RETRY_MARGIN * share
