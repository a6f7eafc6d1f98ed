"""The one way an unforeseen exception reaches a person: a crash report on disk, and one line naming it.

No command and no chat ever prints a traceback. What ttft did not foresee (a bug) is written to a
crash report (``telemetry.log.crashes``: masked, mode 0600, under the data folder), and the person
reads one line: what broke, in a few words, and where the report is. When even the report cannot
be written (a full disk), the line says so instead; it is still one line. The command line catches
at its entry (``tui.cli.main``); the Textual apps mix in :class:`KeepsRunning`, which says the line
as a notification and keeps the app up.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from typing import Any

from ..telemetry.log.crashes import version, write_report
from ..telemetry.log.secrets import mask
from .format import visible_controls

SUMMARY_CHARS = 200  # of the exception's own text, in the line a person reads
BUG_EXIT = 70  # tui.commands.exits.Exit.BUG (this module is imported before any command)


def summary(exc: BaseException) -> str:
    """``KeyError: 'x'``: the exception in a few words, masked and made visible."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(text) > SUMMARY_CHARS:
        text = text[:SUMMARY_CHARS] + "…"
    said = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    return visible_controls(mask(said))


def report(exc: BaseException, where: str, argv: Sequence[str] | None = None) -> str:
    """Write ``exc``'s crash report and give the one line that says so (to print, or to notify)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        path = write_report(exc, where, version=version(), argv=args)
    except Exception as failed:  # the report is the last resort: its own failure is said, never raised
        reason = getattr(failed, "strerror", None) or type(failed).__name__
        return f"ttft hit an unexpected error ({summary(exc)}); its crash report could not be written ({reason})."
    return f"ttft hit an unexpected error ({summary(exc)}); the crash report is {visible_controls(str(path))}"


CRASH_BURST = 5  # unforeseen errors within CRASH_WINDOW_S: past this, the app stops rather than spin
CRASH_WINDOW_S = 10.0


def _contain_handlers() -> None:
    """Textual ends a message pump's loop when a handler raises (after ``App._handle_exception``), so an
    app that stays up would stop answering keys. Each message's dispatch is wrapped, once per process:
    in a :class:`KeepsRunning` app, what a handler raises goes to its ``_handle_exception`` and the
    loop goes on; in any other app, it propagates as before."""
    from textual.message_pump import MessagePump

    dispatch = MessagePump._dispatch_message
    if getattr(dispatch, "_contained", False):
        return

    async def contained(self: Any, message: Any) -> None:
        try:
            await dispatch(self, message)
        except Exception as exc:
            try:
                app = self.app
            except Exception:  # no app (a pump outside one): Textual's own handling
                raise exc from None
            if not isinstance(app, KeepsRunning):
                raise
            app._handle_exception(exc)

    contained._contained = True  # type: ignore[attr-defined]
    MessagePump._dispatch_message = contained  # type: ignore[method-assign]


class KeepsRunning:
    """For a Textual app: an unforeseen exception in a handler, a worker or a paint is written to a
    crash report and said in a notification; the app stays up (Textual's own handling prints a
    traceback with local variables and exits). A burst of them (a paint that fails every frame) ends
    the app as Textual would, with the one line, never a traceback. ``crash_lines``: what to print
    once the terminal is back."""

    crash_where = "the chat"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        _contain_handlers()
        self.crash_lines: list[str] = []
        self._crash_times: list[float] = []
        super().__init__(*args, **kwargs)

    def notify(self, message: Any, *, title: str = "", **kwargs: Any) -> None:
        """Textual's notification, its text masked (``telemetry.log.secrets.mask``): every notice of the
        app, whoever words it (an MCP server's failure, a command's error), reaches the screen here."""
        if isinstance(message, str):
            message = mask(message)
        super().notify(message, title=mask(title), **kwargs)  # type: ignore[misc]

    def _handle_exception(self, error: Exception) -> None:
        import time

        app: Any = self
        line = report(error, self.crash_where)
        self.crash_lines.append(line)
        if getattr(app, "is_headless", False) and getattr(app, "_exception", None) is None:
            # Under Textual's pilot (the tests): kept as Textual keeps it, so run_test raises it at its
            # end and a bug never passes a test silently; the app still goes on until then.
            app._exception = error
        now = time.monotonic()
        self._crash_times = [t for t in self._crash_times if now - t < CRASH_WINDOW_S] + [now]
        if len(self._crash_times) > CRASH_BURST:
            app.exit(return_code=BUG_EXIT)
            return
        with contextlib.suppress(Exception):
            app.notify(
                f"{line}. The turns so far are logged; the chat goes on.",
                title="unexpected error",
                severity="error",
                timeout=20,
            )
