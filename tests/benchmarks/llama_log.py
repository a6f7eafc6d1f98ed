"""llama-server's own per-request timings, read from its log: what the server says it did during one tool's run.

llama-server prints, per finished task, lines such as::

    0.31.250.164 I slot print_timing: id  3 | task 246 | prompt eval time =  1348.17 ms /  86 tokens (...)
    0.31.250.220 I slot print_timing: id  3 | task 246 |        eval time =   971.69 ms /  32 tokens (...)

(the leading stamp is minutes.seconds.ms.us since start; a ``launch_slot_`` line marks when a task
took its slot). Its eval time runs from the first generated token to the last, so the server's own
TPOT in the benchmark's sense (and in ttft's records) is eval ms / (tokens - 1).

A benchmark notes the log's size before and after each tool run (:func:`settle`) and reads only that
slice, so each tool is compared with what the server did while that tool alone was driving it.
"""

from __future__ import annotations

import re
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

_STAMP = r"(?P<stamp>\d+\.\d{2}\.\d{3}\.\d{3})"
_TIMING = re.compile(
    _STAMP
    + r".*?\| task (?P<task>\d+) \|\s+(?P<kind>prompt eval|eval) time =\s+(?P<ms>[\d.]+) ms /\s+(?P<n>\d+) tokens"
)
_LAUNCH = re.compile(_STAMP + r".*?launch_slot_.*?\| task (?P<task>\d+) \|")


def _seconds(stamp: str) -> float:
    mins, secs, ms, us = (int(x) for x in stamp.split("."))
    return mins * 60 + secs + ms / 1e3 + us / 1e6


@dataclass(frozen=True)
class Task:
    """One finished request as the server timed it."""

    task: int
    prompt_ms: float
    prompt_n: int  # tokens the server evaluated: a prompt-cache hit shows as a small number
    eval_ms: float
    eval_n: int
    launched_s: float | None  # server clock (s since start) when it took a slot
    ended_s: float

    @property
    def tpot_ms(self) -> float | None:
        return self.eval_ms / (self.eval_n - 1) if self.eval_n > 1 else None


def parse(text: str) -> list[Task]:
    """The tasks whose timing lines are complete in ``text``, in the order they finished."""
    launched: dict[int, float] = {}
    prompt: dict[int, tuple[float, int]] = {}
    tasks: list[Task] = []
    for line in text.splitlines():
        if m := _LAUNCH.search(line):
            launched[int(m["task"])] = _seconds(m["stamp"])
        elif m := _TIMING.search(line):
            tid, ms, n = int(m["task"]), float(m["ms"]), int(m["n"])
            if m["kind"] == "prompt eval":
                prompt[tid] = (ms, n)
            elif tid in prompt:
                p_ms, p_n = prompt.pop(tid)
                tasks.append(Task(tid, p_ms, p_n, ms, n, launched.get(tid), _seconds(m["stamp"])))
    return tasks


def size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def read_slice(path: Path, start: int, end: int) -> str:
    with path.open("rb") as f:
        f.seek(start)
        return f.read(max(0, end - start)).decode("utf-8", "replace")


def settle(path: Path, start: int, expected: int, timeout_s: float = 5.0, quiet_s: float = 0.5) -> int:
    """The log's size once the slice from ``start`` holds ``expected`` tasks or stops growing for ``quiet_s``.

    The server writes a task's timing as it releases the slot, which can be just after the client
    has its last chunk and has exited."""
    deadline = time.monotonic() + timeout_s
    last, still_since = size(path), time.monotonic()
    while time.monotonic() < deadline:
        if len(parse(read_slice(path, start, last))) >= expected:
            return last
        time.sleep(0.1)
        now = size(path)
        if now != last:
            last, still_since = now, time.monotonic()
        elif time.monotonic() - still_since >= quiet_s:
            break
    return last


@dataclass(frozen=True)
class ServerRun:
    """The server's own figures over one tool run's measured requests (its warm-up ones dropped)."""

    tasks: int
    tpot_p50_ms: float | None
    prompt_p50_ms: float | None
    tokens_per_s: float | None  # generated tokens / (last end - first launch), on the server's clock
    cache_hits: int  # tasks whose prompt the server mostly took from its cache


def summarise(tasks: list[Task], skip: int = 0, fresh_prompt_n: float | None = None) -> ServerRun:
    """``fresh_prompt_n``: fewer prompt tokens evaluated than this is a cache hit (default: half the median)."""
    measured = tasks[skip:]
    tpots = [t.tpot_ms for t in measured if t.tpot_ms is not None]
    if fresh_prompt_n is None:
        fresh_prompt_n = statistics.median(t.prompt_n for t in measured) / 2 if measured else 0
    launched = [t.launched_s for t in measured if t.launched_s is not None]
    tput = None
    if measured and len(launched) == len(measured):
        span = max(t.ended_s for t in measured) - min(launched)
        tput = sum(t.eval_n for t in measured) / span if span > 0 else None
    return ServerRun(
        tasks=len(measured),
        tpot_p50_ms=statistics.median(tpots) if tpots else None,
        prompt_p50_ms=statistics.median(t.prompt_ms for t in measured) if measured else None,
        tokens_per_s=tput,
        cache_hits=sum(t.prompt_n < fresh_prompt_n for t in measured),
    )
