"""telemetry.log.log_index: the writer keeps each log's index, a listing trusts it only while it describes
the file, and no turn is lost or counted twice (a concurrent writer, a torn line, a replaced or cut log)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import ttft.telemetry.log.sessions as sessions_mod
import ttft.telemetry.log.turns as turns_mod
from ttft.telemetry.log import log_index
from ttft.telemetry.log.json_line import encode_line
from ttft.telemetry.log.sessions import list_sessions, summarize
from ttft.telemetry.log.turns import SessionLog, Skipped, read_records

from tests.support.paths import ROOT
from tests.support.turns import play, stream


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


def _rec(i: int, session: str = "20260101-000000-idx0") -> dict[str, Any]:
    rec = dict(play(stream(visible=3)), session_id=session, turn_index=i, prompt=f"q{i}", answer=f"a{i}")
    rec["status"] = "error" if i % 5 == 0 else "ok"
    rec["metrics"] = {**rec["metrics"], "ttft_ms": float(i % 7), "tpot_ms": float(i % 3)}
    return rec


def _index_files(log: Path) -> tuple[dict[str, Any], bytes]:
    folder = log.parent / ".index"
    return json.loads((folder / f"{log.stem}.json").read_bytes()), (folder / f"{log.stem}.values").read_bytes()


def _truth(log: Path) -> tuple[int, int, float | None, float | None]:
    """What a full read says: turns, errors and the medians of ok turns (statistics.median)."""
    import statistics

    recs = list(read_records(log))
    ok = [r for r in recs if r["status"] == "ok"]
    return (
        len(recs),
        sum(r["status"] == "error" for r in recs),
        statistics.median(r["metrics"]["ttft_ms"] for r in ok) if ok else None,
        statistics.median(r["metrics"]["tpot_ms"] for r in ok) if ok else None,
    )


def _seen(log: Path, skipped: Skipped | None = None) -> tuple[int, int, float | None, float | None]:
    info = summarize(log, skipped)
    return info.turns, info.errors, info.median_ttft_ms, info.median_tpot_ms


class _Parsed:
    """Lines the listing parses (the writer's own parse is not counted)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = turns_mod.parse_line

        def spy(raw: bytes) -> Any:
            self.n += 1
            return real(raw)

        monkeypatch.setattr(sessions_mod, "parse_line", spy)


def test_the_writer_keeps_the_index_so_a_listing_reads_no_line(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = SessionLog("20260101-000000-idx0")
    for i in range(40):
        log.append(_rec(i))
    header, values = _index_files(log.path)
    assert header["offset"] == log.path.stat().st_size and header["turns"] == 40
    assert header["runs"] == [[0, 39]]
    parsed = _Parsed(monkeypatch)
    assert _seen(log.path) == _truth(log.path)
    assert parsed.n == 0  # never read: the writer counted every line as it wrote it
    # the same index a listing builds from nothing
    shutil.rmtree(log.path.parent / ".index")
    monkeypatch.undo()
    assert _seen(log.path) == _truth(log.path)
    rebuilt, rebuilt_values = _index_files(log.path)
    assert rebuilt == header and rebuilt_values == values


def test_a_log_the_writer_did_not_index_is_counted_once_then_kept_up(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = data_dir / "sessions" / "20260101-000000-idx0.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"".join(encode_line(_rec(i)) for i in range(10)))  # another version's log: no index
    log = SessionLog(path.stem)
    log.append(_rec(10))  # not counted by the writer: the index does not reach the end
    assert not (path.parent / ".index" / f"{path.stem}.json").exists()
    assert _seen(path) == _truth(path)  # the listing counts it all, once
    log.append(_rec(11))  # now the writer keeps it
    parsed = _Parsed(monkeypatch)
    assert _seen(path) == _truth(path) and parsed.n == 0


@pytest.mark.parametrize("change", ["replaced", "cut", "cut_and_regrown", "rewritten_longer"])
def test_an_index_that_no_longer_describes_its_log_is_built_again(data_dir: Path, change: str) -> None:
    log = SessionLog("20260101-000000-idx0")
    for i in range(20):
        log.append(_rec(i))
    assert _seen(log.path)[0] == 20
    lines = log.path.read_bytes().splitlines(keepends=True)
    if change == "replaced":  # another file under the name, with the same first line and more turns
        other = log.path.with_suffix(".new")
        other.write_bytes(b"".join(lines[:1]) + b"".join(encode_line(_rec(i)) for i in range(100, 130)))
        os.replace(other, log.path)
    elif change == "cut":
        with log.path.open("r+b") as f:
            f.truncate(sum(map(len, lines[:8])))
    elif change == "cut_and_regrown":  # cut in place, then written past the old end with other turns
        with log.path.open("r+b") as f:
            f.truncate(sum(map(len, lines[:8])))
            f.seek(0, os.SEEK_END)
            f.write(b"".join(encode_line(_rec(i)) for i in range(200, 240)))
    else:  # rewritten in place from its second line on, longer than before (a hand edit, a tool)
        with log.path.open("r+b") as f:
            f.seek(len(lines[0]))
            f.write(b"".join(encode_line({**_rec(i), "status": "cancelled"}) for i in range(1, 25)))
    assert _seen(log.path) == _truth(log.path)
    log.append(_rec(1000))  # and the writer goes on from the index built again
    assert _seen(log.path) == _truth(log.path)


def test_a_torn_last_line_is_counted_once_and_no_turn_is_lost(data_dir: Path) -> None:
    log = SessionLog("20260101-000000-idx0")
    for i in range(5):
        log.append(_rec(i))
    with log.path.open("ab") as f:
        f.write(b'{"schema":"ttft.turn/2","torn')  # a crash mid-write
    for _ in range(2):  # a listing twice: counted, but not saved past the torn line
        skipped = Skipped()
        assert _seen(log.path, skipped)[0] == 5 and skipped.lines == {log.path: 1}
    assert _index_files(log.path)[0]["offset"] < log.path.stat().st_size
    log.append(_rec(5))  # closes the torn line first: it stays one bad line
    skipped = Skipped()
    assert _seen(log.path, skipped) == _truth(log.path) and _truth(log.path)[0] == 6
    assert skipped.lines == {log.path: 1}
    log.append(_rec(6))
    skipped = Skipped()
    assert _seen(log.path, skipped)[0] == 7 and skipped.lines == {log.path: 1}


def test_an_unterminated_turn_being_written_is_shown_but_not_kept(data_dir: Path) -> None:
    log = SessionLog("20260101-000000-idx0")
    log.append(_rec(0))
    with log.path.open("ab") as f:
        f.write(encode_line(_rec(1))[:-1])  # a whole record, its newline not yet written
    assert _seen(log.path)[0] == 2
    assert _index_files(log.path)[0]["turns"] == 1  # the index stops before it
    with log.path.open("ab") as f:
        f.write(b"\n")
    assert _seen(log.path) == _truth(log.path) and _truth(log.path)[0] == 2


_WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    sys.path.insert(0, sys.argv[1])
    from ttft.telemetry.log.turns import SessionLog
    from tests.support.turns import play, stream
    log = SessionLog(sys.argv[2], directory=Path(sys.argv[3]))
    rec = play(stream(visible=3))
    for i in range(int(sys.argv[4])):
        log.append(dict(rec, session_id=sys.argv[2], turn_index=log.next_turn_index(), prompt=f"w{i}"))
    """
)


def test_no_turn_lost_or_counted_twice_across_a_concurrent_writer(data_dir: Path, tmp_path: Path) -> None:
    folder = data_dir / "sessions"
    log = SessionLog("20260101-000000-idx0", directory=folder)
    for i in range(30):
        log.append(_rec(i))
    script = tmp_path / "writer.py"
    script.write_text(_WRITER)
    n = 150
    writers = [
        subprocess.Popen([sys.executable, str(script), str(ROOT), log.session_id, str(folder), str(n)])
        for _ in range(2)
    ]
    listings = 0
    while any(w.poll() is None for w in writers):  # listings (and this process's appends) meanwhile
        list_sessions(folder)
        log.append(_rec(1000 + listings))
        listings += 1
    assert all(w.wait() == 0 for w in writers)
    total = 30 + 2 * n + listings
    (info,) = list_sessions(folder)
    recs = list(read_records(log.path))
    assert info.turns == len(recs) == total
    indices = [r["turn_index"] for r in recs]
    assert len(set(indices)) == total  # the writers never took one index twice
    header = _index_files(log.path)[0]
    assert header["offset"] == log.path.stat().st_size and header["turns"] == total
    t = log_index.Tally(runs=header["runs"])
    assert t.taken() == set(indices)
    assert _seen(log.path) == _truth(log.path)


def test_the_next_turn_index_comes_from_the_index(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = SessionLog("20260101-000000-idx0")
    for i in (0, 1, 2, 7, 8):  # a gap: an index in it is free, one past the end taken
        log.append(_rec(i))
    read: list[bytes] = []
    real = turns_mod.line_index

    def spy(line: bytes) -> int | None:
        read.append(line)
        return real(line)

    monkeypatch.setattr(turns_mod, "line_index", spy)
    fresh = SessionLog(log.session_id)
    assert fresh.next_turn_index() == 9
    assert read == []  # the indices came from the index, not from reading the log
    assert fresh.append(_rec(4))["turn_index"] == 4  # free: kept
    assert fresh.append(_rec(8))["turn_index"] == 9  # taken: moved past the highest


def test_runs_join_and_give_up_past_their_limit() -> None:
    t = log_index.Tally()
    for i in (5, 3, 4, 9, 7, 8, 6, 0, 0, 12):
        t.take(i)
    assert t.runs == [[0, 0], [3, 9], [12, 12]]
    for i in range(20, 20 + 2 * log_index.MAX_RUNS, 2):
        t.take(i)
    assert t.runs is None and t.taken() is None


def test_an_index_of_an_older_version_or_damaged_is_counted_again(data_dir: Path) -> None:
    log = SessionLog("20260101-000000-idx0")
    for i in range(6):
        log.append(_rec(i))
    header_path = log.path.parent / ".index" / f"{log.session_id}.json"
    for bad in (b'{"version": 2, "offset": 10}', b"not json", b'{"version": 3}'):
        header_path.write_bytes(bad)
        assert _seen(log.path) == _truth(log.path)
    values = log.path.parent / ".index" / f"{log.session_id}.values"
    values.write_bytes(b"")  # the figures lost: the header alone is not trusted
    assert _seen(log.path) == _truth(log.path)
