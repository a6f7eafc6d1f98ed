"""``ttft proxy``'s live view: the calls as they end, the app's sessions, the selected one in the pane.

The proxy runs on a loop thread of its own (``tui.runner.LoopThread``): the streams it passes on never
wait for a paint. A call that ends is only appended to a queue there (:meth:`ProxyApp.feed`); the UI
takes the queue TICK_S apart, so a burst of calls is one repaint of the table, and an app's 20 calls a
second are two rows a tick. The sessions are rebuilt from the calls so far (``telemetry.proxy.sessions``)
at most once a second, and at most SESSIONS_SHARE of the time, off the UI thread.

Keys: ``f`` and ``m`` cycle a filter by client and by model; ``p`` pauses (the calls are still kept; the
table stops moving and the header says how many wait); ``e`` writes the calls so far as JSONL to the
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
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.driver import Driver
from textual.filter import LineFilter
from textual.widgets import DataTable, Footer, Static

from ...backends.proxy.plan import ProxyPlan
from ...backends.proxy.run import Listeners, ProxyRun, ProxyRunner, Started
from ...backends.proxy.server import ProxiedCall
from ...telemetry.log import private_files
from ...telemetry.log.json_line import encode_line
from ...telemetry.log.secrets import masked_record
from ...telemetry.proxy.sessions import ProxySession, rebuild
from ...telemetry.view.timeline import turn_timeline
from .. import hangup, signals
from ..crash import KeepsRunning
from ..runner import LoopThread
from ..terminal import with_drop_controls
from ..widgets.telemetry_pane import TelemetryPane
from .cells import CLIENT_WIDTH, client_of, cut, model_of, row_cells, shown

TICK_S = 0.1  # the table takes the calls that ended at most 10 times a second: a burst is one repaint
SESSIONS_EVERY_S = 1.0  # the sessions are rebuilt from every call so far: at most this often
# ... and at most this share of the time: the rebuild holds the GIL that the proxy's thread needs too
# (1,200 calls: 250 ms on a 2-core EPYC, then rebuilt every 2.5 s)
SESSIONS_SHARE = 0.1
STOP_WAIT_S = 10.0  # the proxy's close (its streams cut, its log written) before the app gives up on it
WIDE_FROM = 150  # columns: the table's rows whole beside the pane
CALL_COLUMNS = ("time", "client", "model", "status", "TTFT", "TPOT", "tokens", "cache", "cost")
SESSION_COLUMNS = ("client", "calls", "where the time went")


class ProxyApp(KeepsRunning, App[int]):
    """The live view (see the module doc). ``plan`` None: no proxy is started, calls come only from
    :meth:`feed` (the tests')."""

    crash_where = "the proxy's live view"
    TITLE = "ttft proxy"
    CSS = """
    #head { height: auto; padding: 0 1; background: $boost; }
    #calls { height: 2fr; }
    #sessions-title { height: 1; padding: 0 1; text-style: bold; color: $text-muted; }
    #sessions { height: 1fr; }
    #pane { width: 64; border-left: vkey $primary-darken-2; }
    ProxyApp.-narrow #main { layout: vertical; }
    ProxyApp.-narrow #pane { width: 1fr; height: 1fr; border-left: none; border-top: hkey $primary-darken-2; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "cycle('client')", "client filter"),
        Binding("m", "cycle('model')", "model filter"),
        Binding("p", "pause", "pause"),
        Binding("e", "export", "export"),
        Binding("q", "stop(0)", "quit"),
        Binding("ctrl+c", "stop(130)", "quit", show=False, priority=True),
    ]

    def __init__(self, plan: ProxyPlan | None = None) -> None:
        super().__init__()
        self.plan = plan
        self.calls: list[tuple[ProxiedCall, str]] = []  # every call so far, with the time it ended
        self.sessions: list[ProxySession] = []
        self.filters: dict[str, str | None] = {"client": None, "model": None}
        self.paused = False
        self.result: ProxyRun | None = None  # the finished run, once the app has stopped the proxy
        self.start_error: BaseException | None = None  # why the proxy could not start (a port taken)
        self.started: Started | None = None
        self._head_for: Started | None = None  # the start the header says
        # Filled on the proxy's thread, emptied on the UI's: deque's append and popleft are atomic.
        self._incoming: collections.deque[tuple[ProxiedCall, str]] = collections.deque()
        self._problems: collections.deque[str] = collections.deque()
        self._shown = 0  # calls[:_shown] have been offered to the table (those the filters pass are in it)
        self._follow = True  # the cursor stays on the newest row until the person moves it up
        self._sessions_from = 0  # how many calls the sessions were rebuilt from
        self._sessions_at = 0.0
        self._sessions_every = SESSIONS_EVERY_S
        self._rebuilding = False
        self._stopping = False
        self._signals: list[int] = []
        self._thread: LoopThread | None = None
        self._runner: ProxyRunner | None = None
        self._future: concurrent.futures.Future[ProxyRun] | None = None

    # -- the proxy's side ---------------------------------------------------------------------------

    def feed(self, call: ProxiedCall) -> None:
        """A call that ended: queued for the next tick. Safe from any thread, and cheap (the proxy's
        ``on_call`` runs on its loop, between the bytes of the other streams)."""
        self._incoming.append((call, datetime.now().strftime("%H:%M:%S")))

    def _on_start(self, started: Started) -> None:
        self.started = started  # read by the next tick

    # -- the app ------------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="head")
        with Horizontal(id="main"):
            with Vertical():
                yield DataTable(id="calls", cursor_type="row", zebra_stripes=True)
                yield Static("Sessions", id="sessions-title")
                yield DataTable(id="sessions", cursor_type="row")
            yield TelemetryPane(id="pane")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#calls", DataTable).add_columns(*CALL_COLUMNS)
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
                self.plan, Listeners(on_start=self._on_start, on_call=self.feed, on_problem=self._problems.append)
            )
            self._thread = LoopThread("ttft-proxy")
            self._future = self._thread.submit(self._runner.run())
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
        while self._problems:
            self.notify(shown(self._problems.popleft()), severity="warning", timeout=10)
        got = 0
        while self._incoming:
            self.calls.append(self._incoming.popleft())
            got += 1
        if got and not self.paused:
            self._show_new()
        if got or self.paused or self.started is not self._head_for:
            self._paint_head()
        now = time.monotonic()
        if (
            len(self.calls) != self._sessions_from
            and not self._rebuilding
            and now - self._sessions_at >= SESSIONS_EVERY_S
        ):
            self._rebuilding = True
            self._sessions_at = now
            self.run_worker(self._rebuild(), group="sessions")

    def _passes(self, call: ProxiedCall) -> bool:
        client, model = self.filters["client"], self.filters["model"]
        return (client is None or client_of(call) == client) and (model is None or model_of(call) == model)

    def _show_new(self, upto: int | None = None) -> None:
        """The calls not yet offered to the table (up to ``upto``), those the filters pass, as rows (one
        repaint)."""
        table = self.query_one("#calls", DataTable)
        end = len(self.calls) if upto is None else upto
        rows = [(i, *self.calls[i]) for i in range(self._shown, end) if self._passes(self.calls[i][0])]
        self._shown = end
        for i, call, when in rows:
            table.add_row(*row_cells(call, when), key=str(i))
        if rows and self._follow:
            table.move_cursor(row=table.row_count - 1)

    def _refill(self) -> None:
        """The table again, for new filters: the calls it had been offered, none of those that wait."""
        table = self.query_one("#calls", DataTable)
        table.clear()
        upto, self._shown = self._shown, 0
        self._follow = True
        self._show_new(upto)
        if not table.row_count:
            self._pane().show_message("No call passes the filters.")

    def _paint_head(self) -> None:
        self._head_for = self.started
        t = Text()
        t.append(
            " PAUSED " if self.paused else " LIVE ", style="bold reverse " + ("yellow" if self.paused else "green")
        )
        if self.started is not None:
            upstream = self.plan.config.upstream if self.plan is not None else None
            t.append(f"  listening on {self.started.base_url} → {shown(upstream or 'each provider’s own API')}")
        n = len(self.calls)
        t.append(f"  ·  {n} call{'s' if n != 1 else ''}")
        if self.paused:
            t.append(f"  ·  paused: {n - self._shown} new waiting (p resumes)", style="bold yellow")
        for what, value in self.filters.items():
            if value is not None:
                t.append(f"  ·  {what}: {cut(shown(value), CLIENT_WIDTH)}", style="bold")
        if self.started is not None:
            for name, value in sorted(self.started.env.items()):
                t.append(f"\n  export {name}={shown(value)}", style="dim")
        self.query_one("#head", Static).update(t)

    async def _rebuild(self) -> None:
        calls = [(c.record, c.shape) for c, _ in self.calls]
        began = time.monotonic()
        try:
            sessions = await asyncio.to_thread(rebuild, calls)
        finally:
            self._rebuilding = False
        self._sessions_every = max(SESSIONS_EVERY_S, (time.monotonic() - began) / SESSIONS_SHARE)
        self._sessions_from = len(calls)
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
            self._follow = event.cursor_row == event.data_table.row_count - 1
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

    def action_cycle(self, what: str) -> None:
        """The next client (or model) seen so far as the filter, then none."""
        of: Callable[[ProxiedCall], str] = client_of if what == "client" else model_of
        seen = sorted({of(c) for c, _ in self.calls[: self._shown]})
        now = self.filters[what]
        nxt = seen[seen.index(now) + 1] if now in seen and seen.index(now) + 1 < len(seen) else None
        if now is None and seen:
            nxt = seen[0]
        self.filters[what] = nxt
        self.notify(f"{what}: {shown(nxt)}" if nxt is not None else f"every {what}", timeout=2)
        self._refill()
        self._paint_head()

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
