"""The sidecar endpoints: an OpenAI, Anthropic or Gemini client pointed at ctxc
(app/api/sidecar)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from app.api import sidecar

router = APIRouter(tags=["sidecar"])
# The provider's own request and answer shapes: documented by the providers, not here.
SHAPES = "Request, answer and errors in the provider's own shapes"
# Any status: the upstream's answers pass through as they came.
ANSWERS: dict[int | str, dict[str, Any]] = {
    "default": {
        "description": "The upstream's answer, or ctxc's refusal, in the provider's "
        "error shape (`X-Ctxc-*` headers say what ctxc did)"
    },
}


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


@router.post(
    "/gemini/{version}/models/{model}:generateContent",
    operation_id="sidecar_gemini_generate",
    summary="Gemini generateContent, context-managed",
    response_description=SHAPES,
    responses=ANSWERS,
)
async def gemini_generate(version: str, model: str, request: Request) -> Response:
    """Point Gemini CLI's `GOOGLE_GEMINI_BASE_URL` (or a Gemini SDK's base URL) at `/gemini`:
    the request is forwarded to `CTXC_GEMINI_UPSTREAM` with the compiled `contents` and
    `systemInstruction`; the key (`x-goog-api-key` or `key=`) is passed on. Headers as for
    the OpenAI endpoint."""
    call = sidecar.Call(model, False, f"/{version}/models/{model}:generateContent")
    return await sidecar.handle(request, sidecar.GEMINI, call)


@router.post(
    "/gemini/{version}/models/{model}:streamGenerateContent",
    operation_id="sidecar_gemini_stream",
    summary="Gemini streamGenerateContent, context-managed",
    response_description=SHAPES,
    responses=ANSWERS,
)
async def gemini_stream(version: str, model: str, request: Request) -> Response:
    """As `generateContent`, the answer streamed: as server-sent events with `alt=sse` (what
    Gemini CLI and the SDKs ask for), else as Gemini's JSON array of chunks, passed on whole."""
    events = request.query_params.get("alt") == "sse"
    call = sidecar.Call(model, events, f"/{version}/models/{model}:streamGenerateContent")
    return await sidecar.handle(request, sidecar.GEMINI, call)


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


@router.api_route("/gemini/{path:path}", methods=METHODS, include_in_schema=False)
async def gemini_other(path: str, request: Request) -> Response:
    """Any other Gemini API call (`countTokens`, `models`, ...), forwarded to
    `CTXC_GEMINI_UPSTREAM` as it is."""
    return await sidecar.forward(request, sidecar.GEMINI, path)
