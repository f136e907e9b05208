"""Compile: a posted history (stateless) or a stored session, into one provider request."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import anyio
from fastapi import APIRouter

from app.api.deps import DbDep, StateDep, TenantDep
from app.api.problems import check_body, responses
from app.api.schemas import (
    CompileRequest,
    CompileResult,
    CompileTokens,
    LeftOutRead,
    SessionCompileRequest,
)
from app.services import compiling
from app.services.compiling import Compilation, Options
from app.storage import queries

router = APIRouter(tags=["compile"])
ANSWERS = responses(400, 401, 404, 413, 422)


def _options(body: SessionCompileRequest | CompileRequest) -> Options:
    options = Options(
        provider=body.provider, context_window=body.context_window, compiler=body.compiler,
        execution_id=body.execution_id, ephemeral=body.ephemeral,
        ephemeral_format=body.ephemeral_format, tools=body.tools,
    )  # fmt: skip
    if isinstance(body, CompileRequest):
        return replace(options, metadata=body.metadata, response_format=body.response_format)
    return options


def _result(done: Compilation) -> CompileResult:
    out = done.output
    return CompileResult(
        compile_id=done.compile_id, provider=done.profile.name, format=done.profile.output,
        system=out.system, messages=out.messages, response_format=out.response_format,
        tokens=CompileTokens(
            total=out.total, sections=out.sections, context_window=out.context_window,
            budget_used_pct=out.budget_used_pct, encoding=done.profile.encoding,
            exact=out.exact, note=out.note,
        ),
        left_out=[LeftOutRead(reason=r.reason, count=r.count, seq_ranges=r.seq_ranges)
                  for r in out.left_out],
        warnings=out.warnings,
        seq_range=(out.seqs[0], out.seqs[-1]) if out.seqs else None,
    )  # fmt: skip


@router.post("/v1/compile", responses=ANSWERS, operation_id="compile")
async def compile_posted(
    body: CompileRequest, state: StateDep, db: DbDep, tenant: TenantDep
) -> CompileResult:
    """Compile a whole posted history (OpenAI, Anthropic or canonical shape) into the messages
    to send: selected, trimmed to the budget, provider-valid. Nothing is stored.

    Each posted message is parsed and counted once and then found by content hash, so posting a
    growing conversation again costs only its new messages.
    """
    check_body(body)
    tenant_name = await queries.tenant_name(db, tenant)
    await db.close()

    def run() -> Compilation:
        return compiling.compile_posted(
            state.cache, state.registry, body.format, body.messages, body.system,
            _options(body), tenant_name, state.settings.default_provider, datetime.now(UTC),
        )  # fmt: skip

    return _result(await anyio.to_thread.run_sync(run))


@router.post("/v1/sessions/{session_id}/compile", responses=ANSWERS, operation_id="compile_session")
async def compile_session(
    session_id: str, body: SessionCompileRequest, state: StateDep, db: DbDep, tenant: TenantDep
) -> CompileResult:
    """Compile the stored session with its compiler (or the one given) for its provider (or the
    one given); the compile is recorded so a later cursor acknowledgement can refer to it."""
    check_body(body)
    done = await compiling.compile_session(
        db, state.cache, state.registry, tenant, session_id, _options(body), datetime.now(UTC)
    )
    return _result(done)
