"""llama-server's own per-request timings, read from its log: what the server says it did during one tool's run.

llama-server prints, per finished task, lines such as::

    0.31.250.164 I slot print_timing: id  3 | task 246 | prompt eval time =  1348.17 ms /  86 tokens (...)
    0.31.250.220 I slot print_timing: id  3 | task 246 |        eval time =   971.69 ms /  32 tokens (...)

(the leading stamp is minutes.seconds.ms.us since start; a ``launch_slot_`` line marks when a task
took its slot, a ``release`` line its ``n_tokens`` in the slot at the end). Its eval time runs from the
first generated token to the last, so the server's own TPOT in the benchmark's sense (and in ttft's
records) is eval ms / (tokens - 1). The prompt tokens it took from the slot's cache (``timings.cache_n``:
a conversation's history) are what the slot held less what it evaluated: ``n_tokens - prompt_n -
(eval_n - 1)`` (the last token generated is never evaluated).

A request's wait for the server (:func:`normalise`): llama-server runs every slot on one loop, so a
request that arrives while another's prompt is being evaluated waits for the rest of that prefill
before it is launched, a wait no figure of the server's names. It is the task's launch against the
request's send time: the two clocks are set against each other by the run's least launch-minus-send
(a request that found the loop idle, as a run's first always does), so the wait is that request's
launch-minus-send above the idle one's. A tool's TTFT over (that wait + the server's prompt eval) is
then a per-request figure that no longer depends on which requests happened to wait.

A benchmark notes the log's size before and after each tool run (:func:`settle`) and reads only that
slice, so each tool is compared with what the server did while that tool alone was driving it.
"""

from __future__ import annotations

import dataclasses
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
_RELEASE = re.compile(r"\| task (?P<task>\d+) \| stop processing: n_tokens = (?P<n>\d+)")


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
    slot_tokens: int | None = None  # n_tokens in the slot when it was released

    @property
    def cache_n(self) -> int | None:
        """Prompt tokens taken from the slot's cache (llama-server's ``timings.cache_n``), when released."""
        if self.slot_tokens is None:
            return None
        return max(0, self.slot_tokens - self.prompt_n - max(self.eval_n - 1, 0))

    @property
    def tpot_ms(self) -> float | None:
        return self.eval_ms / (self.eval_n - 1) if self.eval_n > 1 else None


def parse(text: str) -> list[Task]:
    """The tasks whose timing lines are complete in ``text``, in the order they finished."""
    launched: dict[int, float] = {}
    prompt: dict[int, tuple[float, int]] = {}
    released: dict[int, int] = {}
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
        elif m := _RELEASE.search(line):
            released[int(m["task"])] = int(m["n"])
    return [dataclasses.replace(t, slot_tokens=released.get(t.task)) for t in tasks]


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
    reused: int = 0  # tasks that took any of their prompt from the slot's cache (cache_n > 0: history)
    reused_tokens: tuple[int, ...] = ()  # those tasks' cache_n


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
        reused=sum(1 for t in measured if t.cache_n),
        reused_tokens=tuple(t.cache_n for t in measured if t.cache_n),
    )


@dataclass(frozen=True)
class Sent:
    """One request as the tool saw it: its send time (any clock of the tool's, in s: only differences
    count), its TTFT, and, where the tool kept llama-server's ``timings``, its prompt figures (a join
    by them needs no ordering)."""

    sent_s: float
    ttft_ms: float
    prompt_ms: float | None = None
    prompt_n: int | None = None


def join(tasks: list[Task], sent: list[Sent]) -> list[tuple[Sent, Task]] | None:
    """Each request with the task the server ran for it, or None when they cannot be told apart.

    With the server's timings on every request: by its prompt eval (ms to 0.01, as the log prints it,
    and tokens). Otherwise by order: llama-server numbers tasks as requests arrive, so the requests in
    order of sending are the tasks in order of id (the counts must agree)."""
    if sent and all(s.prompt_ms is not None and s.prompt_n is not None for s in sent):
        by_timing = {(round(t.prompt_ms, 2), t.prompt_n): t for t in tasks}
        pairs = [(s, by_timing.get((round(s.prompt_ms or 0.0, 2), s.prompt_n or 0))) for s in sent]
        if all(t is not None for _, t in pairs) and len({id(t) for _, t in pairs}) == len(pairs):
            return [(s, t) for s, t in pairs if t is not None]
    if len(tasks) != len(sent):
        return None
    return list(zip(sorted(sent, key=lambda s: s.sent_s), sorted(tasks, key=lambda t: t.task), strict=True))


@dataclass(frozen=True)
class PerRequest:
    """One request normalised by the server's own account of it."""

    ttft_ms: float
    wait_ms: float  # launched later than an idle server would have launched it (another's prefill)
    prompt_ms: float
    cache_n: int | None

    @property
    def ratio(self) -> float | None:
        """The tool's TTFT over what the server accounts for: ~1, a little over (HTTP, the tool's reader)."""
        server = self.wait_ms + self.prompt_ms
        return self.ttft_ms / server if server > 0 else None

    @property
    def rest_ms(self) -> float:
        """The tool's TTFT less the server's wait and prompt eval: HTTP, tokenizing, the tool's reader."""
        return self.ttft_ms - self.wait_ms - self.prompt_ms


def normalise(pairs: list[tuple[Sent, Task]]) -> list[PerRequest]:
    """Each joined request's wait (launch - send, above the run's least: see the module doc) beside its
    prompt eval and TTFT. Tasks without a launch line are left out."""
    gaps = [(s, t, t.launched_s - s.sent_s) for s, t in pairs if t.launched_s is not None]
    if not gaps:
        return []
    idle = min(g for _, _, g in gaps)
    return [PerRequest(s.ttft_ms, (g - idle) * 1000, t.prompt_ms, t.cache_n) for s, t, g in gaps]


@dataclass(frozen=True)
class Normalised:
    """One tool run's requests normalised: the median of TTFT / (wait + prompt eval), the rest in ms, and
    how many waited for another's prefill (more than ``WAITED_MS``)."""

    requests: int
    ratio_p50: float | None
    rest_p50_ms: float | None
    rest_max_ms: float | None
    waited: int
    wait_max_ms: float


WAITED_MS = 5.0


def summarise_requests(reqs: list[PerRequest]) -> Normalised:
    ratios = [r for q in reqs if (r := q.ratio) is not None]
    rests = [q.rest_ms for q in reqs]
    return Normalised(
        requests=len(reqs),
        ratio_p50=statistics.median(ratios) if ratios else None,
        rest_p50_ms=statistics.median(rests) if rests else None,
        rest_max_ms=max(rests) if rests else None,
        waited=sum(1 for q in reqs if q.wait_ms > WAITED_MS),
        wait_max_ms=max((q.wait_ms for q in reqs), default=0.0),
    )
