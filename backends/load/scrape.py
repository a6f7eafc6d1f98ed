"""The bench's scraper: the server's ``/metrics`` read every 250 ms beside a level, on its own thread.

:class:`LevelScraper` is started and stopped by :class:`backends.load.runner.LoadRunner` around each
configured level. It reads once as the level starts, then at fixed times every ``interval_s`` (a
read that overruns skips the ticks it missed rather than piling up), and once more as the level
ends; ``telemetry.server.gauges.level_summary`` turns those into the level's ``server_metrics``. The
first and last reads take the server's latency histograms too, whose differences are the level's
(``telemetry.server.histograms``).

A thread, not a task on the load's event loop: a slow or silent endpoint must never delay the
streams being timed, and a read's CPU (under a millisecond: the GET, then the parse of the kept
lines) runs off the loop's path. A read that fails is counted and left out; the level goes on.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import TypeVar

from ...telemetry.server.gauges import LevelScrapes, Scrape
from ..transport.prometheus import MetricsEndpoint, MetricsUnavailable

T = TypeVar("T")

INTERVAL_S = 0.25


@dataclass
class _Run:
    """One level's reads, and the event that ends its thread."""

    stop: threading.Event = field(default_factory=threading.Event)
    before: Scrape | None = None
    during: list[Scrape] = field(default_factory=list)
    failed: int = 0


class LevelScraper:
    """Reads ``endpoint`` beside one level at a time (``start`` ... ``stop``); reusable across levels."""

    def __init__(self, endpoint: MetricsEndpoint, interval_s: float = INTERVAL_S) -> None:
        if endpoint.dialect is None:
            raise ValueError("probe the endpoint first (MetricsEndpoint.probe): it decides which server it is")
        self.endpoint = endpoint
        self.interval_s = interval_s
        self._thread: threading.Thread | None = None
        self._run_of: _Run | None = None

    def _read(self, run: _Run, edge: bool = False) -> Scrape | None:
        try:
            return self.endpoint.read(histograms=edge)  # the histograms at the level's edges, for their deltas
        except MetricsUnavailable:
            run.failed += 1
            return None

    def _run(self, run: _Run) -> None:
        # a level's own state: a thread abandoned with its level never writes into the next one
        stop, during = run.stop, run.during
        start = time.monotonic()
        k = 1
        while True:
            due = start + k * self.interval_s
            if stop.wait(max(0.0, due - time.monotonic())):
                return
            s = self._read(run)
            if s is not None and not stop.is_set():  # a read that ran past the level's end is not "during"
                during.append(s)
            k = max(k + 1, int((time.monotonic() - start) / self.interval_s) + 1)

    def start(self) -> None:
        """Read once now (the level's "before"), then every interval on a thread. Blocking for that first
        read: call it from a thread (``asyncio.to_thread``) when a loop is running."""
        if self._thread is not None:
            raise RuntimeError("the scraper is already running")
        run = self._run_of = _Run()
        run.before = self._read(run, edge=True)
        self._thread = threading.Thread(target=self._run, args=(run,), name="ttft-scrape", daemon=True)
        self._thread.start()

    def abandon(self) -> None:
        """A level cut short (Ctrl-C): the thread is told to stop and left to end on its own (a read in
        flight ends within its timeout); no last read, nothing waited for."""
        if self._run_of is not None:
            self._run_of.stop.set()
        self._thread = self._run_of = None

    def stop(self) -> LevelScrapes | None:
        """Stop the thread and read once more (the level's "after"); None when it was not started."""
        run, thread = self._run_of, self._thread
        if run is None or thread is None:
            return None
        run.stop.set()
        thread.join()
        self._thread = self._run_of = None
        after = self._read(run, edge=True)
        dialect = self.endpoint.dialect
        if dialect is None:
            return None
        return LevelScrapes(dialect, run.before, tuple(run.during), after, run.failed)


async def scraped(scraper: LevelScraper | None, level: Awaitable[T]) -> tuple[T, LevelScrapes | None]:
    """Run ``level`` with ``scraper`` reading beside it: its first read before any request, its last after
    the level ends. Any runner's level (this process, workers, a cluster's drivers) is scraped the same
    way, from here. A level cut short abandons the scraper (no last read, nothing waited for)."""
    if scraper is None:
        return await level, None
    await asyncio.to_thread(scraper.start)
    try:
        res = await level
    except BaseException:
        scraper.abandon()
        raise
    return res, await asyncio.to_thread(scraper.stop)
