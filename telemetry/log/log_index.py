"""A session log's index: its listing tally kept in ``.index/`` beside it, up to date as turns are appended.

``ttft sessions`` shows each log's turns, errors, models and medians. Reading a year of turns for that
takes seconds, so the tally is kept in ``.index/SESSION.json`` (the byte offset it counts up to, the
counts, the models, the turn indices taken as runs) and ``.index/SESSION.values`` (the TTFT and TPOT of
each ok turn, two float64 each: what the medians are taken of). The writer (``SessionLog.append``)
brings it forward by its own line while it holds the log's lock, so a log that ttft wrote is never read
whole to list it; a listing reads only what lies past the index's offset (another version's appends, a
log copied in) and moves the index forward.

An index is trusted only while it describes the file in hand: the same inode, the same first bytes,
the same bytes just before its offset, and an offset within the file. A log replaced, cut or
rewritten is counted again from its start. Index writes are whole or not at all (the header is
renamed into place) and take ``.index/SESSION.lock``; a write only moves the index on from the
offset it was read at (compare and swap), so two counts of the same bytes never both land, and a
turn is counted once. Best effort: an index that cannot be read or written just means a full read.
"""

from __future__ import annotations

import bisect
import contextlib
import math
import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from . import private_files

try:
    import fcntl
except ImportError:  # Windows: no lock; the compare and swap alone keeps two counts apart
    fcntl = None  # type: ignore[assignment]

INDEX_DIR = ".index"
VERSION = 3  # 3: header and values apart, kept by the writer (an index of 2 or older is counted again)
HEAD_BYTES = 256  # a log's first bytes, kept to notice a replaced file
TAIL_BYTES = 64  # the bytes just before the offset, kept to notice a file rewritten past its head
MAX_RUNS = 512  # turn indices kept as runs up to this many; past it (a log of scattered indices) none are kept
_PAIR = 16  # bytes of one ok turn's (ttft, tpot) in the values file
_MISSING = math.nan  # a figure the turn did not have


@dataclass
class Tally:
    """What the listing shows of a log, counted up to ``offset`` (a line's end)."""

    head: bytes = b""
    offset: int = 0
    inode: int = 0
    tail: bytes = b""
    turns: int = 0
    errors: int = 0
    bad: int = 0
    started_at: str | None = None
    models: list[str] = field(default_factory=list)
    # [first, last] runs of the turn indices lines name (as the writer reads them), or None past MAX_RUNS
    runs: list[list[int]] | None = field(default_factory=list)
    values: array[float] = field(default_factory=lambda: array("d"))  # ttft, tpot of each ok turn from values_from
    values_from: int = 0  # the pairs before these were left in the file (the writer reads none of them)
    saved_values: int = 0  # how many pairs the values file held when read

    def add(self, rec: dict[str, Any]) -> None:
        """One well-formed record counted."""
        self.turns += 1
        if self.turns == 1:
            self.started_at = rec.get("started_at")
        model = f"{rec.get('provider')}:{rec.get('model')}"
        if model not in self.models:
            self.models.append(model)
        if rec.get("status") == "error":
            self.errors += 1
        if rec.get("status") != "ok":  # as the report and the chat's summary: a cut turn's figures are not its speed
            return
        metrics = rec.get("metrics") or {}
        for key in ("ttft_ms", "tpot_ms"):
            v = metrics.get(key)
            self.values.append(float(v) if isinstance(v, int | float) and not isinstance(v, bool) else _MISSING)

    def take(self, index: int | None) -> None:
        """A line's turn index noted as taken."""
        runs = self.runs
        if index is None or runs is None:
            return
        if runs and runs[-1][1] + 1 == index:  # the usual case: the next index
            runs[-1][1] = index
            return
        at = bisect.bisect_right(runs, [index, math.inf])  # runs[at - 1] starts at or before index
        if at and runs[at - 1][1] >= index:
            return  # already taken
        runs.insert(at, [index, index])
        for k in (at, at - 1):  # join with the neighbours it now touches
            if 0 <= k < len(runs) - 1 and runs[k][1] + 1 >= runs[k + 1][0]:
                runs[k][1] = max(runs[k][1], runs[k + 1][1])
                del runs[k + 1]
        if len(runs) > MAX_RUNS:
            self.runs = None

    def taken(self) -> set[int] | None:
        """The turn indices taken up to the offset, or None when they were too scattered to keep."""
        if self.runs is None:
            return None
        return {i for lo, hi in self.runs for i in range(lo, hi + 1)}

    def medians(self) -> tuple[float | None, float | None]:
        """The medians of the ok turns' TTFT and TPOT (None when none had one)."""

        def med(values: list[float]) -> float | None:
            if not values:
                return None
            values.sort()
            mid = len(values) // 2
            return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2

        pairs = self.values
        return (
            med([v for v in pairs[0::2] if v == v]),  # NaN != NaN: a missing figure is left out
            med([v for v in pairs[1::2] if v == v]),
        )

    def moved_past(self, line: bytes) -> None:
        """The offset moved past ``line`` (whose bytes follow the offset in the file)."""
        if len(self.head) < HEAD_BYTES:  # a short log's head grows with it
            self.head = (self.head + line)[:HEAD_BYTES]
        self.tail = (self.tail + line)[-TAIL_BYTES:]
        self.offset += len(line)


def _paths(log: Path) -> tuple[Path, Path, Path]:
    folder = log.parent / INDEX_DIR
    return folder / f"{log.stem}.json", folder / f"{log.stem}.values", folder / f"{log.stem}.lock"


@contextlib.contextmanager
def _locked(log: Path, *, exclusive: bool, create: bool) -> Iterator[None]:
    """The index's lock held (shared to read, exclusive to write). OSError when the folder cannot hold it."""
    lock = _paths(log)[2]
    if create:
        lock.parent.mkdir(mode=0o700, exist_ok=True)
    fd = private_files.open_private(lock, os.O_RDWR | (os.O_CREAT if create else 0))
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # releases the lock


def _pread(fd: int, size: int, at: int) -> bytes:
    return os.pread(fd, size, at) if size > 0 else b""


def _pwrite_all(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, at)
        if n <= 0:
            raise OSError("the index's write was cut short")
        view, at = view[n:], at + n


def _describes(t: Tally, fd: int, st: os.stat_result) -> bool:
    """Whether ``t`` counts the start of the file open as ``fd`` (stat ``st``), not another file's."""
    if not (0 <= t.offset <= st.st_size and t.inode == st.st_ino):
        return False
    if _pread(fd, len(t.head), 0) != t.head or len(t.head) != min(HEAD_BYTES, t.offset):
        return False
    return len(t.tail) == min(TAIL_BYTES, t.offset) and _pread(fd, len(t.tail), t.offset - len(t.tail)) == t.tail


def _parse(header: bytes, values: bytes | None) -> Tally | None:
    """A tally from the index's two files, or None when they are not one of this version's."""
    try:
        h = orjson.loads(header)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(h, dict) or h.get("version") != VERSION:
        return None
    try:
        n = h["values"]
        runs = h["runs"]
        t = Tally(
            head=bytes.fromhex(h["head"]),
            offset=h["offset"],
            inode=h["inode"],
            tail=bytes.fromhex(h["tail"]),
            turns=h["turns"],
            errors=h["errors"],
            bad=h["bad"],
            started_at=h["started_at"],
            models=[str(m) for m in h["models"]],
            runs=None if runs is None else [[int(lo), int(hi)] for lo, hi in runs],
        )
        ints = (t.offset, t.inode, t.turns, t.errors, t.bad, n)
        if not all(isinstance(x, int) and x >= 0 for x in ints) or not isinstance(t.started_at, str | None):
            return None
        t.saved_values = n
        if values is None:  # not read: new pairs go after the file's
            t.values_from = n
        elif len(values) < n * _PAIR:
            return None  # the values file lost its end: not this header's
        else:
            t.values.frombytes(values[: n * _PAIR])
    except (KeyError, TypeError, ValueError):
        return None
    return t


def load(log: Path, fd: int, *, values: bool = True) -> Tally | None:
    """The index of the log open as ``fd``, when there is one that describes it; else None. Without
    ``values``, the ok turns' figures are not read (the medians are not the caller's business)."""
    header_path, values_path, _ = _paths(log)
    try:
        with _locked(log, exclusive=False, create=False):
            header = header_path.read_bytes()
            figures = values_path.read_bytes() if values else None
    except OSError:
        return None
    t = _parse(header, figures)
    return t if t is not None and _describes(t, fd, os.fstat(fd)) else None


def new(fd: int) -> Tally:
    """An empty tally of the log open as ``fd``: counted from its start."""
    return Tally(inode=os.fstat(fd).st_ino)


def save(log: Path, t: Tally, based_on: int | None) -> bool:
    """Write ``t`` as the log's index when the index on disk still stands at ``based_on`` (the offset
    ``t`` was read at; None: ``t`` was counted from the start, and replaces whatever is there). Whole
    or not at all; False when it was not written (moved on meanwhile, or not writable)."""
    header_path, values_path, _ = _paths(log)
    try:
        with _locked(log, exclusive=True, create=True):
            if based_on is not None:
                try:
                    current = orjson.loads(header_path.read_bytes())
                except (OSError, orjson.JSONDecodeError):
                    return False
                if not isinstance(current, dict) or current.get("offset") != based_on:
                    return False  # another count moved it on (or replaced it) meanwhile: keep theirs
                if current.get("values") != t.saved_values or current.get("inode") != t.inode:
                    return False
            fd = private_files.open_private(values_path, os.O_RDWR | os.O_CREAT)
            try:
                keep = t.saved_values if based_on is not None else 0  # pairs already in the file, left as they are
                new_values = t.values[(keep - t.values_from) * 2 :].tobytes()
                _pwrite_all(fd, new_values, keep * _PAIR)
                os.ftruncate(fd, keep * _PAIR + len(new_values))
            finally:
                os.close(fd)
            header = {
                "version": VERSION,
                "head": t.head.hex(),
                "offset": t.offset,
                "inode": t.inode,
                "tail": t.tail.hex(),
                "turns": t.turns,
                "errors": t.errors,
                "bad": t.bad,
                "started_at": t.started_at,
                "models": t.models,
                "runs": t.runs,
                "values": t.values_from + len(t.values) // 2,
            }
            # not synced: an index lost to a crash is counted again (and _describes refuses a stale one)
            private_files.replace(header_path, orjson.dumps(header), sync=False)
            t.saved_values = t.values_from + len(t.values) // 2
            return True
    except OSError:
        return False


def appended(log: Path, fd: int, start: int, line: bytes, rec: dict[str, Any] | None, index: int | None) -> None:
    """The writer's part, under the log's lock: ``line`` was just written at ``start``; when the index
    counted the log up to ``start`` exactly, it now counts the line too (``rec``: the line as a reader
    parses it, None for a blank line, an empty dict for one it skips; ``index``: the turn index the
    writer reads in it). A log the index does not describe is left for the next listing to count.
    Never raises for the file system: the turn is written whatever becomes of its index."""
    with contextlib.suppress(OSError):
        _appended(log, fd, start, line, rec, index)


def _appended(log: Path, fd: int, start: int, line: bytes, rec: dict[str, Any] | None, index: int | None) -> None:
    based_on: int | None = None
    if start == 0:
        t = new(fd)
    else:
        found = load(log, fd, values=False)
        if found is None or found.offset != start:
            return  # no index, or one behind (a torn line, another version's appends): the listing counts it
        t, based_on = found, start
    if rec == {}:
        t.bad += 1
    elif rec is not None:
        t.add(rec)
    t.take(index)
    t.moved_past(line)
    save(log, t, based_on)
