"""The bench's scraper: the server's ``/metrics`` read every 250 ms beside a level, on its own thread.

:class:`LevelScraper` is started and stopped by :class:`backends.load.runner.LoadRunner` around each
configured level. It reads once as the level starts, then at fixed times every ``interval_s`` (a
read that overruns skips the ticks it missed rather than piling up), and once more as the level
ends; ``telemetry.server.gauges.level_summary`` turns those into the level's ``server_metrics``.

A thread, not a task on the load's event loop: a slow or silent endpoint must never delay the
streams being timed, and the parse (a few hundred microseconds on the kept lines) runs off the
loop's path. A read that fails is counted and left out; the level goes on.
"""

from __future__ import annotations

import threading
import time

from backends.transport.prometheus import MetricsEndpoint, MetricsUnavailable
from telemetry.server.gauges import LevelScrapes, Scrape

INTERVAL_S = 0.25


class LevelScraper:
    """Reads ``endpoint`` beside one level at a time (``start`` ... ``stop``); reusable across levels."""

    def __init__(self, endpoint: MetricsEndpoint, interval_s: float = INTERVAL_S) -> None:
        if endpoint.dialect is None:
            raise ValueError("probe the endpoint first (MetricsEndpoint.probe): it decides which server it is")
        self.endpoint = endpoint
        self.interval_s = interval_s
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._before: Scrape | None = None
        self._during: list[Scrape] = []
        self._failed = 0

    def _read(self) -> Scrape | None:
        try:
            return self.endpoint.read()
        except MetricsUnavailable:
            self._failed += 1
            return None

    def _run(self) -> None:
        start = time.monotonic()
        k = 1
        while True:
            due = start + k * self.interval_s
            if self._stop.wait(max(0.0, due - time.monotonic())):
                return
            s = self._read()
            if s is not None and not self._stop.is_set():  # a read that ran past the level's end is not "during"
                self._during.append(s)
            k = max(k + 1, int((time.monotonic() - start) / self.interval_s) + 1)

    def start(self) -> None:
        """Read once now (the level's "before"), then every interval on a thread. Blocking for that first
        read: call it from a thread (``asyncio.to_thread``) when a loop is running."""
        if self._thread is not None:
            raise RuntimeError("the scraper is already running")
        self._before, self._during, self._failed = self._read(), [], 0
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="ttft-scrape", daemon=True)
        self._thread.start()

    def stop(self) -> LevelScrapes | None:
        """Stop the thread and read once more (the level's "after"); None when it was not started."""
        if self._thread is None:
            return None
        self._stop.set()
        self._thread.join()
        self._thread = None
        after = self._read()
        before, self._before = self._before, None
        dialect = self.endpoint.dialect
        if dialect is None:
            return None
        return LevelScrapes(dialect, before, tuple(self._during), after, self._failed)
