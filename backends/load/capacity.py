"""The capacity search's driver: runs the probes :class:`telemetry.bench.capacity.Search` names.

Each probe is a load level run through the bench's :class:`backends.load.runner.LoadRunner` (so its
requests are ordinary bench records, tagged ``extra.bench``). A probe starts with enough requests
for its interval to be able to pass (and, closed loop, at least two per user); while undecided it
sends as many again, up to ``max_requests`` (by default UNDECIDED_GROWTH times its first
batch). The figures and the verdict are telemetry's.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...telemetry.bench import aggregate as agg
from ...telemetry.bench import capacity as cap
from ...telemetry.bench.requests import BenchTurn, Mode, read_bench
from ...telemetry.server.gauges import level_summary
from .outcome import LevelResult
from .runner import Runner
from .scrape import LevelScraper

UNDECIDED_GROWTH = 8


@dataclass
class Probe:
    level: float
    aggregate: dict[str, Any]  # telemetry.bench.aggregate.aggregate_level of all its requests
    result: cap.ProbeResult
    records: list[dict[str, Any]] = field(default_factory=list)  # as logged
    unreadable: int = 0  # of those, records that did not read as bench requests (left out of the figures)


@dataclass
class CapacityRun:
    mode: Mode
    objectives: cap.Objectives
    search: cap.Search
    probes: list[Probe]

    @property
    def capacity(self) -> float | None:
        return self.search.passed

    def levels(self) -> list[dict[str, Any]]:
        """The probes' aggregates in order of load (the trade-off chart's points)."""
        return [p.aggregate for p in sorted(self.probes, key=lambda p: p.level)]

    def knee(self) -> cap.Knee | None:
        return cap.knee([(p.level, p.aggregate.get("output_throughput") or 0.0) for p in self.probes])

    def summary(self) -> dict[str, Any]:
        """``summary.json``'s ``capacity`` block (its keys are listed in the README's bench section)."""
        at = next((p for p in self.probes if p.level == self.capacity), None)
        knee_at = self.knee()
        undecided = sorted(p.level for p in self.probes if p.result.verdict == "undecided")
        goodput = at.aggregate.get("goodput") if at else None
        limit_reached = self.capacity is not None and self.search.missed is None
        return {
            "mode": self.mode,
            "objectives": [t.to_dict() for t in self.objectives.terms],
            "attainment": self.objectives.attainment,
            "confidence": 0.95,
            "capacity": self.capacity,
            "capacity_goodput": goodput,
            "capacity_output_throughput": at.aggregate.get("output_throughput") if at else None,
            "first_miss": self.search.missed,
            "resolution": self.search.step(),
            "limit": self.search.limit,
            "limit_reached": limit_reached,
            "knee": None if knee_at is None else knee_at.to_dict(),
            "undecided": undecided,
            "probes": [p.result.to_dict() for p in self.probes],
            "conclusion": cap.conclusion(
                self.capacity,
                mode=self.mode,
                objectives=self.objectives,
                goodput=goodput,
                knee_at=knee_at,
                undecided=undecided,
                start=self.search.start,
                limit_reached=limit_reached,
            ),
        }


def _worst_client(results: list[LevelResult]) -> dict[str, Any]:
    def lag(r: LevelResult) -> float:
        return float((r.client.get("loop_lag_ms") or {}).get("p99") or 0.0)

    return max(results, key=lag).client if results else {}


async def find_capacity(
    runner: Runner,
    objectives: cap.Objectives,
    *,
    start: float,
    limit: float,
    requests: int,
    max_requests: int | None = None,
    resolution: float = 0.10,
    on_records: Callable[[list[dict[str, Any]]], None] | None = None,
    on_probe: Callable[[Probe], None] | None = None,
    scraper: LevelScraper | None = None,
) -> CapacityRun:
    """Search the largest load meeting ``objectives`` (see :mod:`telemetry.bench.capacity`). With a
    ``scraper``, the server's gauges are read beside each probe, from before its first request to after
    its last, as beside a level."""
    mode = runner.cfg.mode
    search = cap.Search(start=start, integer=mode == "concurrency", limit=limit, resolution=resolution)
    run = CapacityRun(mode, objectives, search, [])
    slo = objectives.slo()
    next_index = 0
    runs = 0
    while (level := search.next_level()) is not None:
        n = max(requests, objectives.min_requests(), 2 * int(level) if mode == "concurrency" else 0)
        most = max_requests or UNDECIDED_GROWTH * n
        records: list[dict[str, Any]] = []
        turns: list[BenchTurn] = []
        unreadable = 0
        results: list[LevelResult] = []
        offset_ms = 0.0
        if scraper is not None:
            await asyncio.to_thread(scraper.start)
        while True:
            n = runner.cfg.plan().requests_for(n)  # whole conversations: their requests are numbered apart
            try:
                res = await runner.probe(level, requests=n, level_index=runs, start_index=next_index)
            except BaseException:
                if scraper is not None:
                    scraper.abandon()
                raise
            runs += 1
            next_index += n
            # One probe on one time axis: a second run at the level is placed after the first, so
            # throughput is its tokens over the whole probe (sent_at_ms counts from each run's start).
            for r in res.records:
                r["extra"]["bench"]["sent_at_ms"] += offset_ms
            offset_ms += res.wall_s * 1000
            results.append(res)
            records.extend(res.records)
            read = read_bench(res.records)
            turns.extend(read.turns)
            unreadable += read.unreadable
            if on_records is not None:
                on_records(res.records)
            verdict = cap.judge(turns, objectives, level)
            n = len(records)  # once more: doubles the requests behind the interval
            if verdict.verdict != "undecided" or len(records) + n > most:
                break
        gauges = await asyncio.to_thread(scraper.stop) if scraper is not None else None
        a = agg.aggregate_level(turns, level=level, mode=mode, slo=slo, client=_worst_client(results))
        if gauges is not None:
            a["server_metrics"] = level_summary(gauges)
        probe = Probe(level, a, verdict, records, unreadable)
        run.probes.append(probe)
        search.record(level, verdict.verdict)
        if on_probe is not None:
            on_probe(probe)
    return run
