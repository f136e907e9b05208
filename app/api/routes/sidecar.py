"""The sidecar endpoints: an OpenAI or Anthropic SDK pointed at ctxc (app/api/sidecar.py)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from app.api import sidecar

router = APIRouter(tags=["sidecar"])
# The provider's own request and answer shapes: documented by the providers, not here.
SHAPES = "Request, answer and errors in the provider's own shapes"
# Any status: the upstream's answers pass through as they came.
ANSWERS: dict[int | str, dict[str, Any]] = {
    "default": {"description": "The upstream's answer, or ctxc's refusal, in the provider's "
                "error shape (`X-Ctxc-*` headers say what ctxc did)"},
}  # fmt: skip


@router.post(
    "/openai/v1/chat/completions",
    operation_id="sidecar_openai_chat",
    summary="OpenAI Chat Completions, context-managed",
    response_description=SHAPES,
    responses=ANSWERS,
)
async def openai_chat(request: Request) -> Response:
    """Point an OpenAI SDK's `base_url` at `/openai/v1`: the request is forwarded to
    `CTXC_OPENAI_UPSTREAM` with the compiled messages. `X-Ctxc-Session` names the session (made
    when missing); without it nothing is stored. ctxc's own key, if needed, in
    `X-Ctxc-Api-Key`."""
    return await sidecar.handle(request, sidecar.OPENAI)


@router.post(
    "/openai/v1/responses",
    operation_id="sidecar_openai_responses",
    summary="OpenAI Responses, context-managed",
    response_description=SHAPES,
    responses=ANSWERS,
)
async def openai_responses(request: Request) -> Response:
    """Point an OpenAI SDK's `base_url` (or Codex CLI's model provider) at `/openai/v1`: a
    request that resends its whole `input` (`store: false`, as Codex does) is forwarded to
    `CTXC_OPENAI_UPSTREAM` with the compiled `input` and `instructions`, the rest of the body
    as sent. One that continues a `previous_response_id` or a `conversation`
    (the provider holds the history), or runs in the `background`, is passed on as it is, with
    `X-Ctxc-Managed: false` and `X-Ctxc-Unmanaged-Reason`. Headers as for Chat Completions."""
    return await sidecar.handle(request, sidecar.RESPONSES)


@router.post(
    "/anthropic/v1/messages",
    operation_id="sidecar_anthropic_messages",
    summary="Anthropic Messages, context-managed",
    response_description=SHAPES,
    responses=ANSWERS,
)
async def anthropic_messages(request: Request) -> Response:
    """Point an Anthropic SDK's `base_url` at `/anthropic`: the request is forwarded to
    `CTXC_ANTHROPIC_UPSTREAM` with the compiled messages and system prompt. Headers as for
    the OpenAI endpoint."""
    return await sidecar.handle(request, sidecar.ANTHROPIC)


# Registered after the managed endpoints, which match first.
METHODS = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]


@router.api_route("/openai/v1/{path:path}", methods=METHODS, include_in_schema=False)
async def openai_other(path: str, request: Request) -> Response:
    """Any other OpenAI API call, forwarded to `CTXC_OPENAI_UPSTREAM` as it is."""
    return await sidecar.forward(request, sidecar.OPENAI, path)


@router.api_route("/anthropic/{path:path}", methods=METHODS, include_in_schema=False)
async def anthropic_other(path: str, request: Request) -> Response:
    """Any other Anthropic API call, forwarded to `CTXC_ANTHROPIC_UPSTREAM` as it is."""
    return await sidecar.forward(request, sidecar.ANTHROPIC, path)
