"""What one level of the load driver hands back: its progress as it runs, each finished request (its
record, turned into the ``ttft.turn`` dict only once the level is over), its result, or, cut short, the
records it had."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ...telemetry.bench.requests import Mode
from ...telemetry.record import TurnRecord


@dataclass
class Progress:
    """What a live progress line shows; sent after every finished request."""

    mode: Mode
    level: float
    level_index: int
    levels: int
    done: int
    total: int
    errors: int
    in_flight: int
    elapsed_s: float
    warmup: bool = False
    last_ttft_ms: float | None = None
    output_tokens: int = 0
    nodes: int = 0  # a cluster run: the nodes whose drivers run the level (0: this machine alone)


class LevelCancelled(asyncio.CancelledError):
    """A level cut short (Ctrl-C, SIGTERM): its finished turns and, recorded as cancelled with what had
    arrived, the ones in flight. Still a CancelledError, so cancellation goes on as usual."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        super().__init__("level cancelled")
        self.records = records


@dataclass
class LevelResult:
    mode: Mode
    level: float
    records: list[dict[str, Any]]
    client: dict[str, Any]
    wall_s: float


@dataclass(frozen=True, slots=True)
class Finished:
    """One finished request, its record turned into the ``ttft.turn`` dict only once the level is over.

    Streams of one level end together (a batching server finishes them on one step): converting
    each record as it ends would stall every stream still running for that burst, inside the
    figures being measured.
    """

    record: TurnRecord
    called_ns: int
    origin_ns: int

    @property
    def sent_at_ms(self) -> float:
        """The send in ms since the level started (when the stream was called, for one never sent)."""
        sent = self.record.timestamps.sent if self.record.timestamps.sent is not None else self.called_ns
        return (sent - self.origin_ns) / 1e6

    def to_dict(self) -> dict[str, Any]:
        d = self.record.to_dict()
        d["extra"]["bench"]["sent_at_ms"] = self.sent_at_ms
        return d


def as_dicts(done: list[Finished]) -> list[dict[str, Any]]:
    """The level's records as ``ttft.turn`` dicts, in request order."""
    records = [f.to_dict() for f in done]
    records.sort(key=lambda r: r["extra"]["bench"]["index"])
    return records
