"""Crash reports: an exception ttft did not foresee, written whole for a bug report, masked, for its owner only.

A person never sees a traceback: the command line and the chat say one line naming this file
instead (``tui.crash``). The file holds what a maintainer needs (the traceback, where it happened,
the versions) and no secret: the whole text goes through :func:`telemetry.log.secrets.mask`, the one
masker of every text that leaves ttft (known keys, secret-named environment variables, header values,
URL credentials and query values). No local variable is written, and of the command line only its
command and option names: a prompt or a URL typed there stays out.

The files live in ``crashes/`` under the data folder, mode 0600 (``private_files``); the newest
:data:`KEEP` are kept.
"""

from __future__ import annotations

import os
import platform
import sys
import time
import traceback
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from .. import events as ev
from ..errors import ErrorKind
from . import private_files
from .secrets import mask
from .turns import data_dir

KEEP = 20  # crash reports kept; older ones are removed as new ones are written


BUG_HINT = "This looks like a bug in ttft; the turn and its partial answer are kept in the session log."
_REPORTED: dict[tuple[str, str], Path | None] = {}  # one report per kind of bug and place, per process


def version() -> str:
    """ttft's installed version, for the report."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("ttft")
    except PackageNotFoundError:
        return "0+unknown"


def crashes_dir() -> Path:
    return data_dir() / "crashes"


def command_shape(argv: Sequence[str]) -> str:
    """``ttft ask -m --base-url``: the command and its option names, never a value (a prompt, a URL)."""
    words = [a.split("=", 1)[0] for a in argv if a.startswith("-")]
    command = next((a for a in argv if not a.startswith("-")), "")
    return " ".join(["ttft", *([command] if command else []), *words])


def report_text(exc: BaseException, where: str, *, version: str, argv: Sequence[str] = ()) -> str:
    """The report of ``exc`` as it is written: masked, without local variables."""
    lines = [
        "ttft crash report: an unexpected error, a bug in ttft. Attach this file to a bug report.",
        f"when:    {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
        f"where:   {where}",
        f"command: {command_shape(argv)}",
        f"ttft:    {version}",
        f"python:  {sys.version.split()[0]} ({platform.python_implementation()})",
        f"system:  {platform.platform()}",
        "",
        *traceback.format_exception(exc),
    ]
    return mask("\n".join(line.rstrip("\n") for line in lines) + "\n")


def write_report(exc: BaseException, where: str, *, version: str, argv: Sequence[str] = ()) -> Path:
    """Write the report of ``exc`` (mode 0600) and give its path; OSError when it cannot be written."""
    folder = crashes_dir()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    path = folder / f"crash-{stamp}-{os.getpid()}-{time.monotonic_ns() % 1_000_000:06d}.txt"
    private_files.replace(path, report_text(exc, where, version=version, argv=argv).encode("utf-8", "replace"))
    _prune(folder)
    return path


def _prune(folder: Path) -> None:
    try:
        reports = sorted(folder.glob("crash-*.txt"), key=lambda p: p.stat().st_mtime_ns)
        for old in reports[:-KEEP]:
            old.unlink(missing_ok=True)
    except OSError:
        pass  # a report was written; keeping the folder small is best effort


def report_once(exc: BaseException, where: str) -> Path | None:
    """:func:`write_report` for a bug that ended a turn, once per kind (its class and the line that
    raised it) in this process: a bench whose every request meets it writes one file. None when it
    cannot be written (the turn's own record still says what broke)."""
    frames = traceback.extract_tb(exc.__traceback__)
    key = (type(exc).__name__, f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "")
    if key not in _REPORTED:
        try:
            _REPORTED[key] = write_report(exc, where, version=version())
        except Exception:  # the last resort: never raised from here
            _REPORTED[key] = None
    return _REPORTED[key]


def with_report(failed: ev.Failed, exc: BaseException, where: str) -> ev.Failed:
    """``failed``, and when it is a bug (its kind a class name, no :class:`ErrorKind`) its hint naming
    the crash report, so the error card, ``ttft ask``'s stderr and the log say where the traceback is."""
    if isinstance(failed.error_type, ErrorKind):
        return failed
    path = report_once(exc, where)
    return replace(failed, hint=f"{BUG_HINT} Its crash report: {path}" if path else BUG_HINT)
