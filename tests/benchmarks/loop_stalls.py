"""What holds an event loop up: a watchdog thread that samples the loop thread's stack while it stalls.

The loop beats (a callback every ``beat_ms``); a thread beside it checks the last beat every half
millisecond, and while the loop is more than ``threshold_ms`` late it records the loop thread's
innermost frames (``sys._current_frames``), once per millisecond of the stall. Summed by frame, the
samples say where the loop spent the time it owed its timers: a function of ours, a library's, the
garbage collector, or ``select``/``epoll`` (the loop was idle and the operating system did not run
the process: another program's CPU, not ours).

The watchdog needs the GIL to take a sample, so while it runs the interpreter's switch interval is
lowered to 0.5 ms (``sys.setswitchinterval``; restored after): a loop thread running Python hands
the GIL over within that, and the sample shows the Python it was running. A loop thread in a C call
that holds the GIL is sampled just after the call; one waiting in ``epoll_wait``, or in C code that
released the GIL (a socket read, ``poll``), is sampled at once, in the frame that made the call.
The stall's length is measured from the beat either way. A
stall inside the event loop's own C code (uvloop) shows only ``run`` frames: for those, the loop
thread's scheduler counters (``/proc/self/task/TID/schedstat``: time on a CPU, time runnable but
waiting for one) say whether it was working, waiting for a CPU that other programs held, or asleep
(in ``epoll_wait`` past its timer) across each stall.
Used by ``client_capacity.py --stalls MS``; usable alone::

    sampler = StallSampler(threshold_ms=3)
    sampler.start(loop)
    ...
    sampler.stop()
    print(sampler.report())
"""

from __future__ import annotations

import asyncio
import collections
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Stall:
    began: float  # perf_counter of the last beat before it
    length_ms: float = 0.0
    sites: list[str] = field(default_factory=list)  # one per sample
    base: tuple[int, int] | None = None  # the loop thread's (on-CPU ns, run-queue wait ns) at the beat
    on_cpu_ms: float = 0.0
    waiting_ms: float = 0.0  # runnable, but another program held the CPU


def _site(frame: object, depth: int) -> str:
    """The innermost frames as ``file:function`` names, this project's first (where we can act)."""
    stack = traceback.extract_stack(frame)[::-1]  # type: ignore[arg-type]
    names = []
    for fs in stack[:depth]:
        path = Path(fs.filename)
        try:
            short = str(path.relative_to(ROOT))
        except ValueError:
            short = "/".join(path.parts[-2:])
        names.append(f"{short}:{fs.name}")
    return " < ".join(names)


class StallSampler:
    def __init__(self, threshold_ms: float = 3.0, beat_ms: float = 1.0, depth: int = 4) -> None:
        self.threshold_s = threshold_ms / 1000
        self.beat_s = beat_ms / 1000
        self.depth = depth
        self.stalls: list[Stall] = []
        self._last = time.perf_counter()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop_thread = threading.get_ident()
        self._handle: asyncio.TimerHandle | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._schedstat: Path | None = None
        self._switch = sys.getswitchinterval()
        self._readings: collections.deque[tuple[float, tuple[int, int]]] = collections.deque(maxlen=64)

    def _sched(self) -> tuple[int, int] | None:
        if self._schedstat is None:
            return None
        try:
            cpu, wait, _ = self._schedstat.read_text().split()
        except (OSError, ValueError):
            return None
        return int(cpu), int(wait)

    def _beat(self) -> None:
        self._last = time.perf_counter()
        assert self._loop is not None
        self._handle = self._loop.call_later(self.beat_s, self._beat)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(0.0005)
        self._loop = loop
        self._loop_thread = threading.get_ident()
        stat = Path(f"/proc/self/task/{threading.get_native_id()}/schedstat")
        self._schedstat = stat if stat.exists() else None
        self._beat()
        self._thread = threading.Thread(target=self._watch, name="stall-sampler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        sys.setswitchinterval(self._switch)
        if self._handle is not None:
            self._handle.cancel()
        if self._thread is not None:
            self._thread.join(1)

    def _watch(self) -> None:
        current: Stall | None = None
        next_sample = 0.0
        while not self._stop.is_set():
            time.sleep(0.0005)
            now = time.perf_counter()
            sched = self._sched()
            if sched is not None:
                self._readings.append((now, sched))
            last = self._last
            late = now - last - self.beat_s
            if late < self.threshold_s:
                if current is not None:
                    self._close(current, sched)
                    current = None
                continue
            if current is None or current.began != last:
                if current is not None:
                    self._close(current, sched)
                current = Stall(last, base=self._reading_at(last))
                next_sample = 0.0
            current.length_ms = late * 1000
            if now >= next_sample:
                frame = sys._current_frames().get(self._loop_thread)
                if frame is not None:
                    current.sites.append(_site(frame, self.depth))
                next_sample = now + 0.001

    def _reading_at(self, t: float) -> tuple[int, int] | None:
        """The loop thread's counters as last read at or before ``t`` (the stall's last beat)."""
        best = None
        for at, reading in self._readings:
            if at > t:
                break
            best = reading
        return best

    def _close(self, stall: Stall, now: tuple[int, int] | None) -> None:
        if stall.base is not None and now is not None:
            stall.on_cpu_ms = (now[0] - stall.base[0]) / 1e6
            stall.waiting_ms = (now[1] - stall.base[1]) / 1e6
        self.stalls.append(stall)

    def report(self, top: int = 12) -> str:
        """The stalls' count, their total and longest, and the sites most samples fell in."""
        if not self.stalls:
            return f"no stall over {self.threshold_s * 1000:g} ms"
        total = sum(s.length_ms for s in self.stalls)
        lines = [
            f"{len(self.stalls)} stalls over {self.threshold_s * 1000:g} ms, {total:.0f} ms in all, longest "
            f"{max(s.length_ms for s in self.stalls):.1f} ms"
        ]
        timed = [s for s in self.stalls if s.base is not None]
        if timed:
            span = sum(s.length_ms + self.beat_s * 1000 for s in timed)  # from the beat to the end
            cpu = sum(s.on_cpu_ms for s in timed)
            wait = sum(s.waiting_ms for s in timed)
            lines.append(
                f"  the loop thread across them: {cpu:.0f} ms on a CPU (working), {wait:.0f} ms waiting for a CPU "
                f"(other programs), {max(0.0, span - cpu - wait):.0f} ms neither (asleep)"
            )
        lines.append("  where it was (samples, one per ms of stall):")
        counts = collections.Counter(site for s in self.stalls for site in s.sites)
        n = sum(counts.values()) or 1
        for site, k in counts.most_common(top):
            lines.append(f"  {k:5d} ({k / n:4.0%})  {site}")
        return "\n".join(lines)
