"""``ttft proxy``'s live view: the calls as they end, the app's sessions, the selected one in the pane.

The proxy runs on a loop thread of its own (``tui.runner.LoopThread``): the streams it passes on never
wait for a paint. A call that ends is only appended to a queue there (:meth:`ProxyApp.feed`); the UI
takes the queue TICK_S apart, so a burst of calls is one repaint of the table, and an app's 20 calls a
second are two rows a tick. The sessions are rebuilt from the calls so far (``telemetry.proxy.sessions``),
and the app's own tool spans with ``--otlp``, at most once a second, and at most SESSIONS_SHARE of the
time, off the UI thread.

With a run to watch (``ttft proxy --watch``: a proxy started elsewhere, its state file found by
:func:`backends.proxy.watch.choose`), no proxy is started: a :class:`backends.proxy.watch.ProxyWatcher`
follows that run's session log on the app's loop (its reads on a worker thread) and hands each call to
the same queue, with the time it ended; the header says whose calls they are, and when the proxy has
ended. ``q`` then leaves the proxy running.

The calls table keeps the newest 2,000 rows that pass the filter (``tui.proxy.call_rows``); the header
says how many older ones are hidden, and its count, the sessions, the export and the summary cover
every call.

Keys: ``/`` opens the filter (one text: a call passes when its client or its model holds it, whatever
the case; Enter keeps it and goes back to the table, Esc clears it); ``p`` pauses (the calls are still
kept; the table stops moving and the header says how many wait); ``e`` writes the calls so far as JSONL to the
current folder; ``q`` stops the proxy with exit status 0, Ctrl-C with 130 (as the headless run's
Ctrl-C), SIGTERM and SIGHUP with 128 + N. The command prints the summary once the terminal is back.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import signal
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import events
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.driver import Driver
from textual.filter import LineFilter
from textual.timer import Timer
from textual.widgets import DataTable, Footer, Input, Static

from ...backends.proxy.plan import ProxyPlan
from ...backends.proxy.run import Listeners, ProxyRun, ProxyRunner, Started
from ...backends.proxy.server import ProxiedCall
from ...backends.proxy.state import RunInfo
from ...backends.proxy.watch import ProxyWatcher, Watched, WatchListeners
from ...telemetry.log import private_files
from ...telemetry.log.json_line import encode_line
from ...telemetry.log.secrets import masked_record
from ...telemetry.proxy.app_spans import AppToolSpan
from ...telemetry.proxy.sessions import ProxySession, rebuild
from ...telemetry.view.timeline import turn_timeline
from .. import hangup, signals
from ..crash import KeepsRunning
from ..runner import LoopThread
from ..terminal import with_drop_controls
from ..widgets.telemetry_pane import TelemetryPane
from .call_rows import MAX_ROWS, CallRows, filter_key
from .cells import CLIENT_WIDTH, cut, shown

TICK_S = 0.1  # the table takes the calls that ended at most 10 times a second: a burst is one repaint
SESSIONS_EVERY_S = 1.0  # the sessions are rebuilt from every call so far: at most this often
# ... and at most this share of the time: the rebuild holds the GIL that the proxy's thread needs too
# (1,200 calls: 250 ms on a 2-core EPYC, then rebuilt every 2.5 s)
SESSIONS_SHARE = 0.1
STOP_WAIT_S = 10.0  # the proxy's close (its streams cut, its log written) before the app gives up on it
WIDE_FROM = 150  # columns: the table's rows whole beside the pane
CALL_COLUMNS = ("time", "client", "model", "status", "TTFT", "TPOT", "tokens", "cache", "cost")
SESSION_COLUMNS = ("client", "calls", "where the time went")
FILTER_AFTER_S = 0.15  # the filter applies this long after the last key: a table of 2,000 rows is not redrawn per key


class FilterBox(Input):
    """The filter's text. It takes the focus only when ``/`` gives it, so Tab stays between the tables."""

    def on_blur(self) -> None:
        self.can_focus = False


class ProxyApp(KeepsRunning, App[int]):
    """The live view (see the module doc). ``plan``: the proxy it runs; ``watch``: the run it watches
    instead; neither: calls come only from :meth:`feed` (the tests'). ``max_rows``: the calls table's cap."""

    crash_where = "the proxy's live view"
    TITLE = "ttft proxy"
    CSS = """
    #head { height: auto; padding: 0 1; background: $boost; }
    #filter { height: 1; border: none; padding: 0 1; background: $boost; }
    #filter:focus { border: none; background: $primary-background; }
    #calls { height: 2fr; }
    #sessions-title { height: 1; padding: 0 1; text-style: bold; color: $text-muted; }
    #sessions { height: 1fr; }
    #pane { width: 64; border-left: vkey $primary-darken-2; }
    ProxyApp.-narrow #main { layout: vertical; }
    ProxyApp.-narrow #pane { width: 1fr; height: 1fr; border-left: none; border-top: hkey $primary-darken-2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        # priority: taken before the keys typed right after it are handed on, so they reach the filter's box
        Binding("slash", "filter", "filter", priority=True),
        Binding("escape", "clear_filter", "clear filter"),
        Binding("p", "pause", "pause"),
        Binding("e", "export", "export"),
        Binding("q", "stop(0)", "quit"),
        Binding("ctrl+c", "stop(130)", "quit", show=False, priority=True),
    ]

    def __init__(
        self, plan: ProxyPlan | None = None, watch: RunInfo | None = None, *, max_rows: int = MAX_ROWS
    ) -> None:
        super().__init__()
        self.max_rows = max_rows  # the calls table's rows at most (the app keeps every call)
        self.plan = plan
        self.watching = watch  # (not ``watch``: a Textual name)
        self.watched: Watched | None = None  # the finished watch, once the app has stopped it
        self.ended = False  # the watched proxy has ended (its log read to the end)
        self._watcher: ProxyWatcher | None = None
        self._watch_task: asyncio.Task[Watched] | None = None
        self.calls: list[tuple[ProxiedCall, str]] = []  # every call so far, with the time it ended
        self._keys: list[str] = []  # what the filter looks in, per call (tui.proxy.call_rows.filter_key)
        self.sessions: list[ProxySession] = []
        self._rows: CallRows | None = None  # the calls table's rows: made once it is mounted
        self._filter_timer: Timer | None = None
        self.app_spans: list[AppToolSpan] = []  # the app's own tool spans so far (--otlp)
        self.paused = False
        self.result: ProxyRun | None = None  # the finished run, once the app has stopped the proxy
        self.start_error: BaseException | None = None  # why the proxy could not start (a port taken)
        self.started: Started | None = None
        self._head_for: Started | None = None  # the start the header says
        self._ended_shown = False  # the header says the watched proxy ended
        # Filled on the proxy's thread, emptied on the UI's: deque's append and popleft are atomic.
        self._incoming: collections.deque[tuple[ProxiedCall, str]] = collections.deque()
        self._problems: collections.deque[str] = collections.deque()
        self._incoming_spans: collections.deque[AppToolSpan] = collections.deque()
        self._sessions_from = (0, 0)  # how many calls and app spans the sessions were rebuilt from
        self._sessions_at = 0.0
        self._sessions_every = SESSIONS_EVERY_S
        self._rebuilding = False
        self._stopping = False
        self._signals: list[int] = []
        self._thread: LoopThread | None = None
        self._runner: ProxyRunner | None = None
        self._future: concurrent.futures.Future[ProxyRun] | None = None

    # -- the proxy's side ---------------------------------------------------------------------------

    def feed(self, call: ProxiedCall, when: datetime | None = None) -> None:
        """A call that ended (``when``: now, unless a watch says when it did): queued for the next tick.
        Safe from any thread, and cheap (the proxy's ``on_call`` runs on its loop, between the bytes of the
        other streams)."""
        self._incoming.append((call, (when or datetime.now()).strftime("%H:%M:%S")))

    def feed_spans(self, spans: Sequence[AppToolSpan]) -> None:
        """The app's own tool spans as an export brought them (``--otlp``): queued for the next tick, which
        has the sessions rebuilt with them. Safe from any thread."""
        self._incoming_spans.extend(spans)

    def _on_end(self) -> None:
        self.ended = True  # read by the next tick

    def _on_start(self, started: Started) -> None:
        self.started = started  # read by the next tick

    # -- the app ------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="head")
        with Horizontal(id="main"):
            with Vertical():
                yield FilterBox(placeholder="/ filters the calls by client or model", id="filter")
                yield DataTable(id="calls", cursor_type="row", zebra_stripes=True)
                yield Static("Sessions", id="sessions-title")
                yield DataTable(id="sessions", cursor_type="row")
            yield TelemetryPane(id="pane")
        yield Footer()

    def on_mount(self) -> None:
        calls = self.query_one("#calls", DataTable)
        calls.add_columns(*CALL_COLUMNS)
        self._rows = CallRows(calls, self.max_rows)
        self.query_one(FilterBox).can_focus = False
        calls.focus()
        self.query_one("#sessions", DataTable).add_columns(*SESSION_COLUMNS)
        self.call_after_refresh(self._pane().show_message, "No call yet: the selected call is shown here.")
        pane = self._pane()
        pane.query_one("#history").display = False  # the chat's turns: the calls table is the proxy's
        for title in pane.query(".pane-title"):
            if isinstance(title, Static) and title.content == "History":
                title.display = False
        loop = asyncio.get_running_loop()
        self._signals = signals.install(loop, self._on_signal)
        if self.plan is not None:
            self._runner = ProxyRunner(
                self.plan,
                Listeners(
                    on_start=self._on_start,
                    on_call=self.feed,
                    on_problem=self._problems.append,
                    on_spans=self.feed_spans,
                ),
            )
            self._thread = LoopThread("ttft-proxy")
            self._future = self._thread.submit(self._runner.run())
        elif self.watching is not None:
            listeners = WatchListeners(on_call=self.feed, on_problem=self._problems.append, on_end=self._on_end)
            self._watcher = ProxyWatcher(self.watching, listeners)
            self._watch_task = asyncio.get_running_loop().create_task(self._watcher.run())
        self._paint_head()
        self.set_interval(TICK_S, self._tick)

    def _on_signal(self, signum: int) -> None:
        self.run_worker(self.action_stop(128 + signum))

    def on_unmount(self) -> None:
        signals.uninstall(asyncio.get_running_loop(), self._signals)
        running = self._future is not None and not self._future.done()
        if self._runner is not None and self._future is not None and self._thread is not None and running:
            # the app ended another way (a crash, a closed terminal): the proxy still closes, its log written
            self._thread.loop.call_soon_threadsafe(self._runner.stop, signal.SIGINT)
            with contextlib.suppress(Exception):
                self.result = self._future.result(STOP_WAIT_S)
        if self._thread is not None:
            self._thread.close()
        if self._watch_task is not None and not self._watch_task.done():
            self._watch_task.cancel()

    def on_resize(self) -> None:
        # the calls' nine columns and the 64-column pane side by side only where both fit; else stacked
        self.set_class(self.size.width < WIDE_FROM, "-narrow")

    def get_driver_class(self) -> type[Driver]:
        # A closed terminal ends the app at once; a paste is only text; bytes not UTF-8 are said, not fatal.
        return hangup.driver_class(super().get_driver_class())

    def get_line_filters(self) -> Sequence[LineFilter]:
        return with_drop_controls(super().get_line_filters())  # outside text never drives the terminal

    def _pane(self) -> TelemetryPane:
        return self.query_one("#pane", TelemetryPane)

    def _tick(self) -> None:
        """Take what the proxy handed over since the last tick: its start, its problems, its calls."""
        if self._future is not None and self._future.done() and not self._stopping:
            self._stopping = True  # it ended on its own: it could not start (a port taken)
            exc = self._future.exception()
            if exc is not None:
                self.start_error = exc
                self.exit(return_code=2)
                return
            self.result = self._future.result()
            self.exit(return_code=self.result.status or 0)
            return
        task = self._watch_task
        if task is not None and task.done() and self.watched is None and self.start_error is None:
            if task.cancelled() or (exc := task.exception()) is not None:  # said once the terminal is back
                self.start_error = exc if not task.cancelled() else RuntimeError("the watch was cancelled")
                self.ended = True
            else:
                self.watched = task.result()
        while self._problems:
            self.notify(shown(self._problems.popleft()), severity="warning", timeout=10)
        got = 0
        while self._incoming:
            call = self._incoming.popleft()
            self.calls.append(call)
            self._keys.append(filter_key(call[0]))
            got += 1
        while self._incoming_spans:
            self.app_spans.append(self._incoming_spans.popleft())
        if got and not self.paused:
            self._show_new()
        if got or self.paused or self.started is not self._head_for or self.ended is not self._ended_shown:
            self._paint_head()
        now = time.monotonic()
        if (
            (len(self.calls), len(self.app_spans)) != self._sessions_from
            and not self._rebuilding
            and now - self._sessions_at >= self._sessions_every
        ):
            self._rebuilding = True
            self._sessions_at = now
            self.run_worker(self._rebuild(), group="sessions")

    def _show_new(self) -> None:
        """The calls not yet offered to the table, those the filter passes, as rows (one repaint)."""
        assert self._rows is not None
        self._rows.offer(self.calls, self._keys)

    def _refilter(self) -> None:
        """The table again for the filter's text now: the calls it had been offered, none of those that wait."""
        self._filter_timer = None
        assert self._rows is not None
        text = self.query_one(FilterBox).value
        if text.strip().casefold() == self._rows.needle:
            return
        self._rows.refilter(self.calls, self._keys, text)
        if not self._rows.table.row_count and self.calls:
            self._pane().show_message("No call passes the filter.")
        self._paint_head()
        self.refresh_bindings()

    def _paint_head(self) -> None:
        self._head_for = self.started
        self._ended_shown = self.ended
        t = Text()
        if self.paused:
            t.append(" PAUSED ", style="bold reverse yellow")
        elif self.watching is not None:
            t.append(
                " ENDED " if self.ended else " WATCHING ", style="bold reverse " + ("red" if self.ended else "green")
            )
        else:
            t.append(" LIVE ", style="bold reverse green")
        if (w := self.watching) is not None:
            program = f", {shown(w.program)}" if w.program else ""
            t.append(f"  the proxy on {shown(w.base_url)} (pid {w.pid}{program})")
            t.append(f" → {shown(w.upstream or 'each provider’s own API')}  ·  session {shown(w.session_id)}")
            if self.ended:
                t.append("  ·  it has ended (q closes)", style="bold")
        if self.started is not None:
            upstream = self.plan.config.upstream if self.plan is not None else None
            t.append(f"  listening on {self.started.base_url} → {shown(upstream or 'each provider’s own API')}")
        n = len(self.calls)
        t.append(f"  ·  {n:,} call{'s' if n != 1 else ''}")
        rows = self._rows
        if rows is not None and self.paused:
            t.append(f"  ·  paused: {n - rows.offered:,} new waiting (p resumes)", style="bold yellow")
        if rows is not None and rows.needle:
            t.append(f"  ·  filter “{cut(shown(rows.needle), CLIENT_WIDTH)}”: {rows.passing:,} pass", style="bold")
        if rows is not None and rows.hidden > 0:
            t.append(
                f"  ·  {rows.hidden:,} older rows hidden (the table keeps the newest {rows.max_rows:,})", style="bold"
            )
        if self.started is not None:
            for name, value in sorted(self.started.env.items()):
                t.append(f"\n  export {name}={shown(value)}", style="dim")
        self.query_one("#head", Static).update(t)

    async def _rebuild(self) -> None:
        calls = [(c.record, c.shape) for c, _ in self.calls]
        spans = tuple(self.app_spans)
        began = time.monotonic()
        try:
            sessions = await asyncio.to_thread(rebuild, calls, spans)
        finally:
            self._rebuilding = False
        self._sessions_every = max(SESSIONS_EVERY_S, (time.monotonic() - began) / SESSIONS_SHARE)
        self._sessions_from = (len(calls), len(spans))
        self.sessions = sessions
        table = self.query_one("#sessions", DataTable)
        row = table.cursor_row
        table.clear()
        for k, s in enumerate(sessions):
            table.add_row(
                shown(cut(s.client or "-", CLIENT_WIDTH)), str(len(s.call_indices)), shown(s.summary), key=str(k)
            )
        if sessions:
            table.move_cursor(row=min(row, len(sessions) - 1), animate=False)

    # -- what is shown in the pane ------------------------------------------------------------------

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is None:
            return
        k = int(event.row_key.value)
        pane = self._pane()
        if event.data_table.id == "calls":
            if self._rows is not None:
                self._rows.follow = event.cursor_row == event.data_table.row_count - 1
            if self.query_one("#sessions", DataTable).has_focus:
                return  # a new call followed while a session is read: the pane keeps the session
            call = self.calls[k][0]
            pane.show_record(call.record)
            pane.set_timelines([(str(call.shape.call_index + 1), turn_timeline(call.record))])
        elif event.data_table.id == "sessions" and event.data_table.has_focus and k < len(self.sessions):
            self._show_session(self.sessions[k])

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        if event.data_table.id == "sessions" and event.row_key.value is not None:
            k = int(event.row_key.value)
            if k < len(self.sessions):
                self._show_session(self.sessions[k])

    def on_descendant_focus(self, event: Any) -> None:
        if getattr(event.widget, "id", None) == "sessions":  # tabbed into: its row now, not the call's
            table = self.query_one("#sessions", DataTable)
            if self.sessions and table.cursor_row < len(self.sessions):
                self._show_session(self.sessions[table.cursor_row])

    def _show_session(self, s: ProxySession) -> None:
        pane = self._pane()
        pane.show_record(s.record)
        pane.set_timelines([("s", turn_timeline(s.record))])

    # -- keys -----------------------------------------------------------------------------------------

    def action_filter(self) -> None:
        box = self.query_one(FilterBox)
        # Once opened (focused, or about to be: a fast typist's keys come before the focus moves), a "/" is
        # the filter's text, after the keys typed before it: clients and models hold one (claude-cli/2.1).
        if box.can_focus:
            box.post_message(events.Key("slash", "/"))
            return
        box.can_focus = True
        self.screen.set_focus(box)  # now, not deferred as focus() is: the keys typed right after are its text
        self.refresh_bindings()

    def action_clear_filter(self) -> None:
        box = self.query_one(FilterBox)
        box.value = ""
        self._refilter()
        self.query_one("#calls", DataTable).focus()
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Esc is offered (and shown) only where there is a filter to clear or to leave
        if action == "clear_filter":
            box = self.query_one(FilterBox)
            return bool(box.value) or box.has_focus
        return True

    def on_input_changed(self, event: Input.Changed) -> None:
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self._filter_timer = self.set_timer(FILTER_AFTER_S, self._refilter)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if self._filter_timer is not None:
            self._filter_timer.stop()
        self._refilter()
        self.query_one("#calls", DataTable).focus()
        self.refresh_bindings()

    def action_pause(self) -> None:
        self.paused = not self.paused
        if not self.paused:
            self._show_new()
        self._paint_head()

    def action_export(self) -> None:
        """The calls so far as JSONL (each a turn record, masked as the logs are) in the current folder."""
        name = self.started.session_id if self.started is not None else datetime.now().strftime("%Y%m%d-%H%M%S")
        path = Path.cwd() / f"ttft-proxy-{name}.jsonl"
        data = b"".join(encode_line(masked_record(c.record.to_dict())) for c, _ in self.calls)
        try:
            private_files.replace(path, data, sync=False)
        except OSError as exc:
            self.notify(f"could not write {path}: {exc.strerror or exc}", severity="error")
            return
        n = len(self.calls)
        self.notify(f"{n} call{'s' if n != 1 else ''} written to {shown(str(path))}", timeout=6)

    async def action_stop(self, code: int) -> None:
        """Stop the proxy (its streams end, its log is written), keep its run for the summary, and exit
        with ``code``."""
        if self._stopping:
            return
        self._stopping = True
        if self._watcher is not None and self._watch_task is not None:  # the watched proxy runs on
            self._watcher.stop()
            with contextlib.suppress(Exception):
                self.watched = await asyncio.wait_for(asyncio.shield(self._watch_task), STOP_WAIT_S)
            self.exit(return_code=code)
            return
        self.query_one("#head", Static).update(Text(" STOPPING ", style="bold reverse yellow"))
        if self._runner is not None and self._future is not None and self._thread is not None:
            signum = signal.SIGINT if code in (0, 130) else code - 128
            self._thread.loop.call_soon_threadsafe(self._runner.stop, signum)
            try:
                result = await asyncio.wait_for(asyncio.wrap_future(self._future), STOP_WAIT_S)
            except Exception as exc:  # said by the command once the terminal is back
                self.start_error = exc
            else:
                self.result = dataclasses.replace(result, status=code)
        self.exit(return_code=code)

    def rows(self) -> Iterable[tuple[str, ...]]:
        """The calls table's rows as shown (for tests and scripts)."""
        table = self.query_one("#calls", DataTable)
        for key in table.rows:
            yield tuple(str(c) for c in table.get_row(key))
