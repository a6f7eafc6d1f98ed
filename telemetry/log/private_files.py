"""Files only their owner may read: what a person typed (prompt history, drafts) kept beside the logs.

Each is created with mode 0600 and tightened to it when found wider (a file copied in, an old umask),
written whole or not at all (a replace goes through a temporary file in the same folder), and read
with a size limit: the disk is outside input, and a file swapped for a huge one must not stall the
chat that reads it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

MODE = 0o600


def _tighten(fd: int) -> None:
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077 and hasattr(os, "fchmod"):
        os.fchmod(fd, MODE)


def append(path: Path, data: bytes) -> None:
    """``data`` at the end of ``path`` in one write (whole lines from several processes never interleave)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), MODE)
    try:
        _tighten(fd)
        _write_all(fd, data)
    finally:
        os.close(fd)


def replace(path: Path, data: bytes) -> None:
    """``path`` now holds exactly ``data``: written to a temporary file beside it, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), MODE)
    try:
        try:
            _tighten(fd)
            _write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:
            raise OSError("the write was cut short (no space left on the device?)")
        view = view[n:]


def read_tail(path: Path, limit: int) -> bytes:
    """The last ``limit`` bytes of ``path`` (all of it when smaller), starting at a line's beginning
    when cut; b"" when it is missing. Other OSErrors are the caller's to report."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return b""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            raise OSError(f"{path} is not a regular file")
        size = f.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        f.seek(start)
        data = f.read(limit)
    if start:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return data
