"""What crashed proxies left in the state folder is cleared when the next one starts (backends.proxy.state.sweep,
run by publish): a state file no run holds, and the temporary file of a publish cut short (its writer dead,
or, its pid alive again, holding no lock on it for over a minute). A publish in progress and another's
live state file are kept."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from ttft.backends.proxy.state import STALE_TMP_S, RunInfo, publish, running

LIVE = "20260101-000000-aaaaaa"
DEAD = "20260101-000000-bbbbbb"
NEW = "20260101-000000-cccccc"


def _info(tmp_path: Path, session: str, port: int) -> RunInfo:
    return RunInfo(os.getpid(), port, f"http://127.0.0.1:{port}", "", session, tmp_path / f"{session}.jsonl")


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait(10)
    return p.pid


def test_the_next_start_clears_what_a_crashed_proxy_left(tmp_path: Path) -> None:
    folder = tmp_path / "proxies"
    live = publish(_info(tmp_path, LIVE, 8787), folder)  # another run, alive: its lock is held
    folder.joinpath(f"{DEAD}.json").write_text('{"schema": "ttft.proxy-state/1"}')  # no lock: its run died
    cut_short = folder / f".{DEAD}.json.{_dead_pid()}.tmp"  # died between its write and its rename
    cut_short.write_text("{")
    reused = folder / f".{DEAD}.json.{os.getppid()}.tmp"  # its pid alive again (another process), no lock, old
    reused.write_text("{")
    old = time.time() - 2 * STALE_TMP_S
    os.utime(reused, (old, old))
    fresh = folder / f".{LIVE}.json.{os.getppid()}.tmp"  # no lock yet, but just made: maybe being written now
    fresh.write_text("{")
    unknown = folder / ".notes.tmp"  # not a name publish makes
    unknown.write_text("x")

    new = publish(_info(tmp_path, NEW, 9000), folder)

    left = sorted(p.name for p in folder.iterdir())
    assert left == sorted([live.path.name, new.path.name, fresh.name, unknown.name])
    assert [r.session_id for r in running(folder)] == [LIVE, NEW]
    live.remove()
    new.remove()


def test_a_publish_in_progress_is_not_taken_for_a_crash(tmp_path: Path) -> None:
    """A writer that holds its temporary file's lock (between its write and its rename) keeps it, however old."""
    folder = tmp_path / "proxies"
    folder.mkdir()
    tmp = folder / f".{DEAD}.json.PID.tmp"
    program = f"""
import fcntl, os, sys, time
from pathlib import Path
path = Path({str(tmp)!r}.replace("PID", str(os.getpid())))
fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
old = time.time() - 3600
os.utime(path, (old, old))
print(path, flush=True)
time.sleep(60)
"""
    p = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        held = Path(p.stdout.readline().strip())
        new = publish(_info(tmp_path, NEW, 9000), folder)
        assert held.exists()
        new.remove()
        p.kill()
        p.wait(10)
        publish(_info(tmp_path, NEW, 9000), folder).remove()  # its writer dead now: cleared
        assert not held.exists()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)
