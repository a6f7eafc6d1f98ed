"""Exit codes: what happened, as one table every command maps its outcome through.

The same failure gives the same code on every command, and ``--help`` and the README print this
table. The signal codes are the shell's (128 + the signal's number), as ``tui.signals`` returns them.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import IntEnum

from ...telemetry.errors import USAGE_KINDS, ErrorKind


class Exit(IntEnum):
    OK = 0
    FAILED = 1
    USAGE = 2
    NOT_SAVED = 3
    PARTIAL = 4
    TOOL_DENIED = 5
    BUG = 70  # sysexits' EX_SOFTWARE: an internal error
    HANGUP = 129
    INTERRUPTED = 130
    PIPE_CLOSED = 141
    TERMINATED = 143


MEANING: dict[Exit, str] = {
    Exit.OK: "done: every turn or request succeeded",
    Exit.FAILED: "the turn failed (server or connection error, no key), every pane or request failed,"
    " or nothing could be read",
    Exit.USAGE: "bad arguments, a bad config file, an incomplete -m/--base-url, a base URL that is not http(s),"
    " or no prompt",
    Exit.NOT_SAVED: "it ran, but the session log or an output file could not be written (said on stderr)",
    Exit.PARTIAL: "some turns failed and others succeeded (a compare pane failed), or a bench lost a cluster node",
    Exit.TOOL_DENIED: "the model called a tool that --allow-tool/--allow-tools did not allow: the turn stopped"
    " there (ttft ask --mcp; ttft compare --mcp --headless: that pane's turn)",
    Exit.BUG: "an unexpected error in ttft (a bug): one line on stderr names its crash report; what was logged is kept",
    Exit.HANGUP: "stopped by SIGHUP (a closed terminal); the turn in flight is logged as cancelled",
    Exit.INTERRUPTED: "stopped by Ctrl-C; the turn in flight is logged as cancelled",
    Exit.PIPE_CLOSED: "stdout's reader went away (`ttft sessions | head -1`): stopped quietly, as on SIGPIPE",
    Exit.TERMINATED: "stopped by SIGTERM; the turn in flight is logged as cancelled",
}


def for_error_kind(kind: ErrorKind | str | None) -> Exit:
    """The code for a failure of this kind (a ProviderError's or a record's ``error.type``): a usage error
    (``telemetry.errors.USAGE_KINDS``: the command line or the config file was wrong, not a server), else
    a failed turn."""
    if kind == ErrorKind.TOOL_NOT_ALLOWED:
        return Exit.TOOL_DENIED
    return Exit.USAGE if kind in USAGE_KINDS else Exit.FAILED


def for_turns(turns: Iterable[tuple[str, ErrorKind | str | None]]) -> Exit:
    """The code for finished turns, given as ``(status, error kind)``: all ok, some ok, or none."""
    done = list(turns)
    ok = sum(status == "ok" for status, _ in done)
    if done and ok == len(done):
        return Exit.OK
    if ok:
        return Exit.PARTIAL
    kinds = [kind for status, kind in done if status == "error"]
    return for_error_kind(kinds[0]) if kinds and all(k in USAGE_KINDS for k in kinds) else Exit.FAILED


def table() -> str:
    """The table for ``--help`` (one line per code)."""
    return "\n".join(f"  {int(code):>3}  {text}" for code, text in MEANING.items())
