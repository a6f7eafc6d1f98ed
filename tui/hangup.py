"""A terminal that goes away (its window closed, an SSH link dropped): the app hears it at once and
nothing hangs on the dead terminal.

Textual's Linux driver writes to the terminal on a thread through a queue of 30 writes. Once the
terminal is gone, a write fails with EIO: that thread dies, the queue fills, and the next write
(Textual's own shutdown disabling the mouse) waits forever, so the app never closes its screens,
saves its draft or reaps its backend's process. Its input thread meanwhile spins on a terminal
that reads as end of file.

:class:`HangupSafeDriver` is that driver with three changes. A watcher thread polls the terminal for
a hangup (``POLLHUP``), and a failed write or read counts as one too. Once the terminal is gone:
stdin, stdout and stderr point at ``/dev/null`` (what is written later, Textual's last escape
sequences, an exit message, Python's flush at exit, goes nowhere instead of failing), the input
thread stops, writes are dropped, and the process gets SIGHUP, as the kernel sends it on a hangup
(``tui.signals``: the app cancels and logs the turn in flight, saves the draft and exits 129). The
kernel's own SIGHUP and this one are the same event: the app acts on the first.

Once the app has logged, saved and closed everything, :func:`exit_now` ends the process without the
interpreter's teardown (a full garbage collection of a large heap and every module's: 0.3-0.6 s on
a loaded 2-core machine, most of the second a closed terminal's chat has): nobody waits on it, and
the exit handlers still run (``tui.cli`` calls it once the command has returned).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import select
import signal
import sys
import threading
from typing import IO, Any

from textual.driver import Driver
from textual.drivers._writer_thread import WriterThread
from textual.drivers.linux_driver import LinuxDriver

from .driver import TtftDriver

POLL_MS = 250  # how often the watcher looks whether it should stop (a hangup wakes it at once)
HEARD = threading.Event()  # a terminal of this process hung up


class _Writer(WriterThread):
    """Textual's writer thread, which outlives its terminal: a failed write reports the hangup and
    later writes are dropped, so ``write`` and ``stop`` never wait on a queue nobody empties."""

    def __init__(self, file: IO[str], on_gone: Any) -> None:
        super().__init__(file)
        self._on_gone = on_gone
        self.gone = False

    def write(self, text: str) -> None:
        if not self.gone:
            self._queue.put(text)

    def run(self) -> None:
        get, qsize = self._queue.get, self._queue.qsize
        while (text := get()) is not None:
            if self.gone:
                continue
            try:
                self._file.write(text)
                if qsize() == 0:
                    self._file.flush()
            except (OSError, ValueError):  # EIO, EPIPE; a closed file
                self.gone = True
                self._on_gone()
        with contextlib.suppress(OSError, ValueError):
            self._file.flush()


class HangupSafeDriver(TtftDriver):
    """ttft's Linux driver (a paste is only text, ``tui.driver``) for a terminal that may go away: see the
    module's docstring."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._gone = threading.Event()
        self._watching = threading.Event()
        self._ttys: tuple[int, ...] = ()  # once the terminal is gone, isatty() says False: known before

    @property
    def terminal_gone(self) -> bool:
        return self._gone.is_set()

    def start_application_mode(self) -> None:
        self._ttys = tuple(fd for fd in (0, 1, 2) if os.isatty(fd))
        before = self._writer_thread
        super().start_application_mode()
        textuals = self._writer_thread
        if textuals is None or textuals is before or self._file is None:
            return  # it did not start (put in the background: it stops itself until resumed)
        textuals.stop()  # what it was given is written; ours takes its place
        writer = _Writer(self._file, self.hung_up)
        writer.start()
        self._writer_thread = writer
        self._watch()

    def stop_application_mode(self) -> None:
        self._watching.clear()
        super().stop_application_mode()

    def _run_input_thread(self) -> None:
        try:
            self.run_input_thread()
        except OSError:  # EIO reading a terminal that is gone: a hangup, not a bug to print
            self.hung_up()
        except BaseException:
            if self.terminal_gone:
                return  # a consequence of the hangup, on a thread being stopped
            import rich.traceback

            self._app.call_later(self._app.panic, rich.traceback.Traceback())  # what Textual's own does

    def _watch(self) -> None:
        fds = [fd for fd in {self.fileno, self._file.fileno() if self._file else -1} if fd in self._ttys]
        if not fds or not hasattr(select, "poll"):
            return
        self._watching.set()
        threading.Thread(target=self._watcher, args=(fds,), name="ttft-hangup", daemon=True).start()

    def _watcher(self, fds: list[int]) -> None:
        poller = select.poll()
        for fd in fds:
            poller.register(fd, 0)  # no events asked: only POLLHUP, POLLERR and POLLNVAL come back
        while self._watching.is_set() and not self.terminal_gone:
            if poller.poll(POLL_MS):
                self.hung_up()
                return

    def hung_up(self) -> None:
        """The terminal is gone (any thread): see the module's docstring. Idempotent."""
        if self._gone.is_set():
            return
        self._gone.set()
        HEARD.set()
        self.exit_event.set()  # the input thread ends within its 0.1 s select
        writer = self._writer_thread
        if isinstance(writer, _Writer):
            writer.gone = True
        _to_devnull(self._ttys)
        if not self._loop.is_closed():  # the app's loop (Textual's Driver keeps it)
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the app is ending anyway
                self._loop.call_soon_threadsafe(os.kill, os.getpid(), signal.SIGHUP)


def _to_devnull(fds: tuple[int, ...]) -> None:
    """Point ``fds`` (those of stdin, stdout and stderr that were the terminal) at /dev/null."""
    with contextlib.suppress(OSError):
        null = os.open(os.devnull, os.O_RDWR)
        try:
            for fd in fds:
                with contextlib.suppress(OSError):
                    os.dup2(null, fd)
        finally:
            os.close(null)


def driver_class(default: type[Driver]) -> type[Driver]:
    """The driver ttft's apps run on: this one (with ``tui.driver``'s paste and decoding fixes) in place of
    Textual's Linux driver; others (a test's headless one, ``TEXTUAL_DRIVER``'s) as they are."""
    return HangupSafeDriver if default is LinuxDriver else default


def exit_now(code: int) -> None:
    """End the process with ``code`` after the exit handlers, without the interpreter's teardown (see
    the module's docstring). Only once its terminal is gone, and everything is written."""
    atexit._run_exitfuncs()  # multiprocessing's (its children), an exporter's: as a normal exit runs them
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)
