"""Files only their owner may read: what a person typed (prompt history, drafts) kept beside the logs.

Each is created with mode 0600 and tightened to it when found wider (a file copied in, an old umask),
written whole or not at all (a replace goes through a temporary file in the same folder), and read
with a size limit: the disk is outside input, and a file swapped for a huge one must not stall the
chat that reads it. An append to a file whose last line was cut (a crash, a full disk, an editor)
starts on a line of its own: the cut line stays one unreadable line, and the new one is kept.
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

MODE = 0o600


def _tighten(fd: int) -> None:
    st = os.fstat(fd)
    if stat.S_ISREG(st.st_mode) and st.st_mode & 0o077 and hasattr(os, "fchmod"):
        os.fchmod(fd, MODE)


def append(path: Path, data: bytes) -> None:
    """``data`` (whole lines) at the end of ``path`` in one write, under a lock (several processes'
    lines never interleave). A cut last line is closed first, so ``data`` is never glued onto it;
    a write that fails leaves the file as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), MODE)
    try:
        _tighten(fd)
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)  # released by the close below
        start = os.fstat(fd).st_size
        if start and os.pread(fd, 1, start - 1) != b"\n":
            data = b"\n" + data
        try:
            _write_all(fd, data)
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)  # no fragment left for the next line to be glued onto
            raise
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
