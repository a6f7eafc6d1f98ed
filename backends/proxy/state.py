"""The running proxies' state files: each run says where it listens and logs, so ``ttft proxy --watch``
finds it from another terminal.

A run :func:`publish`-es ``proxies/SESSION.json`` in the data directory once it listens: its pid,
port, base URL, upstream (credentials redacted), session id, the session log it appends to, its
program's name (argv[0]'s last part: never its arguments, which may hold a key), and with ``--otlp``
its OTLP receiver's endpoint (what that receives is not logged: a watch says it does not see it). The
file is private (0600, never through a link) and written whole under a hidden name, locked (an
exclusive ``flock``), then renamed into place, so a reader never finds it half written or unlocked.
The run holds the lock until it ends, then removes the file (:meth:`StateFile.remove`).

:func:`running` lists the runs alive: a file whose lock a reader can take belongs to a process that
died without removing it (the kernel let go of its lock), whatever its pid became since; it is removed.
Each run's :func:`publish` first clears what crashed runs left (:func:`sweep`): such state files, and
the hidden temporary file of a publish cut short between its write and its rename.
Where there is no ``flock`` (Windows), the pid is asked whether it lives. Each file is read as outside
input: capped in size, every field type-checked, one that does not read is skipped.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...telemetry import json_guard
from ...telemetry.log import private_files
from ...telemetry.log.turns import check_session_id, data_dir, write_all

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the pid stands in for the lock
    fcntl = None  # type: ignore[assignment]

SCHEMA = "ttft.proxy-state/1"
MAX_STATE_BYTES = 64 * 1024  # a state file is a few hundred bytes
# A temporary file whose writer's pid lives (reused, perhaps) but holds no lock on it, this old: cut short.
# A publish holds it for microseconds; the age covers the moment between its open and its lock.
STALE_TMP_S = 60.0
PROGRAM_CHARS = 64


def state_dir() -> Path:
    """Where the running proxies' state files are: ``proxies/`` in the data directory."""
    return data_dir() / "proxies"


@dataclass(frozen=True, slots=True)
class RunInfo:
    """One running proxy, as its state file says it (see the module doc)."""

    pid: int
    port: int
    base_url: str
    upstream: str  # "" when each path goes to its provider's own API
    session_id: str
    log_path: Path
    program: str = ""  # the program run under it (argv[0]'s last part), "" when none
    started_at: str = ""
    otlp_endpoint: str = ""  # its OTLP receiver (--otlp), "" when none: a watch does not see what it gets
    path: Path | None = None  # the state file itself, once written or found

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "pid": self.pid,
            "port": self.port,
            "base_url": self.base_url,
            "upstream": self.upstream,
            "session_id": self.session_id,
            "log": str(self.log_path),
            "program": self.program,
            "started_at": self.started_at,
            "otlp_endpoint": self.otlp_endpoint,
        }


def program_name(argv: tuple[str, ...]) -> str:
    """What a state file says of a program: argv[0]'s last part, cut, never its arguments."""
    return os.path.basename(argv[0])[:PROGRAM_CHARS] if argv else ""


class StateFile:
    """A run's own state file, locked while the run lives (see the module doc)."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def remove(self) -> None:
        """The run is over: the file goes, then the lock (a reader never finds it there unlocked)."""
        with contextlib.suppress(OSError):
            self.path.unlink()
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None


def publish(info: RunInfo, folder: Path | None = None) -> StateFile:
    """Write ``info``'s state file, locked, into ``folder`` (the data directory's by default); OSError
    when it cannot be (the run goes on, and ``--watch`` does not find it)."""
    folder = folder or state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        sweep(folder)
    path = folder / f"{check_session_id(info.session_id)}.json"
    tmp = folder / f".{path.name}.{os.getpid()}.tmp"
    fd = private_files.open_private(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a new file of ours: no one else holds it
        write_all(fd, json.dumps(info.to_dict(), ensure_ascii=False).encode("utf-8") + b"\n")
        os.replace(tmp, path)  # the lock goes with the file
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    return StateFile(path, fd)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def _held(fd: int, pid: int) -> bool:
    """Whether the run that wrote this file still lives: it holds the lock (the pid where no flock)."""
    if fcntl is None:
        return pid > 0 and _pid_alive(pid)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    return False  # taken: the writer is gone (the lock is let go with the close below)


def _info(doc: Any, path: Path) -> RunInfo | None:
    """The state file's fields, each of its type; None when one is not."""
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return None
    pid, port = doc.get("pid"), doc.get("port")
    texts = [doc.get(k) for k in ("base_url", "upstream", "session_id", "log", "program", "started_at")]
    if not (isinstance(pid, int) and isinstance(port, int) and 0 < port < 65536 and pid > 0):
        return None
    if not all(isinstance(t, str) and len(t) < 4096 for t in texts):
        return None
    base_url, upstream, session_id, log, program, started_at = (str(t) for t in texts)
    otlp = doc.get("otlp_endpoint", "")  # absent from a state file of a ttft before --otlp
    if not (isinstance(otlp, str) and len(otlp) < 4096):
        return None
    try:
        check_session_id(session_id)
    except ValueError:
        return None
    log_path = Path(log)
    if not log_path.is_absolute() or log_path.suffix != ".jsonl":
        return None
    return RunInfo(pid, port, base_url, upstream, session_id, log_path, program[:PROGRAM_CHARS], started_at, otlp, path)


def read_state(path: Path) -> tuple[RunInfo | None, bool]:
    """The run a state file describes (None when it does not read), and whether that run is alive."""
    try:
        fd = private_files.open_private(path, os.O_RDONLY)
    except OSError:
        return None, False
    try:
        data = os.read(fd, MAX_STATE_BYTES + 1)
        try:
            doc = json_guard.loads(data, "a proxy's state file", max_bytes=MAX_STATE_BYTES)
        except ValueError:
            doc = None
        info = _info(doc, path)
        return info, _held(fd, info.pid if info is not None else 0)
    finally:
        os.close(fd)


def alive(info: RunInfo) -> bool:
    """Whether the run ``info`` describes still runs (its state file there and held)."""
    if info.path is None:
        return False
    found, held = read_state(info.path)
    return found is not None and held


def _stale_tmp(path: Path) -> bool:
    """Whether ``.NAME.PID.tmp`` was left by a publish that never finished: its writer is dead, or (its pid
    reused) holds no lock on it and it is older than STALE_TMP_S."""
    pid_text = path.name.rsplit(".", 2)[-2] if path.name.count(".") >= 3 else ""
    if not pid_text.isdigit():
        return False  # not a name publish makes: not ours to remove
    pid = int(pid_text)
    if pid == os.getpid():
        return False
    if pid <= 0 or not _pid_alive(pid):
        return True
    if fcntl is None:
        return False
    try:
        fd = private_files.open_private(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        return not _held(fd, pid) and time.time() - os.fstat(fd).st_mtime > STALE_TMP_S
    finally:
        os.close(fd)


def sweep(folder: Path) -> None:
    """Remove what crashed runs left in ``folder``: state files no run holds (as :func:`running` does) and
    the temporary files of publishes cut short (:func:`_stale_tmp`)."""
    running(folder)
    for name in os.listdir(folder):
        path = folder / name
        if name.startswith(".") and name.endswith(".tmp") and _stale_tmp(path):
            with contextlib.suppress(OSError):
                path.unlink()


def running(folder: Path | None = None) -> list[RunInfo]:
    """The proxies running now, oldest first; stale state files found on the way are removed."""
    folder = folder or state_dir()
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    out: list[RunInfo] = []
    for name in names:
        if name.startswith(".") or not name.endswith(".json"):
            continue
        path = folder / name
        info, held = read_state(path)
        if held and info is not None:
            out.append(info)
        elif not held:
            with contextlib.suppress(OSError):
                path.unlink()  # its writer is gone: no reader needs it again
    return sorted(out, key=lambda i: (i.started_at, i.session_id))
