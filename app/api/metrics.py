"""Prometheus metrics, in a registry of each app's own, and what feeds them.

Labels take values from small fixed sets only (routes, modes, kinds, backends, problem types):
never a session id, a tenant or a key.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, Literal

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from sqlalchemy.ext.asyncio import AsyncSession

from app.adapters.summarizers import Summarizer, Summary
from app.adapters.summarizers.base import Source as SummarySource
from app.adapters.summarizers.profiles import Summarizers
from app.api.problems import problem_slug
from app.domain.messages import Message
from app.domain.summaries import Reason
from app.domain.summaries.profiles import SummarizerChoice
from app.services.compaction import Done
from app.services.compaction.compactor import Compactor, Deployment
from app.services.sessions.cache import Lru

Source = Literal["stateless", "session"]
Trigger = Literal["compile", "request"]
# From a millisecond (the extractive summariser) to minutes (a remote model, retries included).
SUMMARY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


def _outcomes(r: CollectorRegistry, name: str, documentation: str) -> Counter:
    """A counter of some work by its ``outcome``."""
    return Counter(name, documentation, ["outcome"], registry=r)


class Metrics:
    """The service's Prometheus metrics, in a registry of its own (one per app)."""

    def __init__(self) -> None:
        self.registry = r = CollectorRegistry()
        self.requests = Counter(
            "ctxc_http_requests", "HTTP requests", ["method", "route", "status"], registry=r
        )
        self.latency = Histogram(
            "ctxc_http_request_duration_seconds",
            "HTTP request latency",
            ["method", "route"],
            registry=r,
        )
        self.tokens = Counter(
            "ctxc_tokens_counted", "Tokens counted, by encoding", ["encoding"], registry=r
        )
        self._compiles(r)
        self._summaries(r)
        self._background(r)

        # With `ctxc serve --workers N` each worker keeps its own metrics, and a scrape gets the
        # figures of the worker that answered it: this says which one (a scraper can tell their
        # counters apart, and a restarted worker's reset).
        self.process = Gauge(
            "ctxc_process_id",
            "PID of the server process (worker) these figures are of",
            registry=r,
        )
        self.process.set(os.getpid())

    def _compiles(self, r: CollectorRegistry) -> None:
        """Compiles: their answers, what they read, the compactions they ran, sidecar turns."""
        self.answers = Counter(
            "ctxc_stateless_compiles",
            "Stateless compile answers: compiled, or remembered from the same request",
            ["answer"],
            registry=r,
        )
        self.compiles = Counter(
            "ctxc_compiles",
            "Compiles of valid requests: stateless or session, full or delta (unknown when a "
            "session compile failed before its mode was known); outcome ok or the problem type",
            ["source", "mode", "outcome"],
            registry=r,
        )
        self.compactions = Counter(
            "ctxc_compactions",
            "Compactions written, by kind and reason; trigger: a compile or POST .../compact",
            ["kind", "reason", "trigger"],
            registry=r,
        )
        self.session_reads = Counter(
            "ctxc_session_compile_reads",
            "Session compiles by what they read: the tail and a digest of the rest, a kept tail "
            "and the rows since, the whole history, a short history kept whole and the rows "
            "since (kept_whole), the messages after the cursor (delta), or nothing (remembered)",
            ["read"],
            registry=r,
        )
        self.sidecar = Counter(
            "ctxc_sidecar_turns",
            "Sidecar turns by endpoint and outcome: stored (in a session), not_stored (answered, "
            "but ctxc could not store it), stateless, forked (stored as a new branch), "
            "upstream_error (passed through), error (ctxc's own), cancelled (the agent went "
            "away), passed (another path, forwarded as it is), unmanaged (a conversation the "
            "provider holds, passed on as it is); retried counts prompt-too-long retries; "
            "provider: openai, responses, anthropic",
            ["provider", "outcome"],
            registry=r,
        )

    def _summaries(self, r: CollectorRegistry) -> None:
        """Summaries: how they ended, how long they took, what they asked of a remote model."""
        self.summaries = Counter(
            "ctxc_summaries",
            "Summaries by configured backend; outcome ok, fallback (the extractive summary "
            "instead) or error",
            ["backend", "outcome"],
            registry=r,
        )
        self.summary_latency = Histogram(
            "ctxc_summary_duration_seconds",
            "Time to a summary (parts, retries and fallback included), by configured backend",
            ["backend"],
            buckets=SUMMARY_BUCKETS,
            registry=r,
        )
        self.summarizer_requests = Counter(
            "ctxc_summarizer_requests",
            "Requests sent to a remote summariser (retries and parts included)",
            ["backend"],
            registry=r,
        )

    def _background(self, r: CollectorRegistry) -> None:
        """Work besides the answer: digests, warmed compiles, prepared compactions (by outcome)."""
        self.digests = _outcomes(
            r,
            "ctxc_digests",
            "Digests of long histories: made, moved forward, none to make, stale (the history "
            "changed first) or failed",
        )
        self.digest_jobs = Gauge(
            "ctxc_digest_jobs", "Digest jobs running now in this worker", registry=r
        )
        self.warmed = _outcomes(
            r,
            "ctxc_warmed_compiles",
            "Session compiles with no options made ahead by a write that moved a digest: warmed, "
            "none (not repeatable, no tail to read: a delta, no digest, or not enough; the "
            "session gone or nothing to send; a later write warmed first) or failed",
        )
        self.preparations = _outcomes(
            r,
            "ctxc_compaction_preparations",
            "Request-boundary compactions prepared in the background: prepared, busy (another "
            "held the lease), exists, none (nothing to prepare), refused (a constraint would be "
            "lost), stale (the history changed first), gone (the session) or failed",
        )

    def compiled(self, source: Source, mode: str, outcome: str = "ok") -> None:
        self.compiles.labels(source, mode, outcome).inc()

    def compacted(self, done: Done, trigger: Trigger) -> None:
        self.compactions.labels(done.row.kind, done.row.reason, trigger).inc()


@dataclass
class Tally:
    mode: str


@contextmanager
def counted(metrics: Metrics, source: Source, mode: str = "unknown") -> Iterator[Tally]:
    """Count the compile run inside: ok in the tally's mode, or the problem it failed with."""
    tally = Tally(mode)
    try:
        yield tally
    except Exception as exc:
        metrics.compiled(source, tally.mode, problem_slug(exc))
        raise
    metrics.compiled(source, tally.mode)


class MeteredSummarizer:
    """``summarizer``, timed and counted under the configured backend's name."""

    def __init__(self, summarizer: Summarizer, backend: str, metrics: Metrics) -> None:
        self.summarizer, self.backend, self.metrics = summarizer, backend, metrics

    async def summarize(
        self,
        messages: Sequence[Message],
        reason: Reason,
        max_tokens: int | None = None,
        source: SummarySource | None = None,
    ) -> Summary:
        start = time.perf_counter()
        outcome = "error"
        try:
            summary = await self.summarizer.summarize(messages, reason, max_tokens, source)
            outcome = "ok" if summary.fallback_reason is None else "fallback"
            self.metrics.summarizer_requests.labels(self.backend).inc(summary.requests)
            return summary
        finally:
            self.metrics.summary_latency.labels(self.backend).observe(time.perf_counter() - start)
            self.metrics.summaries.labels(self.backend, outcome).inc()

    async def aclose(self) -> None:
        await self.summarizer.aclose()


class MeteredSummarizers:
    """The deployment's summarisers, each chosen one timed and counted under its backend kind."""

    def __init__(self, summarizers: Summarizers, metrics: Metrics) -> None:
        self.summarizers, self.metrics = summarizers, metrics
        self.names = summarizers.names

    def choose(self, choice: SummarizerChoice | None) -> Summarizer:
        kind = self.summarizers.kind(choice)
        return MeteredSummarizer(self.summarizers.choose(choice), kind, self.metrics)

    def writer(self, choice: SummarizerChoice | None) -> dict[str, Any]:
        return self.summarizers.writer(choice)


def metered_compactor(
    db: AsyncSession, now: datetime, deployment: Deployment, metrics: Metrics, trigger: Trigger
) -> Compactor:
    """A compactor of ``deployment`` (its ``summarizers`` the deployment's profiles) whose
    compactions are counted and whose summaries are timed."""
    assert isinstance(deployment.summarizers, Summarizers)
    chooser = MeteredSummarizers(deployment.summarizers, metrics)
    metered = replace(
        deployment,
        summarizer=chooser.choose(None),
        summarizers=chooser,
        on_compacted=lambda done: metrics.compacted(done, trigger),
    )
    return Compactor(db, metered, now)


class CacheCollector:
    """Lookups (hit or miss), bytes and entries of the compile caches, read when scraped."""

    def __init__(self, caches: Mapping[str, Lru[Any, Any]]) -> None:
        self.caches = caches

    def collect(self) -> Iterator[Metric]:
        lookups = CounterMetricFamily(
            "ctxc_cache_lookups",
            "Compile cache lookups, by cache and result",
            labels=["cache", "result"],
        )
        size = GaugeMetricFamily("ctxc_cache_bytes", "Bytes held, by cache", labels=["cache"])
        entries = GaugeMetricFamily(
            "ctxc_cache_entries", "Entries held, by cache", labels=["cache"]
        )
        for name, cache in self.caches.items():
            hits, misses, held, count = cache.stats()
            lookups.add_metric([name, "hit"], hits)
            lookups.add_metric([name, "miss"], misses)
            size.add_metric([name], held)
            entries.add_metric([name], count)
        yield from (lookups, size, entries)
