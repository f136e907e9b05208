"""What an imported document must hold together, checked record by record as it streams.

The ledger keeps only what the checks need (runs of seqs, the seqs archives hold, ids seen), so a
long session is checked without holding its messages. Each problem names its place: the record's
``where`` (``messages[3]`` in a document, line 4 of a stream) and the field.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from app.domain.errors import InvalidInput, Path
from app.domain.messages import Message
from app.domain.tool_payloads.compaction import META_KEY, PREVIEW_KEY, payload_sha256, payload_size

ORDER = ("message", "compaction", "payload", "compile")


def refuse(where: Path, message: str) -> InvalidInput:
    return InvalidInput([(where, message)])


def written_by_compaction(message: Message) -> bool:
    """A summary, or a message a tool-payload compaction rewrote (services.sessions.originals)."""
    if "compaction_id" in message.metadata:
        return True
    return any(
        META_KEY in part.metadata or PREVIEW_KEY in part.metadata for part in message.content
    )


@dataclass
class Run:
    """Consecutive live seqs ``first..last``; ``where`` is the message holding ``first``."""

    first: int
    last: int
    where: Path


@dataclass
class Ledger:
    last_seq: int
    strict: bool  # v2: no seq gaps; v1 documents did not carry archives and may have gaps
    runs: list[Run] = field(default_factory=list)
    firsts: list[int] = field(default_factory=list)  # of the runs, for bisection
    rewritten: set[int] = field(default_factory=set)  # live seqs a compaction wrote
    archived: set[int] = field(default_factory=set)
    indexed: set[int] = field(default_factory=set)  # archived seqs whose tool parts are indexed
    summaries: list[tuple[int, Path]] = field(default_factory=list)
    ids: dict[str, set[str]] = field(default_factory=lambda: {k: set() for k in ORDER})
    stage: int = 0

    def record(self, where: Path, kind: str) -> None:
        """Records come in the order messages, compactions, payloads, compiles."""
        stage = ORDER.index(kind)
        if stage < self.stage:
            raise refuse(
                where,
                f"a {kind} record after {ORDER[self.stage]} records: records "
                "come in the order message, compaction, payload, compile",
            )
        self.stage = stage

    def message(self, where: Path, seq: int, written: bool) -> None:
        last = self.runs[-1].last if self.runs else 0
        if seq <= last:
            raise refuse((*where, "seq"), f"seq {seq} after seq {last}: seqs must increase")
        if seq > self.last_seq:
            raise refuse(
                (*where, "seq"), f"seq {seq} is beyond the session's last_seq {self.last_seq}"
            )
        if self.runs and seq == last + 1:
            self.runs[-1].last = seq
        else:
            self.runs.append(Run(seq, seq, where))
            self.firsts.append(seq)
        if written:
            self.rewritten.add(seq)

    def live_original(self, seq: int) -> bool:
        """Whether the live message at ``seq`` is the one first stored there."""
        return self._live(seq) and seq not in self.rewritten

    def _live(self, seq: int) -> bool:
        at = bisect_right(self.firsts, seq) - 1
        return at >= 0 and self.runs[at].last >= seq

    def compaction(self, where: Path, fields: dict[str, Any]) -> None:
        self._unique(where, "compaction", fields["id"])
        low, high = fields["seq_from"], fields["seq_to"]
        for i, entry in enumerate(fields["archived"]):
            seq = entry["seq"]
            if seq > self.last_seq or not (low or seq) <= seq <= (high or seq):
                raise refuse(
                    (*where, "archived", i, "seq"),
                    f"seq {seq} references nothing: outside the compaction's seqs "
                    f"({low} to {high}) or beyond last_seq {self.last_seq}",
                )
            self.archived.add(seq)
        if fields["summary_seq"] is not None:
            self.summaries.append((fields["summary_seq"], (*where, "summary_seq")))

    def payload(self, where: Path, fields: dict[str, Any]) -> None:
        self._unique(where, "payload", fields["sha256"], "sha256")
        value = fields["value"]
        if payload_sha256(value) != fields["sha256"]:
            raise refuse((*where, "sha256"), "does not match the sha256 of the value")
        if payload_size(value) != fields["bytes"]:
            raise refuse((*where, "bytes"), f"the value is {payload_size(value)} bytes")

    def compile(self, where: Path, fields: dict[str, Any]) -> None:
        self._unique(where, "compile", fields["id"])
        for name in ("seq_from", "seq_to"):
            if (fields[name] or 0) > self.last_seq:
                raise refuse((*where, name), f"beyond the session's last_seq {self.last_seq}")

    def _unique(self, where: Path, kind: str, value: str, name: str = "id") -> None:
        if value in self.ids[kind]:
            raise refuse((*where, name), f"a second {kind} {value!r}")
        self.ids[kind].add(value)

    def finish(self, session_where: Path) -> None:
        """The checks only the whole document can answer: every summary is held by a message,
        and (v2) every seq from the first held to last_seq is held by one, live or archived."""
        for seq, where in self.summaries:
            if not self.held(seq):
                raise refuse(where, f"seq {seq} references nothing: no message holds it")
        if not self.strict:
            return
        low = min(
            [*self.firsts[:1], *([min(self.archived)] if self.archived else [])],
            default=self.last_seq + 1,
        )
        edges: Sequence[tuple[int, int, Path]] = [
            (prev.last + 1, run.first, run.where)
            for prev, run in zip(self.runs, self.runs[1:], strict=False)
        ]
        if self.runs:
            edges = [(low, self.runs[0].first, self.runs[0].where), *edges]
            edges.append((self.runs[-1].last + 1, self.last_seq + 1, (*session_where, "last_seq")))
        elif self.last_seq:
            edges = [(low, self.last_seq + 1, (*session_where, "last_seq"))]
        for start, stop, where in edges:
            seq = start  # at most as many steps as archived seqs: a gap is found, not walked
            while seq < stop and seq in self.archived:
                seq += 1
            if seq < stop:
                raise refuse(
                    where, f"seq {seq} is missing: no message or archived message holds it"
                )

    def held(self, seq: int) -> bool:
        return self._live(seq) or seq in self.archived
