"""The client watching itself over one level: event-loop lag (a 10 ms ticker measuring how late it
wakes) and CPU (this process's and the machine's), read by ``telemetry.bench.aggregate.client_bottleneck``
to warn when the client rather than the server limited the figures."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from telemetry.metrics import percentiles

LAG_INTERVAL_S = 0.010


@dataclass
class ClientWatch:
    """Event-loop lag and process CPU for one level."""

    lags_ms: list[float] = field(default_factory=list)
    _task: asyncio.Task[None] | None = None
    _cpu0: float = 0.0
    _t0: float = 0.0

    async def _tick(self) -> None:
        clock = time.perf_counter  # not loop.time(): uvloop's counts whole milliseconds
        while True:
            t = clock()
            await asyncio.sleep(LAG_INTERVAL_S)
            self.lags_ms.append(max(0.0, (clock() - t - LAG_INTERVAL_S) * 1000))

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
