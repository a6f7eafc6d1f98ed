"""The client watching itself over one level: event-loop lag (a 10 ms ticker measuring how late it
wakes) and CPU (this process's and the machine's), read by ``telemetry.bench.aggregate.client_bottleneck``
to warn when the client rather than the server limited the figures."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import psutil

from ...telemetry.metrics import percentiles

LAG_INTERVAL_S = 0.010


@dataclass
class ClientWatch:
    """Event-loop lag and process CPU for one level."""

    lags_ms: list[float] = field(default_factory=list)
    # With ``spans``: when each late wake was due and when it came (ns on telemetry.events' clock), so
    # that one turn's share of the lag can be read (:meth:`lag_between`); the oldest are dropped by
    # :meth:`forget_before`. Off for the bench, which reads only the level's percentiles.
    spans: bool = False
    late: deque[tuple[int, int]] = field(default_factory=deque)
    _due_ns: int | None = None  # the wake now awaited: a loop still busy past it is late now
    _task: asyncio.Task[None] | None = None
    _cpu0: float = 0.0
    _t0: float = 0.0

    async def _tick(self) -> None:
        clock = time.perf_counter  # not loop.time(): uvloop's counts whole milliseconds
        step_ns = int(LAG_INTERVAL_S * 1e9)
        while True:
            t = clock()
            if self.spans:
                self._due_ns = time.monotonic_ns() + step_ns
            await asyncio.sleep(LAG_INTERVAL_S)
            if self.spans:
                woke = time.monotonic_ns()
                if self._due_ns is not None and woke > self._due_ns:
                    self.late.append((self._due_ns, woke))
                self._due_ns = None
            else:
                self.lags_ms.append(max(0.0, (clock() - t - LAG_INTERVAL_S) * 1000))

    def lag_between(self, start_ns: int, end_ns: int) -> float:
        """The ms the loop woke late within ``[start_ns, end_ns]`` (telemetry.events' clock), counting a
        wake still overdue now (the loop busy at this moment). Needs ``spans``."""
        total = 0
        overdue = [(self._due_ns, time.monotonic_ns())] if self._due_ns is not None else []
        for due, woke in [*self.late, *overdue]:
            total += max(0, min(woke, end_ns) - max(due, start_ns))
        return total / 1e6

    def forget_before(self, t_ns: int) -> None:
        """Drop the late wakes that ended before ``t_ns`` (no turn waiting then is left to read them)."""
        while self.late and self.late[0][1] < t_ns:
            self.late.popleft()

    def start_ticking(self) -> None:
        """The lag ticker alone (no CPU window), on the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._tick())

    def stop_ticking(self) -> None:
        """Stop the ticker without waiting for it (a loop shutting down cancels what is left)."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        self._due_ns = None

    def start(self) -> None:
        times = psutil.Process().cpu_times()
        self._cpu0 = times.user + times.system
        self._t0 = time.monotonic()
        psutil.cpu_percent(None)  # starts the system-wide window
        self._task = asyncio.get_running_loop().create_task(self._tick())

    async def stop(self) -> dict[str, Any]:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        times = psutil.Process().cpu_times()
        wall = max(time.monotonic() - self._t0, 1e-9)
        cpu = (times.user + times.system - self._cpu0) / wall * 100
        return {
            "loop_lag_ms": percentiles(self.lags_ms).to_dict(),
            "cpu_percent": cpu,  # this process, % of one core
            "host_cpu_percent": psutil.cpu_percent(None),  # the whole machine, % of all cores
            "cpus": psutil.cpu_count(),
            "lag_samples": len(self.lags_ms),
        }
