"""A session log read as another process appends to it: each whole new line once, in order.

:class:`LogFollower` keeps its place in the file (its inode and byte offset). Each :meth:`~LogFollower.read`
takes what was appended since, up to ``step`` bytes (a log of a million calls is read in steps, never
all at once), and returns the records of its whole lines, parsed as every log line is
(:func:`telemetry.log.turns.parse_line`: a line not well formed is counted, never fatal). A last line
with no newline yet is left for the next read, the writer being mid-write. A log not there yet is
empty; a log replaced (another inode) or cut (shorter than the offset, or the bytes just before it no
longer those read there: cut and written again) is read again from its start,
and said (``restarted``), so the reader can drop what it would see twice. The file is opened as every
log is (:func:`telemetry.log.private_files.open_private`): never through a link, never a FIFO.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import private_files
from .turns import BAD_LINE, parse_line

STEP_BYTES = 8 * 1024 * 1024  # read per call at most: a long log is caught up with over several reads
MAX_LINE_BYTES = 64 * 1024 * 1024  # a "line" longer than this with no newline is no record: dropped
CHECK_BYTES = 64  # the bytes before the place kept, to see that a log cut and written again is another


@dataclass
class Read:
    """What one :meth:`LogFollower.read` found: the new records, the lines that were not, and whether
    the log was read again from its start (replaced or cut)."""

    records: list[dict[str, Any]] = field(default_factory=list)
    bad: int = 0
    restarted: bool = False
    more: bool = False  # past ``step``: more is there already


class LogFollower:
    """One log followed as it grows (see the module doc). Not thread-safe: one reader."""

    def __init__(self, path: Path, step: int = STEP_BYTES) -> None:
        self.path = path
        self.step = step
        self._fd: int | None = None
        self._ino: tuple[int, int] | None = None
        self._offset = 0
        self._last = b""  # the last bytes read, just before _offset: still there unless the log was cut
        self._tail = b""  # a line begun but not ended yet
        self._skipping = False  # inside an overlong line: dropped up to its newline

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _reopen(self) -> bool:
        """Open the file at the path from its start; False when it is not there (yet)."""
        self.close()
        try:
            self._fd = private_files.open_private(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        st = os.fstat(self._fd)
        self._ino = (st.st_dev, st.st_ino)
        self._offset, self._last, self._tail, self._skipping = 0, b"", b"", False
        return True

    def read(self) -> Read:
        """The records appended since the last read (see the module doc). OSError for a log that cannot
        be read (a link, a FIFO, no permission): the caller's to say."""
        out = Read()
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._fd is not None:  # removed: its lines were read; a new file there starts again
                self.close()
                self._ino = None
            return out
        if self._fd is None or (st.st_dev, st.st_ino) != self._ino:
            had = self._ino is not None
            if not self._reopen():
                return out
            out.restarted = had
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        if size < self._offset or (
            self._offset and os.pread(self._fd, len(self._last), self._offset - len(self._last)) != self._last
        ):
            # cut (and maybe written again past where it was read): what is there now is read from its start
            self._offset, self._last, self._tail, self._skipping = 0, b"", b"", False
            out.restarted = True
        n = min(size - self._offset, self.step)
        if n <= 0:
            return out
        data = os.pread(self._fd, n, self._offset)
        self._offset += len(data)
        self._last = (self._last + data)[-CHECK_BYTES:]
        out.more = self._offset < size
        self._lines(data, out)
        return out

    def _lines(self, data: bytes, out: Read) -> None:
        if self._skipping:  # inside an overlong line: up to its end, dropped
            cut = data.find(b"\n")
            if cut < 0:
                return
            data, self._skipping = data[cut + 1 :], False
        lines = (self._tail + data).split(b"\n")
        self._tail = lines.pop()
        for raw in lines:
            rec = parse_line(raw)
            if rec is BAD_LINE:
                out.bad += 1
            elif rec is not None:
                out.records.append(rec)
        if len(self._tail) > MAX_LINE_BYTES:
            self._tail, self._skipping = b"", True
            out.bad += 1
