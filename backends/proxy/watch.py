"""``ttft proxy --watch``: the calls of a proxy running elsewhere, read from its session log as it grows.

A proxy started in one terminal (``ttft proxy -- CMD``: the program has that terminal) leaves a state
file while it runs (:mod:`backends.proxy.state`). :func:`choose` picks the run to watch: the only one,
or the one on ``--port``. :class:`ProxyWatcher` then follows that run's session log
(:class:`telemetry.log.follow.LogFollower`) from its first line, every ``poll_s``: each new line is read
back into a call, its record and shape on the wall clock (:func:`telemetry.proxy.logged.read_call`),
and handed to ``on_call`` with the time it ended. When the run's state file goes (the proxy ended, after
its last line was written) or its lock is let go (it died), the rest of the log is read and the watch
ends; :meth:`ProxyWatcher.stop` ends it sooner. The sessions are rebuilt from the calls read, as the
proxy rebuilds its own.

What a watch cannot show: the calls of a proxy that could not write its log (it says so in its own
terminal), and the app's sessions of a log written by an older ttft, whose lines hold no call shapes
(each call is then a session of its own; said once, through ``on_problem``). Content is in the log only
when the proxy was started with ``--keep-content``. Nor the app's own tool spans of a proxy started with
``--otlp``: they go to that proxy's receiver and are not logged, so the watch's sessions time each tool
step by its gap (its ``trace_ids`` are there, read from the calls); the proxy's own summary and
``--json`` have them. A watch of such a run says so once (``on_problem``), as it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from ...telemetry.errors import TtftError
from ...telemetry.log.follow import LogFollower
from ...telemetry.proxy.logged import ended_at, read_call
from ...telemetry.proxy.sessions import ProxySession, rebuild
from .server import ProxiedCall
from .state import RunInfo, alive, running

POLL_S = 0.2  # the log is looked at 5 times a second: a call is on the watcher's screen within ~0.3 s
ALIVE_EVERY_S = 0.5  # and the state file's lock this often


class NoProxy(TtftError):
    """No proxy to watch: none runs, none on the port asked for. Exit 1."""


class ManyProxies(TtftError):
    """Several proxies run and no ``--port`` says which. Exit 2."""


@dataclass(frozen=True, slots=True)
class WatchPlan:
    """What ``--watch`` follows: the run on ``port`` (None: the only one running); ``state_dir``: where
    runs leave their state files (None: the data directory's)."""

    port: int | None = None
    state_dir: Path | None = None


def _listed(runs: list[RunInfo]) -> str:
    return ", ".join(f"port {r.port} (pid {r.pid}{', ' + r.program if r.program else ''})" for r in runs)


def choose(plan: WatchPlan) -> RunInfo:
    """The run to watch (see the module doc); NoProxy or ManyProxies with the sentence to print."""
    runs = running(plan.state_dir)
    if plan.port is not None:
        on_port = [r for r in runs if r.port == plan.port]
        if not on_port:
            others = f" (running: {_listed(runs)})" if runs else ""
            raise NoProxy(f"no ttft proxy is running on port {plan.port}{others}")
        runs = on_port[-1:]  # the newest: an older one on that port has lost it to it
    if not runs:
        raise NoProxy(
            "no ttft proxy is running (start one with `ttft proxy` or `ttft proxy -- CMD`, with this data directory)"
        )
    if len(runs) > 1:
        raise ManyProxies(f"{len(runs)} ttft proxies are running: {_listed(runs)}; pick one with --port P")
    return runs[0]


def _noop(*_: object) -> None:
    return None


@dataclass(frozen=True, slots=True)
class WatchListeners:
    """What a watch tells its front end: each call read, with the time it ended; a problem (said once
    each); the proxy's end (its log read to the last line)."""

    on_call: Callable[[ProxiedCall, datetime], None] = _noop
    on_problem: Callable[[str], None] = _noop
    on_end: Callable[[], None] = _noop


@dataclass(frozen=True, slots=True)
class Watched:
    """A finished watch: the calls read, the sessions rebuilt from them, whether the proxy had ended
    (False: the watch was stopped first), and the log's lines that were not records."""

    run: RunInfo
    calls: tuple[ProxiedCall, ...]
    sessions: tuple[ProxySession, ...]
    ended: bool
    bad_lines: int = 0


class ProxyWatcher:
    """Follows one run's log (see the module doc); listeners are given here, once."""

    def __init__(self, run: RunInfo, listeners: WatchListeners | None = None, *, poll_s: float = POLL_S) -> None:
        self.run_info = run
        self.listeners = listeners or WatchListeners()
        self.poll_s = poll_s
        self.calls: list[ProxiedCall] = []
        self._seen: set[int] = set()  # calls' indices read: a log read again from its start adds no call twice
        self._bad = 0
        self._said: set[str] = set()
        self._stopped: asyncio.Event | None = None
        self._stop_asked = False

    def stop(self) -> None:
        """End the watch (on its loop); the proxy runs on."""
        self._stop_asked = True
        if self._stopped is not None:
            self._stopped.set()

    def _say(self, what: str) -> None:
        if what not in self._said:
            self._said.add(what)
            self.listeners.on_problem(what)

    async def run(self) -> Watched:
        self._stopped = asyncio.Event()
        if self._stop_asked:
            self._stopped.set()
        if self.run_info.otlp_endpoint:
            self._say(
                f"the proxy receives the app's own telemetry on {self.run_info.otlp_endpoint} (--otlp), which a "
                "watch does not see: tool steps here are timed by their gaps; the proxy's own summary and --json "
                "join its spans"
            )
        follower = LogFollower(self.run_info.log_path)
        loop = asyncio.get_running_loop()
        ended = False
        checked = 0.0
        try:
            while True:
                more = await asyncio.to_thread(self._take, follower)
                if self._stopped.is_set():
                    break
                if loop.time() - checked >= ALIVE_EVERY_S:
                    checked = loop.time()
                    if not await asyncio.to_thread(alive, self.run_info):
                        while await asyncio.to_thread(self._take, follower):  # its last lines, all of them
                            pass
                        ended = True
                        self.listeners.on_end()
                        break
                if not more:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._stopped.wait(), self.poll_s)
        finally:
            follower.close()
        calls = tuple(self.calls)
        # no app spans: what the proxy's --otlp receiver got is not in its log (see the module doc)
        sessions = tuple(await asyncio.to_thread(rebuild, [(c.record, c.shape) for c in calls]))
        return Watched(self.run_info, calls, sessions, ended, self._bad)

    def _take(self, follower: LogFollower) -> bool:
        """One read of the log: its new calls handed on. True when more is there already."""
        try:
            got = follower.read()
        except OSError as exc:
            self._say(f"cannot read the proxy's session log {self.run_info.log_path}: {exc.strerror or exc}")
            return False
        self._bad += got.bad
        if got.bad:
            self._say("lines of the session log that are not records were skipped")
        if got.restarted:
            self._say("the session log was replaced or cut: read again from its start")
        for line in got.records:
            read = read_call(line)
            if read is None:
                continue
            rec, shape, had_shape = read
            if shape.call_index in self._seen:
                continue
            self._seen.add(shape.call_index)
            if not had_shape:
                self._say("calls logged by an older ttft hold no call shapes: each is shown as its own session")
            call = ProxiedCall(rec, shape)
            self.calls.append(call)
            self.listeners.on_call(call, ended_at(shape))
        return got.more
