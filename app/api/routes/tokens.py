"""Token counting of a posted request."""

from __future__ import annotations

from fastapi import APIRouter, Request

from app.api.bodies import read_body
from app.api.deps import StateDep, TenantDep
from app.api.model_schemas import TokenCount, TokenCountResult
from app.api.openapi import json_body
from app.api.problems import from_input_error, responses, system_prompt
from app.domain.errors import FormatError, InvalidInput
from app.services.compiling.tokens import RequestCount, count_request
from app.services.tenancy import cpu

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])


@router.post(
    "/count",
    responses=responses(400, 401, 413, 422),
    operation_id="count_tokens",
    openapi_extra=json_body(TokenCount),
)
async def count_tokens(request: Request, state: StateDep, _: TenantDep) -> TokenCountResult:
    """Count a message list per message and in total, for a provider or an encoding.

    `exact` is false where the provider's tokenizer is not public (Anthropic, OpenRouter,
    Ollama...): the figures are then estimates, and `note` says so.
    """
    body = await read_body(request, TokenCount)

    def run() -> RequestCount:
        try:
            return count_request(
                state.counter,
                body.format,
                body.messages,
                system_prompt(body.format, body.system, body.instructions),
                body.provider or state.settings.default_provider,
                body.encoding,
                body.tools,
                state.settings.catalog,
            )
        except (FormatError, InvalidInput) as exc:
            raise from_input_error(exc) from None

    result = await cpu.run_sync(run)
    state.metrics.tokens.labels(result.encoding).inc(result.total)
    return TokenCountResult(
        provider=result.provider,
        encoding=result.encoding,
        exact=result.exact,
        note=result.note,
        messages=result.messages,
        tools=result.tools,
        reply_priming=result.reply_priming,
        total=result.total,
    )
