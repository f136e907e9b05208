"""Compile: a posted history (stateless) or a stored session, into one provider request."""

from __future__ import annotations

import uuid
from dataclasses import asdict, replace
from datetime import UTC, datetime
from typing import Final, Literal

import orjson
import xxhash
from fastapi import APIRouter, Request, Response

from app.api.bodies import parse_sized
from app.api.compile_schemas import (
    CalibrationRead,
    CompileRequest,
    CompileResult,
    CompileTokens,
    CountError,
    CursorAcknowledge,
    CursorRead,
    LeftOutRead,
    OmittedRead,
    SessionCompileRequest,
    StepRead,
)
from app.api.deps import DbDep, StateDep, TenantDep
from app.api.metrics import counted
from app.api.openapi import json_body
from app.api.problems import check_body, responses, system_prompt
from app.api.routes.compactions import compaction_read
from app.domain.compilers.base import StepReport
from app.domain.messages import JSONObject
from app.domain.recall import with_tools
from app.domain.sessions import PromptFragment
from app.services import compiling
from app.services.compiling import Compilation, Options
from app.services.sessions import cursor
from app.services.tenancy import cpu
from app.storage import queries

router = APIRouter(tags=["compile"])
ANSWERS = responses(400, 401, 404, 409, 413, 422)
JSON: Final = "application/json"
# Every answer starts with its compile id; the answer cache keeps what follows it.
ID_FIELD: Final = b'{"compile_id":"'


def _options(body: SessionCompileRequest | CompileRequest) -> Options:
    options = Options(
        provider=body.provider,
        context_window=body.context_window,
        compiler=body.compiler,
        execution_id=body.execution_id,
        ephemeral=body.ephemeral,
        ephemeral_format=body.ephemeral_format,
        tools=body.tools,
    )
    if isinstance(body, CompileRequest):
        return replace(options, metadata=body.metadata, response_format=body.response_format)
    fragments = tuple(
        PromptFragment(name=f.name, text=f.text, lifecycle="dynamic") for f in body.fragments
    )
    usage = body.usage.model_dump(exclude_none=True) if body.usage else None
    return replace(
        options,
        fragments=fragments,
        compaction=body.compaction,
        usage=usage,
        error_kind=body.error_kind,
    )


def _result(done: Compilation, tools: list[JSONObject] | None = None) -> CompileResult:
    out = done.output
    added = with_tools(done.profile.output, tools, out.tools) if out.tools else None
    return CompileResult(
        compile_id=done.compile_id,
        provider=done.profile.name,
        format=done.profile.output,
        mode=done.mode,
        after_seq=done.after_seq,
        system=out.system,
        instructions=out.instructions,
        messages=out.messages,
        response_format=out.response_format,
        tokens=CompileTokens(
            total=out.total,
            sections=out.sections,
            context_window=out.context_window,
            budget_used_pct=out.budget_used_pct,
            encoding=done.profile.encoding,
            exact=out.exact,
            note=out.note,
            count=_count(done),
            calibration=_calibration(done),
        ),
        left_out=[
            LeftOutRead(reason=r.reason, count=r.count, seq_ranges=r.seq_ranges)
            for r in out.left_out
        ],
        warnings=out.warnings,
        seq_range=(out.seqs[0], out.seqs[-1]) if out.seqs else None,
        steps=[_step(s) for s in out.steps],
        compactions=[compaction_read(d.row) for d in done.compactions],
        tools=added,
    )


def _count(done: Compilation) -> Literal["exact", "estimated", "calibrated"]:
    if done.output.exact:
        return "exact"
    return "estimated" if done.calibration is None else "calibrated"


def _calibration(done: Compilation) -> CalibrationRead | None:
    found = done.calibration
    if found is None:
        return None
    error = CountError(tokens=found.error_tokens, share=found.error_share)
    return CalibrationRead(
        factor=found.factor,
        samples=found.samples,
        scope=found.scope,
        estimate=done.output.estimate,
        last_error=error,
    )


def _step(report: StepReport) -> StepRead:
    omitted = [
        OmittedRead(
            call_id=o.call_id, seq=t.seq, side=o.side, field=o.field, bytes=o.bytes, sha256=o.sha256
        )
        for t in report.touched
        for o in t.omitted
    ]
    return StepRead(
        name=report.name,
        tokens_saved=report.tokens_saved,
        call_ids=list(report.call_ids),
        seqs=list(report.seqs),
        omitted=omitted,
    )


def _answer(done: Compilation, tools: list[JSONObject] | None = None) -> bytes:
    # No `system` rather than a null one: the SDKs and the API refuse `system: null`; no
    # `instructions` without a system prompt; no `tools` when the compiler added none (the
    # caller sends its own).
    omit = {"system"} if done.output.system is None else set()
    if done.output.instructions is None:
        omit.add("instructions")
    omit |= set() if done.output.tools else {"tools"}
    return encoded(_result(done, tools), omit)


def encoded(result: CompileResult, omit: set[str]) -> bytes:
    """``result`` as JSON without the fields ``omit`` names, the bytes pydantic makes of it.
    Its messages, most of it, are encoded by orjson (pydantic walks them value by value, about
    ten times slower): they hold JSON values only (parsed from JSON, or made of them), which
    both encode alike; what orjson refuses (an integer beyond 64 bits, nesting past 255) makes
    pydantic encode it all."""
    fields = result.model_copy(update={"messages": []}).model_dump(mode="json", exclude=omit)
    fields["messages"] = result.messages  # in its place: the key was there, its value empty
    try:
        return orjson.dumps(fields)
    except orjson.JSONEncodeError:
        return result.model_dump_json(exclude=omit or None).encode()


@router.post(
    "/v1/compile",
    responses=ANSWERS,
    operation_id="compile",
    response_model=CompileResult,
    openapi_extra=json_body(CompileRequest),
)
async def compile_posted(request: Request, state: StateDep, tenant: TenantDep) -> Response:
    """Compile a whole posted history (OpenAI, Anthropic, Responses or canonical shape) into the
    messages to send: selected, trimmed to the budget, provider-valid. Nothing is stored.

    Each posted message is parsed and counted once and then found by content hash, so posting a
    growing conversation again costs only its new messages. A request repeated byte for byte
    (same tenant, a compiler that reads no clock and no plug-in) gets the remembered answer with
    a new compile id.
    """
    # Hashed as it arrives; a remembered answer never needs the body joined into one string.
    chunks, hasher = [], xxhash.xxh3_128()
    async for chunk in request.stream():
        chunks.append(chunk)
        hasher.update(chunk)
    key = hasher.digest() + str(tenant).encode()
    known = state.answers.get(key)
    if known is not None:
        state.metrics.answers.labels("remembered").inc()
        state.metrics.compiled("stateless", "full")
        return Response(ID_FIELD + str(uuid.uuid4()).encode() + known, media_type=JSON)
    raw = b"".join(chunks)
    body = await parse_sized(CompileRequest, raw)
    system = system_prompt(body.format, body.system, body.instructions)

    posted = compiling.Posted(body.format, body.messages, system)
    options = _options(body)
    options = replace(options, provider=options.provider or state.settings.default_provider)

    def run(tenant_name: str) -> tuple[Compilation, bytes]:
        ctx = state.compile_context(tenant)
        done = compiling.compile_posted(ctx, posted, options, tenant_name)
        return done, _answer(done, body.tools)

    with counted(state.metrics, "stateless", "full"):
        async with state.sessionmaker() as db:  # only a compile opens a database session
            tenant_name = await queries.tenant_name(db, tenant)
        done, answer = await cpu.run_sync(run, tenant_name)
    state.metrics.answers.labels("compiled").inc()
    head = ID_FIELD + done.compile_id.encode()
    if done.repeatable and answer.startswith(head):
        state.answers.put(key, answer[len(head) :], len(answer))
    return Response(answer, media_type=JSON)


@router.post(
    "/v1/sessions/{session_id}/compile",
    responses=ANSWERS,
    operation_id="compile_session",
    response_model=CompileResult,
)
async def compile_session(
    session_id: str, body: SessionCompileRequest, state: StateDep, db: DbDep, tenant: TenantDep
) -> Response:
    """Compile the stored session with its compiler (or the one given) for its provider (or the
    one given); the compile is recorded so a later cursor acknowledgement can refer to it.

    With a compaction policy, the compactions due run first: request-boundary compaction when
    the history is over `trigger_tokens`, then reactive ones from the usage reported with the
    last acknowledgement (or `usage` / `error_kind` here); they are listed in `compactions`."""
    check_body(body)
    ctx = state.compile_context(tenant, db)
    with counted(state.metrics, "session") as tally:
        done = await compiling.compile_session(ctx, session_id, _options(body))
        tally.mode = done.mode
    state.metrics.session_reads.labels(done.read).inc()
    return Response(_answer(done, body.tools), media_type=JSON)


@router.post(
    "/v1/sessions/{session_id}/cursor",
    responses=responses(400, 401, 404, 413, 422),
    operation_id="acknowledge_compile",
    tags=["cursor"],
)
async def acknowledge_compile(
    session_id: str, body: CursorAcknowledge, db: DbDep, tenant: TenantDep
) -> CursorRead:
    """Acknowledge a compile after your model call: on success the cursor moves to the last seq
    it sent (never backwards) and the provider's session id is kept; with `error_kind` the
    failure is stored and the cursor stays, so the next compile resends the delta.

    A `usage` with a prompt count for a full compile to a profile whose tokenizer is not public
    calibrates the estimates of the session's next compiles, and of your other sessions for the
    same profile (see `tokens.count`)."""
    check_body(body)
    usage = body.usage.model_dump(exclude_none=True) if body.usage else None
    report = cursor.Acknowledgement(
        body.compile_id, body.provider_session_id, usage, body.error_kind, body.through_seq
    )
    done = await cursor.acknowledge(db, tenant, session_id, report, datetime.now(UTC))
    return CursorRead(**asdict(done))


@router.delete(
    "/v1/sessions/{session_id}/cursor",
    responses=responses(401, 404),
    operation_id="reset_cursor",
    tags=["cursor"],
)
async def reset_cursor(session_id: str, db: DbDep, tenant: TenantDep) -> CursorRead:
    """Forget what the provider session holds: the next compile is full."""
    return CursorRead(**asdict(await cursor.reset(db, tenant, session_id)))
