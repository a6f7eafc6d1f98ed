"""``telemetry.log.follow``: a log read as another process appends to it: each whole line once, a line
half written left for the next read, a log not there yet, replaced, cut or too long, and one that is a
link or a FIFO refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from ttft.telemetry.log.follow import LogFollower
from ttft.telemetry.log.private_files import NotAFileError
from ttft.telemetry.log.turns import SessionLog

from tests.support.turns import play, stream


def line(i: int) -> bytes:
    rec = play(stream())
    rec["turn_index"] = i
    rec["extra"] = {"line": i}  # the last field: each line's end differs, as real ones do (their times)
    return json.dumps(rec).encode() + b"\n"


def indices(got: list[dict]) -> list[int]:
    return [r["turn_index"] for r in got]


def test_each_whole_line_is_read_once_and_a_half_written_one_waits(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    f = LogFollower(path)
    assert f.read().records == []  # not there yet: empty
    path.write_bytes(line(0) + line(1))
    assert indices(f.read().records) == [0, 1]
    assert f.read().records == []
    two = line(2)
    with path.open("ab") as out:
        out.write(two[:40])  # the writer is mid-line
        out.flush()
        assert f.read().records == []
        out.write(two[40:] + b"not json\n" + line(3))
    got = f.read()
    assert indices(got.records) == [2, 3] and got.bad == 1 and not got.restarted


def test_a_real_session_log_is_followed_as_it_is_appended(tmp_path: Path) -> None:
    log = SessionLog(directory=tmp_path)
    f = LogFollower(log.path)
    for i in range(3):
        rec = play(stream())
        rec["turn_index"] = i
        log.append(rec)
        assert indices(f.read().records) == [i]


def test_a_log_replaced_or_cut_is_read_again_from_its_start(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(line(0) + line(1))
    f = LogFollower(path)
    assert indices(f.read().records) == [0, 1]
    tmp = tmp_path / "new"
    tmp.write_bytes(line(5))
    os.replace(tmp, path)  # another inode
    got = f.read()
    assert indices(got.records) == [5] and got.restarted
    path.write_bytes(b"")  # cut, in place, and written again to the length read before
    with path.open("ab") as out:
        out.write(line(7))
    got = f.read()
    assert got.restarted and indices(got.records) == [7]
    path.write_bytes(line(8)[:20])  # cut shorter
    assert f.read().restarted


def test_a_long_log_is_read_in_steps(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"".join(line(i) for i in range(50)))
    f = LogFollower(path, step=4096)
    seen: list[int] = []
    reads = 0
    while True:
        got = f.read()
        reads += 1
        seen += indices(got.records)
        if not got.more:
            break
    assert seen == list(range(50)) and reads > 5


def test_an_overlong_line_is_dropped_and_the_next_one_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ttft.telemetry.log import follow

    monkeypatch.setattr(follow, "MAX_LINE_BYTES", 10_000)
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"x" * 30_000)
    f = LogFollower(path, step=8_000)
    bad = sum(f.read().bad for _ in range(4))
    with path.open("ab") as out:
        out.write(b"yyy\n" + line(1))
    got = f.read()
    assert bad == 1 and indices(got.records) == [1]


def test_a_link_or_a_fifo_is_refused(tmp_path: Path) -> None:
    target = tmp_path / "real.jsonl"
    target.write_bytes(line(0))
    link = tmp_path / "link.jsonl"
    link.symlink_to(target)
    with pytest.raises(NotAFileError):
        LogFollower(link).read()
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(OSError):
        LogFollower(fifo).read()  # refused at once, never a read that waits for a writer
