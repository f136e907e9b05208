"""A remote summariser made safe to depend on: it always returns a summary, in bounded time.

- Each request has ``timeout`` seconds; a timeout, a connection error, a 408, 429 or 5xx is
  retried up to ``retries`` times after ``backoff``, ``2 x backoff``, ... seconds (at most
  ``max_backoff``; a longer wait asked by ``retry-after-ms`` or ``Retry-After``, in seconds
  or as a date, is honoured up to that cap). Other failures are final.
- A history whose transcript is over the model's window (``window_tokens`` less the
  instructions, the summary's ``max_tokens`` and a margin) is cut into chunks
  (``domain.summaries.chunking``) summarised one after the other as "part k of n"; the partial
  summaries are then summarised together the same way, up to ``MAX_DEPTH`` rounds, after which
  they are joined as they are.
- Everything, chunks and retries included, has ``deadline`` seconds.
- A summary has a budget (the call's ``max_tokens``, else the policy's): each request asks the
  model for at most that much (and never more than the policy's ``max_tokens``), and an answer
  over the budget is refused (a model may ignore ``max_tokens``, a webhook has none).
- Every answer must have the ledger's sections (``domain.summaries.sections``); one without is
  a final failure, so the fallback writes the summary and ``fallback_reason`` says what was
  wrong with it. The usage providers report is summed over the requests (``Summary.usage``).
- A history sent in one request is sent with its ``Source`` (the backend may then send it as
  the conversation's own cached prefix, with the messages kept after it too when the whole
  prompt fits the window); chunks and partial summaries are not.
- The history's work (files with their latest action, commands with their outcome, open
  errors: ``domain.summaries.work_block``) is kept ahead of the model's prose, deterministic,
  in at most half the budget; the model is asked for what is left.
- When anything fails, the summary is the fallback's (within the same budget): the ledger
  one, or another profile's (itself falling back in turn), and ``fallback_reason`` says why
  (``summarizer_reason``: ``fallback``; ``nothing_to_summarize`` for an empty history, which is
  never sent).
  The history is only read, so nothing is lost; the caller keeps the originals.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace

import anyio

from app.adapters.summarizers.base import (
    Answer,
    Backend,
    BackendError,
    Request,
    Source,
    Summarizer,
    Summary,
    Usage,
)
from app.domain.messages import Message, TextPart
from app.domain.summaries import Reason
from app.domain.summaries.chunking import chunk_messages
from app.domain.summaries.extractive import CountText
from app.domain.summaries.prompts import instructions
from app.domain.summaries.sections import Unstructured, check_sections
from app.domain.summaries.transcript import SEPARATOR, render_message
from app.domain.summaries.work_block import work_block

log = logging.getLogger("ctxc.summarizer")

MAX_DEPTH = 3
MARGIN_TOKENS = 64  # the chat format's overhead and the "part k of n" note
MIN_INPUT_TOKENS = 256


@dataclass(frozen=True)
class Policy:
    """Time limits, retries and sizes (seconds and tokens)."""

    timeout: float
    retries: int
    deadline: float
    window_tokens: int
    max_tokens: int
    backoff: float = 0.5
    max_backoff: float = 8.0


@dataclass
class _Tally:
    requests: int = 0
    usage: Usage | None = None
    source: Source | None = None


@dataclass(frozen=True)
class Tuning:
    """What a session changes of a profile: the model asked and further instructions."""

    profile: str | None = None
    model: str | None = None
    extra: str | None = None


class Resilient:
    """``backend`` with time limits, retries, chunking and a fallback (the ledger summariser
    or another profile's)."""

    def __init__(
        self,
        backend: Backend,
        fallback: Summarizer,
        count: CountText,
        policy: Policy,
        tuning: Tuning | None = None,
        model: str | None = None,
    ) -> None:
        self._backend = backend
        self._fallback = fallback
        self._count = count
        self._policy = policy
        self._tuning = tuning or Tuning()
        self._model = model  # the backend's own

    @property
    def name(self) -> str:
        return self._backend.name

    @property
    def model(self) -> str | None:
        """The model asked: the session's, else the backend's."""
        return self._tuning.model or self._model

    def tuned(
        self,
        model: str | None = None,
        extra: str | None = None,
        timeout: float | None = None,
        fallback: Summarizer | None = None,
    ) -> Resilient:
        """This summariser with a session's changes; it shares the backend (and its HTTP
        client), so closing it is the original's business."""
        tuning = Tuning(self._tuning.profile, model or self._tuning.model, extra)
        policy = self._policy if timeout is None else replace(self._policy, timeout=timeout)
        return Resilient(
            self._backend, fallback or self._fallback, self._count, policy, tuning, self._model
        )

    async def summarize(
        self,
        messages: Sequence[Message],
        reason: Reason,
        max_tokens: int | None = None,
        source: Source | None = None,
    ) -> Summary:
        """The backend's summary of ``messages`` within ``max_tokens``, or the fallback's one
        saying why not."""
        history = tuple(messages)
        budget = self._policy.max_tokens if max_tokens is None else max_tokens
        if not history:  # nothing to send: the fallback's (empty) summary, saying so
            summary = await self._fallback.summarize(history, reason, budget, source)
            return replace(summary, summarizer_reason="nothing_to_summarize")
        tally = _Tally(source=source)
        try:
            with anyio.fail_after(self._policy.deadline):
                text = await self._within(history, reason, budget, tally)
            return Summary(
                text,
                self.name,
                None,
                tally.requests,
                model=self.model,
                profile=self._tuning.profile,
                usage=tally.usage,
            )
        except BackendError as exc:
            why = str(exc)
        except TimeoutError:
            why = f"no summary within the deadline of {self._policy.deadline:g} s"
        except Exception as exc:  # an odd answer or a bug must not fail the compile
            log.exception("summariser %s failed unexpectedly", self.name)
            why = f"unexpected {type(exc).__name__}"
        log.warning("summariser %s failed (%s); using its fallback", self.name, why)
        return await self._fallen_back(history, reason, budget, tally, why)

    async def _within(
        self, history: tuple[Message, ...], reason: Reason, budget: int, tally: _Tally
    ) -> str:
        """The summary's text: the history's work (``work_block``) first, then the backend's
        prose in the room left; a ``BackendError`` when it is over ``budget``."""
        seqs = tally.source.seqs if tally.source is not None else ()
        block = await anyio.to_thread.run_sync(work_block, history, budget, self._count, seqs)
        block = block and block + "\n\n"
        room = max(1, budget - self._count(block)) if block else budget
        text = block + await self._summarize(history, reason, 1, tally, room)
        size = await anyio.to_thread.run_sync(self._count, text)
        if size > budget:
            raise BackendError(
                f"the summary has {size} tokens, over its budget of {budget}", retryable=False
            )
        return text

    async def _fallen_back(
        self, history: tuple[Message, ...], reason: Reason, budget: int, tally: _Tally, why: str
    ) -> Summary:
        """The fallback's summary, saying why the backend's is not there."""
        summary = await self._fallback.summarize(history, reason, budget, tally.source)
        reason_ = f"{self.name}: {why}"
        if summary.fallback_reason is not None:  # the fallback profile failed too
            reason_ = f"{reason_}; then {summary.fallback_reason}"
        requests = tally.requests + summary.requests
        return replace(
            summary,
            fallback_reason=reason_,
            requests=requests,
            usage=tally.usage,
            summarizer_reason="fallback",
        )

    async def aclose(self) -> None:
        await self._backend.aclose()

    def input_budget(self, reason: Reason, max_tokens: int | None = None) -> int:
        """Tokens of transcript one request asking for ``max_tokens`` may carry."""
        p = self._policy
        asked = p.max_tokens if max_tokens is None else min(max_tokens, p.max_tokens)
        prompt = self._count(instructions(reason, asked, self._tuning.extra))
        # A session's instructions are bounded, but may leave little room in a small window.
        return max(MIN_INPUT_TOKENS, p.window_tokens - asked - prompt - MARGIN_TOKENS)

    async def _summarize(
        self, history: tuple[Message, ...], reason: Reason, depth: int, tally: _Tally, limit: int
    ) -> str:
        max_tokens = min(limit, self._policy.max_tokens)
        budget = self.input_budget(reason, max_tokens)
        # Counting a long history is CPU work: off the event loop.
        chunks = await anyio.to_thread.run_sync(
            chunk_messages, history, budget, self._count_message
        )
        if len(chunks) == 1:
            whole = tally.source if depth == 1 else None
            if whole is not None and whole.rest:  # the whole prompt, when it fits one request
                sent = (*whole.lead, *chunks[0], *whole.rest)
                size = await anyio.to_thread.run_sync(self._count_all, sent)
                whole = whole if size <= budget else replace(whole, rest=())
            request = self._request(chunks[0], reason, max_tokens, tally, None, whole)
            return await self._call(request, tally)
        n = len(chunks)
        partials = [
            await self._call(self._request(chunk, reason, max_tokens, tally, (k, n)), tally)
            for k, chunk in enumerate(chunks, 1)
        ]
        if depth == MAX_DEPTH:
            return SEPARATOR.join(partials)
        folded = tuple(_partial(text, k, n) for k, text in enumerate(partials, 1))
        return await self._summarize(folded, reason, depth + 1, tally, limit)

    def _request(
        self,
        chunk: tuple[Message, ...],
        reason: Reason,
        max_tokens: int,
        tally: _Tally,
        part: tuple[int, int] | None = None,
        whole: Source | None = None,
    ) -> Request:
        t = self._tuning
        carried = tally.source.carried if tally.source is not None else 0
        return Request(chunk, reason, max_tokens, part, t.model, t.extra, whole, carried)

    def _count_message(self, message: Message) -> int:
        return self._count(render_message(message) + SEPARATOR)

    def _count_all(self, messages: Sequence[Message]) -> int:
        return sum(self._count_message(m) for m in messages)

    async def _call(self, request: Request, tally: _Tally) -> str:
        """The backend's answer to ``request``, retried as the policy allows."""
        attempt = 0
        while True:
            tally.requests += 1
            try:
                answer = await self._attempt(request)
            except BackendError as exc:
                if not exc.retryable or attempt >= self._policy.retries:
                    tries = f"{attempt + 1} attempt{'s' if attempt else ''}"
                    raise BackendError(f"{exc} ({tries})", retryable=False) from exc
                await anyio.sleep(self._delay(attempt, exc))
                attempt += 1
                continue
            if isinstance(answer, str):
                answer = Answer(answer)
            if answer.usage is not None:
                tally.usage = answer.usage if tally.usage is None else tally.usage + answer.usage
            try:
                check_sections(answer.text)
            except Unstructured as exc:
                raise BackendError(
                    f"the answer is not the ledger's sections: {exc}", retryable=False
                ) from None
            return answer.text

    async def _attempt(self, request: Request) -> str | Answer:
        try:
            with anyio.fail_after(self._policy.timeout):
                return await self._backend.complete(request)
        except TimeoutError:
            raise BackendError(
                f"no answer within {self._policy.timeout:g} s", retryable=True
            ) from None

    def _delay(self, attempt: int, error: BackendError) -> float:
        p = self._policy
        delay = p.backoff * 2.0**attempt
        if error.retry_after is not None:
            delay = max(delay, error.retry_after)
        return min(delay, p.max_backoff)


def _partial(text: str, k: int, n: int) -> Message:
    """A partial summary as a message of the next round (the prompt says how to read it)."""
    part = TextPart(text=f"[Summary of part {k} of {n}]\n{text}")
    return Message(role="assistant", content=(part,))
