"""``ttft proxy --watch``: the calls of a proxy running elsewhere, in the live view or a line per call.

The run to watch is found by its state file (:func:`backends.proxy.watch.choose`): none running is said
in one line, exit 1; several without ``--port``, exit 2. On a terminal, the live view
(``tui.proxy.app``) shows the run's calls, sessions and pane, as the proxy's own view would; otherwise
(or with ``--headless``) one line per call on stdout, the calls logged so far first. The watch ends when
the proxy does (exit 0), or on Ctrl-C (130; SIGTERM 143, SIGHUP 129), and leaves the proxy running.
The summary of the calls it saw goes to stderr, as the proxy's own does.
"""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime

from ....backends.proxy.server import ProxiedCall
from ....backends.proxy.state import RunInfo
from ....backends.proxy.watch import ManyProxies, NoProxy, ProxyWatcher, Watched, WatchListeners, WatchPlan, choose
from ...proxy.cells import shown
from ..exits import Exit
from .output import call_line, note, print_out, summary_lines


def run_watch(plan: WatchPlan, quiet: bool, headless: bool, stop_signals: tuple[int, ...]) -> int:
    try:
        target = choose(plan)
    except NoProxy as exc:
        note(f"--watch: {exc}")
        return Exit.FAILED
    except ManyProxies as exc:
        note(f"--watch: {exc}")
        return Exit.USAGE
    if not headless and sys.stdin.isatty() and sys.stdout.isatty():
        return _live(target, quiet)
    if not quiet:
        program = f", running {target.program}" if target.program else ""
        note(
            f"watching the proxy on {target.base_url} (pid {target.pid}{program}), session {target.session_id}; "
            "Ctrl-C ends the watch, not the proxy"
        )
    lines = _Lines()
    watcher = ProxyWatcher(target, WatchListeners(on_call=lines.call, on_problem=lambda p: note(f"--watch: {p}")))
    stopped: list[int] = []
    watched = asyncio.run(_follow(watcher, stop_signals, stopped))
    return _finished(watched, quiet, 128 + stopped[0] if stopped else Exit.OK)


def _live(target: RunInfo, quiet: bool) -> int:
    from ...proxy.app import ProxyApp

    app = ProxyApp(watch=target)
    code = app.run()
    for line in app.crash_lines:
        print(line, file=sys.stderr)
    if app.watched is None:
        if app.start_error is not None:
            note(f"--watch stopped: {app.start_error}")
        return Exit.FAILED
    return _finished(app.watched, quiet, code if code is not None else Exit.OK)


async def _follow(watcher: ProxyWatcher, stop_signals: tuple[int, ...], stopped: list[int]) -> Watched:
    loop = asyncio.get_running_loop()
    installed = []

    def stop(signum: int) -> None:
        stopped.append(signum)
        watcher.stop()

    for s in stop_signals:
        try:
            loop.add_signal_handler(s, stop, s)
        except (NotImplementedError, RuntimeError, ValueError):
            continue
        installed.append(s)
    try:
        return await watcher.run()
    finally:
        for s in installed:
            loop.remove_signal_handler(s)


class _Lines:
    """One line per call on stdout, until its reader goes (``| head``): the watch goes on, silent."""

    def __init__(self) -> None:
        self.reader_gone = False

    def call(self, call: ProxiedCall, when: datetime) -> None:
        if not self.reader_gone:
            self.reader_gone = not print_out(call_line(call, when))


def _finished(watched: Watched, quiet: bool, code: int) -> int:
    if not quiet:
        if watched.ended:
            note(f"the proxy on {shown(watched.run.base_url)} has ended")
        for line in summary_lines(watched.calls, watched.sessions):
            print(line, file=sys.stderr)
    return code
