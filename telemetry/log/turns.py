"""The durable turn log: one ``ttft.turn/2`` JSON line per turn, fsynced as each turn ends.

Logs live in the user data directory (``platformdirs``), one file per session;
``TTFT_DATA_DIR`` overrides the place (tests, CI, portable setups).

Writing: a log is opened as every private file is (``private_files.open_private``: never through a
symbolic link, mode 0600, an older file's mode tightened). Each append holds an exclusive ``flock``
on the file while it picks the turn's index and writes, so several processes appending to one
session (two ``ttft ask --session ID``) never interleave lines or repeat a ``turn_index``. A write that fails or
comes up short (disk full) is cut back off the file and raised as ``LogWriteError``; a
line torn by a crash is closed with a newline before the next record, so it costs only
itself. Reading: a line that is not valid UTF-8, not JSON, or not a well-formed
record of a schema it knows is skipped and counted (``Skipped``), never fatal; a ``ttft.turn/1``
line is upgraded to the current form as it is read (``record.upgrade``). Listing and
naming sessions is :mod:`telemetry.log.sessions`.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import secrets
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeGuard

import orjson
import platformdirs

from .. import json_guard
from ..errors import TtftError
from ..record import SCHEMAS, TurnRecord, upgrade
from . import log_index, private_files
from .json_line import encode_line
from .quote import quoted
from .secrets import masked_record
from .surrogates import scrub_value

try:
    import fcntl
except ImportError:  # Windows: no flock; appends are still whole lines, indices may repeat across processes
    fcntl = None  # type: ignore[assignment]


def data_dir() -> Path:
    override = os.environ.get("TTFT_DATA_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir("ttft", appauthor=False))


def sessions_dir() -> Path:
    return data_dir() / "sessions"


def new_session_id() -> str:
    """The start's second and 3 random bytes: two sessions begun in one second collide once in 16 million
    (:class:`SessionLog` also steps past an id whose file exists)."""
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


# A session id names one file in the sessions folder, so ``--session ../../x`` or an absolute path
# cannot write elsewhere: no separator (nor a drive's ":"), no leading "." (".", "..", hidden files),
# no control character. Spaces and the like stay allowed: a file someone renamed still resumes.
_BAD_ID = re.compile(r"[/\\:\x00-\x1f\x7f-\x9f]|^\.")


def check_session_id(session_id: str) -> str:
    """``session_id`` itself when it is a valid id, else ValueError with a message fit to print."""
    if not session_id or len(session_id) > 200 or _BAD_ID.search(session_id):
        raise ValueError(
            f"{quoted(session_id)} is not a session id: it names a file in the sessions folder, so it may not "
            "hold '/', '\\', ':' or control characters, start with '.', or pass 200 characters "
            "(e.g. 20260101-090000-a1b2)"
        )
    return session_id


class LogWriteError(TtftError, OSError):
    """A turn could not be written to its session log (unwritable folder, disk full, short write).

    The record itself is intact in memory; the message names the file and the cause.
    """

    def __init__(self, path: Path, cause: BaseException | str) -> None:
        reason = cause if isinstance(cause, str) else (getattr(cause, "strerror", None) or str(cause))
        super().__init__(f"could not write the session log {path}: {reason}")
        self.path = path


# Our own lines start {"schema":..,"session_id":..,"turn_index":N: the index is read without parsing the line.
_INDEX = re.compile(rb'"turn_index":\s*(-?\d+)')
_INDEX_SCAN = 512  # bytes of a line's start searched for its index


def line_index(line: bytes) -> int | None:
    """The turn index a log line names (read from its start, or parsed), or None."""
    m = _INDEX.search(line, 0, _INDEX_SCAN)
    if m is not None:
        return int(m.group(1))
    try:
        rec = json_guard.loads(line)
    except ValueError:
        return None
    index = rec.get("turn_index") if isinstance(rec, dict) else None
    return index if isinstance(index, int) else None


class SessionLog:
    """Append-only; each append is flushed and fsynced, so a crash loses at most the turn in flight."""

    def __init__(self, session_id: str | None = None, directory: Path | None = None) -> None:
        folder = directory or sessions_dir()
        if session_id:
            self.session_id = check_session_id(session_id)
        else:  # a new session never appends to another's file
            for _ in range(8):
                self.session_id = new_session_id()
                if not (folder / f"{self.session_id}.jsonl").exists():
                    break
        self.path = folder / f"{self.session_id}.jsonl"
        self.write_errors: list[LogWriteError] = []  # every failed append, for the front end to report
        self._indices: set[int] = set()  # turn indices in the file up to _scanned bytes
        self._scanned = 0

    def _scan(self, f: Any, end: int) -> None:
        """Learn the indices of the lines between what was read before and ``end`` (others' appends)."""
        if end < self._scanned:  # the file was replaced or cut: read it all again
            self._indices, self._scanned = set(), 0
        if self._scanned == 0 and end > 0:  # the indices the log's index holds: only the lines past it are read
            tally = log_index.load(self.path, f.fileno(), values=False)
            taken = tally.taken() if tally is not None and tally.offset <= end else None
            if tally is not None and taken is not None:
                self._indices, self._scanned = taken, tally.offset
        if end == self._scanned:
            return
        f.seek(self._scanned)
        pos = self._scanned
        for line in f:
            if pos + len(line) > end or not line.endswith(b"\n"):
                break  # past what we locked, or a torn last line: re-read next time
            pos += len(line)
            index = line_index(line)
            if index is not None:
                self._indices.add(index)
        self._scanned = pos

    def next_turn_index(self) -> int:
        """One more than the highest index logged (a hint: ``append`` settles the index under the lock)."""
        try:
            with os.fdopen(private_files.open_private(self.path, os.O_RDONLY), "rb") as f:  # as the append opens it
                self._scan(f, os.fstat(f.fileno()).st_size)
        except OSError:
            pass  # missing (a new session) or unreadable: the append will say so
        return max(self._indices, default=-1) + 1

    def append(self, record: TurnRecord | dict[str, Any]) -> TurnRecord | dict[str, Any]:
        """Write one record; returns it as written (its ``turn_index`` moved past any index another
        writer took meanwhile). Raises ``LogWriteError`` (also kept in ``write_errors``) when it was not
        written whole: the file is then left as it was, and the record is untouched in memory."""
        try:
            return self._append(record)
        except LogWriteError as exc:
            self.write_errors.append(exc)
            raise

    def _append(self, record: TurnRecord | dict[str, Any]) -> TurnRecord | dict[str, Any]:
        data = masked_record(record.to_dict() if isinstance(record, TurnRecord) else dict(record))  # its error's words
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # never through a link planted where the log goes; an older log found 0644 is made 0600
            fd = private_files.open_private(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
        except OSError as exc:
            raise LogWriteError(self.path, exc) from exc
        try:
            with open(os.dup(fd), "rb") as reader:
                if fcntl is not None:
                    fcntl.flock(fd, fcntl.LOCK_EX)  # released by the close below
                start = os.fstat(fd).st_size
                self._scan(reader, start)
                index = asked = data.get("turn_index")
                if isinstance(index, int) and index in self._indices:
                    index = data["turn_index"] = max(self._indices) + 1
                line = encode_line(data)
                if start and os.pread(fd, 1, start - 1) != b"\n":
                    line = b"\n" + line  # close a torn line first: it stays one skipped line, not two lost turns
                try:
                    write_all(fd, line)
                    os.fsync(fd)
                except OSError as exc:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, start)  # no fragment left behind for the next turn to be glued onto
                    raise LogWriteError(self.path, exc) from exc
                if isinstance(index, int):
                    self._indices.add(index)
                if self._scanned == start:
                    self._scanned = start + len(line)
                # the listing's index counts the line now, under the same lock (best effort: never fails the turn)
                log_index.appended(self.path, fd, start, line, parse_line(line), line_index(line))
        except LogWriteError:
            raise
        except OSError as exc:  # reading the file back, the lock
            raise LogWriteError(self.path, exc) from exc
        finally:
            os.close(fd)
        if index == asked or not isinstance(index, int):
            return record
        if isinstance(record, TurnRecord):
            return replace(record, turn_index=index)
        return {**record, "turn_index": index}

    def records(self, skipped: Skipped | None = None) -> list[dict[str, Any]]:
        return list(read_records(self.path, skipped)) if self.path.exists() else []


def write_all(fd: int, data: bytes) -> None:
    """``os.write`` until all of ``data`` is out: a short write is not success."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError(errno.ENOSPC, "the write was cut short (no space left on the device?)")
        view = view[n:]


# --- reading -----------------------------------------------------------------------------
NUMBERED = 20  # unreadable lines whose numbers a Skipped keeps, per file


@dataclass
class Skipped:
    """What the readers could not use, per file, so a command can say so once (never a traceback)."""

    lines: dict[Path, int] = field(default_factory=dict)  # unreadable lines per file
    files: dict[Path, str] = field(default_factory=dict)  # files that could not be read at all, and why
    # The 1-based numbers of a file's first unreadable lines (up to NUMBERED), where the reader knows
    # them (read_records does): a reader of the log is told where to look, and a damaged year of logs
    # does not fill memory with numbers.
    numbers: dict[Path, list[int]] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.lines or self.files)

    def number(self, path: Path, line: int) -> None:
        kept = self.numbers.setdefault(path, [])
        if len(kept) < NUMBERED:
            kept.append(line)

    def message(self) -> str | None:
        """One sentence for everything skipped, or None."""
        parts = []
        if self.lines:
            n = sum(self.lines.values())
            what = f"{n} unreadable line{'s' if n != 1 else ''}"
            if len(self.lines) == 1:
                parts.append(f"skipped {what} in {next(iter(self.lines))}")
            else:
                each = ", ".join(f"{p.name} ({k})" for p, k in self.lines.items())
                parts.append(f"skipped {what} in {len(self.lines)} files: {each}")
        parts += [f"could not read {p}: {why}" for p, why in self.files.items()]
        return "; ".join(parts) or None


_NONE = type(None)
_NUM = (int, float)
_OPT_NUM = (int, float, _NONE)
_OPT_STR = (str, _NONE)

# What each field of a ttft.turn line must be when it is there (older lines lack newer fields).
_FIELDS: dict[str, type | tuple[type, ...]] = {
    "session_id": str,
    "turn_index": int,
    "started_at": _OPT_STR,
    "provider": _OPT_STR,
    "api": _OPT_STR,
    "model": _OPT_STR,
    "base_url": _OPT_STR,
    "settings": dict,
    "status": str,
    "error": (dict, _NONE),
    "attempts": int,
    "attempt_log": list,
    "prompt": _OPT_STR,
    "branch_of": (int, _NONE),
    "answer": _OPT_STR,
    "reasoning": _OPT_STR,
    "tool_calls": list,
    "stop_reason": _OPT_STR,
    "events_ms": dict,
    "metrics": dict,
    "tokens": dict,
    "server": (dict, _NONE),
    "http": (dict, _NONE),
    "notices": dict,
    "chunks": list,
    "diagnosis": _OPT_STR,
    "extra": dict,
}
_Spec = Mapping[str, type | tuple[type, ...]]
_ERROR_FIELDS: _Spec = {"type": _OPT_STR, "message": _OPT_STR, "status_code": (int, _NONE), "hint": _OPT_STR}
_BENCH_FIELDS: _Spec = {"level": _NUM, "index": int, "sent_at_ms": _OPT_NUM, "scheduled_at_ms": _OPT_NUM, "mode": str}
_COMPARE_FIELDS: _Spec = {"comparison_id": str, "pane": int, "pane_label": _OPT_STR, "trial": int, "prompt_index": int}


def _numbers(d: dict[str, Any]) -> bool:
    return all(isinstance(v, _OPT_NUM) for v in d.values())


def _chunk_ok(c: Any) -> bool:
    """A ``/2`` chunk object, or a ``/1`` triple ``[t_ms, kind, tokens]``."""
    if isinstance(c, dict):
        return isinstance(c.get("t_ms"), _NUM) and isinstance(c.get("kind"), str) and isinstance(c.get("tokens"), _NUM)
    return isinstance(c, list) and len(c) == 3 and isinstance(c[0], _NUM) and isinstance(c[2], _NUM)


def _fields_ok(d: dict[str, Any], spec: _Spec) -> bool:
    return all(k not in d or isinstance(d[k], t) for k, t in spec.items())


def well_formed(rec: Any) -> TypeGuard[dict[str, Any]]:
    """A ``ttft.turn`` record (any schema read) whose fields have the types every reader relies on."""
    if not isinstance(rec, dict) or rec.get("schema") not in SCHEMAS or not _fields_ok(rec, _FIELDS):
        return False
    for key, value in (rec.get("metrics") or {}).items():
        if key in ("itl_ms", "phases_ms"):
            if not (isinstance(value, dict) and _numbers(value)):
                return False
        elif key == "wait_ms":  # telemetry.wire; None without a first token, absent in older records
            if not (value is None or (isinstance(value, dict) and _numbers(value))):
                return False
        elif key.endswith(("_ms", "_per_s")) and not isinstance(value, _OPT_NUM):
            return False
    tokens = dict(rec.get("tokens") or {})
    if not isinstance(tokens.pop("source", None), _OPT_STR) or not _numbers(tokens):
        return False
    if not _numbers(rec.get("events_ms") or {}):
        return False
    if not all(_chunk_ok(c) for c in rec.get("chunks") or ()):
        return False
    if not all(isinstance(x, dict) for x in (*rec.get("attempt_log", ()), *rec.get("tool_calls", ()))):
        return False
    if rec.get("error") is not None and not _fields_ok(rec["error"], _ERROR_FIELDS):
        return False
    extra = rec.get("extra") or {}
    bench = extra.get("bench")
    if bench is not None and not (isinstance(bench, dict) and _fields_ok(bench, _BENCH_FIELDS)):
        return False
    return _fields_ok(extra, _COMPARE_FIELDS)


# A run of 20 digits: a number orjson may not read exactly (past 64 bits). Found with a C-level
# translate (every digit to "0", all else to " ") and one search: a fifteenth of a regular expression's time.
_DIGITS = bytes(48 if 48 <= b <= 57 else 32 for b in range(256))
_DIGIT_RUN = b"0" * 20
BAD_LINE: dict[str, Any] = {}  # parse_line's answer for a line that is not a usable record


def parse_line(raw: bytes) -> dict[str, Any] | None:
    """One log line as a record; None for a blank line, ``BAD_LINE`` for one that is not well formed."""
    if not raw.strip():
        return None
    try:
        json_guard.check(raw)  # past the guard's depth or size: refused before any parser runs
        # orjson reads what both parsers read as the stdlib does, 3x as fast (a year of logs is read
        # in seconds); what it refuses (a NaN, a lone surrogate's escape) the stdlib reads, as before,
        # and so a line with a run of 20 digits (an integer past 64 bits, which orjson reads as a
        # float). bytes: strict UTF-8, so a bad byte is a ValueError in both.
        if _DIGIT_RUN in raw.translate(_DIGITS):
            rec = json.loads(raw)
        else:
            try:
                rec = orjson.loads(raw)
            except orjson.JSONDecodeError:
                rec = json.loads(raw)
    except (ValueError, RecursionError):  # not JSON, or refused by the guard (telemetry.json_guard)
        return BAD_LINE
    if not well_formed(rec):
        return BAD_LINE
    rec = upgrade(rec)
    if b"\\ud" in raw or b"\\uD" in raw:  # an escaped surrogate: scrub any that is alone
        scrubbed: dict[str, Any] = scrub_value(rec)  # the same shape, its strings scrubbed
        return scrubbed
    return rec


def count_bad(path: Path, bad: int, skipped: Skipped | None) -> None:
    if bad and skipped is not None:
        skipped.lines[path] = skipped.lines.get(path, 0) + bad


def read_records(path: Path, skipped: Skipped | None = None) -> Iterator[dict[str, Any]]:
    """Every well-formed ``ttft.turn`` line, in the current form, one at a time (never the whole file
    in memory). Any other line (a torn last line from a crash, bytes that are not UTF-8, a field of
    the wrong type) is skipped, and counted (and its line number kept) in ``skipped`` when given."""
    bad = 0
    try:
        with path.open("rb") as f:
            for number, raw in enumerate(f, 1):
                rec = parse_line(raw)
                if rec is BAD_LINE:
                    bad += 1
                    if skipped is not None:
                        skipped.number(path, number)
                elif rec is not None:
                    yield rec
    finally:
        count_bad(path, bad, skipped)


TAIL_BLOCK = 64 * 1024  # bytes read per step backwards from a log's end


def tail_records(path: Path, k: int, skipped: Skipped | None = None) -> list[dict[str, Any]]:
    """The last ``k`` well-formed records, in file order (see :func:`tail_records_from`)."""
    return tail_records_from(path, k, skipped)[0]


def tail_records_from(path: Path, k: int, skipped: Skipped | None = None) -> tuple[list[dict[str, Any]], int]:
    """The last ``k`` well-formed records in file order, and the byte offset where the first of them
    starts. Read backwards from the end in blocks, so a resumed session draws at once however long its
    log: only the lines among the last ``k`` are parsed. Unreadable lines met are counted in ``skipped``."""
    out: list[dict[str, Any]] = []
    bad = 0
    first = 0
    with path.open("rb") as f:
        pos = first = f.seek(0, os.SEEK_END)
        head = b""  # the start of a line cut by the block boundary: completed by the next block back
        while pos > 0 and len(out) < k:
            size = min(TAIL_BLOCK, pos)
            pos -= size
            f.seek(pos)
            buf = f.read(size) + head
            lines = buf.split(b"\n")
            head = lines.pop(0) if pos > 0 else b""
            at = pos + len(buf) + 1  # where the line after the one in hand starts (one past a newline)
            for raw in reversed(lines):
                at -= len(raw) + 1
                rec = parse_line(raw)
                if rec is BAD_LINE:
                    bad += 1
                elif rec is not None:
                    out.append(rec)
                    first = at
                    if len(out) == k:
                        break
    count_bad(path, bad, skipped)
    out.reverse()
    return out, first
