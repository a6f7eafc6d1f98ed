"""A load run's requests as typed records: each ``ttft.turn`` with the load driver's ``extra.bench`` tags.

The load driver tags every request it sends (``extra.bench``): its level and mode, its index in
the run, whether it was a warm-up, and ``sent_at_ms``, its send time in ms since the level
started, stamped from the same monotonic clock as the record's own events; and what its workload
asked of it (the lengths drawn, its conversation and turn, its shared prefix). Those tags are read
once, here, into :class:`BenchInfo`; aggregation reads fields, never string paths. Records come
back from disk (``ttft report``) or from worker processes, so a record that does not read is
counted and named, never a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from ..metrics import NS_PER_MS
from ..record import TurnRecord
from ..typed_read import RecordError, build, bulk_read, kind_of

# How a load run paces its requests: closed loop (``concurrency`` users, each sending on as its last
# answer ends) or open loop (Poisson arrivals at a ``rate`` per second).
Mode = Literal["concurrency", "rate", "trace"]


@dataclass(frozen=True, slots=True)
class BenchInfo:
    """What the load driver wrote under ``extra.bench`` (absent on a record no bench sent)."""

    level: float | None = None  # the concurrency or the rate of the request's level
    mode: Mode = "concurrency"
    index: int | None = None  # the request's place in the run
    warmup: bool = False
    sent_at_ms: float | None = None  # the send, in ms since the level started
    scheduled_at_ms: float | None = None  # when an open-loop schedule wanted it sent
    run_id: str | None = None
    worker: int | None = None
    # What the workload asked of it (telemetry.bench.workload): the lengths drawn, its place in a
    # conversation, the shared prefix it began with, the closed-loop user who sent it.
    input_tokens: int | None = None  # tokens of its new user text (a trace's: the whole prompt)
    output_tokens: int | None = None  # the max_tokens asked
    conversation: int | None = None  # the index of its conversation's first request
    turn: int | None = None  # 1 for a conversation's first turn
    turns: int | None = None
    prefix: int | None = None
    user: int | None = None
    # A request of the probe user beside the load (``--probe-rate``, telemetry.bench.probe): kept out of
    # the load's figures, summarised apart.
    probe: bool = False
    probe_rate: float | None = None


@dataclass(frozen=True, slots=True)
class BenchTurn:
    """One request of a load run."""

    record: TurnRecord
    bench: BenchInfo

    @classmethod
    def from_dict(cls, data: object) -> BenchTurn:
        """The request a ``ttft.turn`` dict describes; ``RecordError`` naming the field that does not read."""
        record = TurnRecord.from_dict(data)
        tags = record.extra.get("bench")
        if tags is not None and not isinstance(tags, dict):
            raise RecordError(f"extra.bench is {kind_of(tags)}, not an object")
        return cls(record, build(BenchInfo, tags or {}, "extra.bench"))


@dataclass
class BenchRead:
    """The requests that read, and how many did not (with the first reason)."""

    turns: list[BenchTurn] = field(default_factory=list)
    unreadable: int = 0
    first_problem: str = ""

    def message(self) -> str | None:
        """One sentence for the records left out, or None."""
        if not self.unreadable:
            return None
        n = self.unreadable
        return f"left out {n} bench record{'s' if n != 1 else ''} that could not be read ({self.first_problem})"


def read_bench(dicts: Iterable[object]) -> BenchRead:
    """Each dict as a :class:`BenchTurn`; one that does not read is counted, not raised."""
    out = BenchRead()
    with bulk_read():
        for d in dicts:
            try:
                out.turns.append(BenchTurn.from_dict(d))
            except RecordError as exc:
                out.unreadable += 1
                out.first_problem = out.first_problem or str(exc)
    return out


def level_label(mode: str, level: float) -> str:
    """A level as tables and charts name it: ``c=4`` users, ``2/s`` offered, ``trace x2`` (a trace's speedup)."""
    if mode == "rate":
        return f"{level:g}/s"
    if mode == "trace":
        return f"trace x{level:g}"
    return f"c={level:g}"


def measured(turns: Iterable[BenchTurn]) -> list[BenchTurn]:
    """Drop warm-up requests."""
    return [t for t in turns if not t.bench.warmup]


def group_levels(turns: Iterable[BenchTurn]) -> list[tuple[str, float, list[BenchTurn]]]:
    """Split a bench's requests back into (mode, level, requests), in the order levels ran."""
    groups: dict[tuple[str, float], list[BenchTurn]] = {}
    for t in turns:
        if t.bench.level is None:
            continue
        groups.setdefault((t.bench.mode, t.bench.level), []).append(t)
    return [(mode, level, recs) for (mode, level), recs in groups.items()]


def _iso_ms(text: str) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp() * 1000
    except ValueError:
        return None


def span_ms(turns: Sequence[BenchTurn]) -> tuple[float, float] | None:
    """(first send, last response) in ms on a common axis, or None with nothing to time.

    Without ``sent_at_ms`` (a record no load driver stamped) the wall clock of ``started_at`` stands in.
    """
    starts: list[float] = []
    ends: list[float] = []
    for t in turns:
        sent = t.bench.sent_at_ms
        if sent is None:
            sent = _iso_ms(t.record.started_at)
        if sent is None:
            continue
        ts = t.record.timestamps
        end = ts.end if ts.end is not None else ts.last_token
        starts.append(sent)
        ends.append(sent + (end / NS_PER_MS if end else 0.0))
    if not starts:
        return None
    return min(starts), max(ends)
