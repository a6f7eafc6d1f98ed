"""Files only their owner may read: the session logs, what a person typed (prompt history, drafts), and
a run's files (the bench's, the probe's). :func:`open_private` is the one way each is opened.

None is written through a symbolic link or into a FIFO or a device. Each is created with mode 0600
and tightened to it when found wider (a file copied in, an old umask, an older ttft), written whole or
not at all (a replace goes through a temporary file in the same folder), and read with a size limit:
the disk is outside input, and a file swapped for a huge one must not stall the chat that reads it.
An append to a file whose last line was cut (a crash, a full disk, an editor) starts on a line of its
own: the cut line stays one unreadable line, and the new one is kept.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path

from ..errors import TtftError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

MODE = 0o600
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


class NotAFileError(TtftError, OSError):
    """The path is a symbolic link or something other than a regular file: not opened, not written."""


def open_private(path: Path, flags: int) -> int:
    """``path`` opened with ``flags`` (``O_CREAT`` among them creates it 0600) as a regular file of ours:
    every file ttft writes beside its logs or into a run's folder is opened here.

    - A symbolic link is not followed (``O_NOFOLLOW``): a link planted where a log goes would have its
      target written. NotAFileError says so.
    - A FIFO or a device is refused after the open, which ``O_NONBLOCK`` keeps from waiting for a writer.
    - A file found readable by others (an older ttft, a copy, another umask) is tightened to 0600.
    """
    try:
        fd = os.open(path, flags | _NOFOLLOW | _NONBLOCK | getattr(os, "O_CLOEXEC", 0), MODE)
    except OSError as exc:
        # Linux and macOS say ELOOP for a link under O_NOFOLLOW, FreeBSD EMLINK
        if exc.errno in (errno.ELOOP, errno.EMLINK) and os.path.islink(path):
            raise NotAFileError(exc.errno, "it is a symbolic link, which ttft does not follow", str(path)) from None
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotAFileError(errno.EINVAL, "it is not a regular file", str(path))
        if st.st_mode & 0o077 and hasattr(os, "fchmod"):
            os.fchmod(fd, MODE)
        if _NONBLOCK:
            os.set_blocking(fd, True)  # back to ordinary blocking reads and writes
    except BaseException:
        os.close(fd)
        raise
    return fd


def append(path: Path, data: bytes) -> None:
    """``data`` (whole lines) at the end of ``path`` in one write, under a lock (several processes'
    lines never interleave). A cut last line is closed first, so ``data`` is never glued onto it;
    a write that fails leaves the file as it was."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_private(path, os.O_RDWR | os.O_APPEND | os.O_CREAT)
    try:
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


def replace(path: Path, data: bytes, *, sync: bool = True) -> None:
    """``path`` now holds exactly ``data``: written to a temporary file beside it, then renamed over it
    (a link found at ``path`` is replaced, never written through). ``sync``: on the disk before the
    rename (a cache that can be built again skips it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        try:
            _write_all(fd, data)
            if sync:
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
        fd = open_private(path, os.O_RDONLY)
    except FileNotFoundError:
        return b""
    with os.fdopen(fd, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        start = max(0, size - limit)
        f.seek(start)
        data = f.read(limit)
    if start:
        cut = data.find(b"\n")
        data = data[cut + 1 :] if cut >= 0 else b""
    return data
