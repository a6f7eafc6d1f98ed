"""The log as a dataset (telemetry.export.log_data): typed records read as ``ttft export`` reads a log
(a file, a session id, the newest session; a torn or unreadable line skipped and said), and frames in
pandas, polars and DuckDB typed as the export table, equal to what ``ttft export -f parquet`` writes."""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.errors import TtftError
from ttft.telemetry.export import table
from ttft.telemetry.export.formats import duckdb_types, pandas_dtypes, polars_schema
from ttft.telemetry.export.log_data import (
    LogReadError,
    LogRecords,
    MissingEngine,
    SkippedLinesWarning,
    log_frame,
    read_log,
)
from ttft.telemetry.log.turns import SessionLog
from ttft.telemetry.record import TurnRecord
from ttft.tui.cli import main

from tests.support.turns import at, play, stream

pd = pytest.importorskip("pandas")
pl = pytest.importorskip("polars")
duckdb = pytest.importorskip("duckdb")

SECRET = "pw-Zq81-secret"
DUCKDB_TYPES = list(duckdb_types(table.COLUMNS).values())
TORN = b'{"schema":"ttft.turn/2","session_id":"s","turn_index":9,"prom'  # a crash mid-write: no newline


def _records() -> list[dict[str, Any]]:
    """A clean turn (through a URL holding credentials), a failed one, a bench turn: ints, floats,
    strings, bools, nulls and JSON columns all filled somewhere."""
    ok = play(stream(first_ms=200, gap_ms=10, visible=5, reasoning=2))
    ok["base_url"] = f"http://user:{SECRET}@127.0.0.1:1/v1"
    err = play([ev.AttemptSent(at(0)), ev.Failed(at(5), "rate_limit", "Too many", 429)])
    bench = ok | {"extra": {"bench": {"run_id": "r", "mode": "concurrency", "level": 2.0, "index": 3, "warmup": False}}}
    return [ok, err, bench]


def _log(directory: Path, session: str, *, torn: bool = False) -> Path:
    log = SessionLog(session, directory)
    for rec in _records():
        log.append(rec)
    if torn:
        with log.path.open("ab") as f:
            f.write(TORN)
    return log.path


@pytest.fixture
def sessions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "data" / "sessions"
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    return folder


def test_a_log_reads_as_typed_records_and_a_torn_last_line_is_skipped_and_said(sessions: Path) -> None:
    path = _log(sessions, "s-torn", torn=True)
    log = read_log(path)
    assert isinstance(log, LogRecords) and log.path == path
    with pytest.warns(SkippedLinesWarning) as said:
        turns = list(log)
    assert [type(t) for t in turns] == [TurnRecord] * 3
    assert [t.status for t in turns] == ["ok", "error", "ok"] and turns[1].error is not None
    assert log.skipped == 1 and log.skipped_lines == (4,)
    assert [str(w.message) for w in said] == [f"skipped 1 unreadable line in {path} (line 4)"]
    assert said[0].filename == __file__  # the warning names the reader's line, not ttft's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(log) == []  # said once: read to its end again, it stays quiet


def test_every_unreadable_line_is_counted_and_numbered_and_a_clean_log_is_quiet(sessions: Path) -> None:
    path = _log(sessions, "s-bad")
    lines = path.read_bytes().splitlines(keepends=True)
    wrong = json.loads(lines[0]) | {"settings": {"temperature": "warm"}}  # well formed, yet not a record's types
    path.write_bytes(lines[0] + b"\xff\xfe not utf-8\n" + json.dumps(wrong).encode() + b"\n" + b"".join(lines[1:]))
    log = read_log(path)
    with pytest.warns(SkippedLinesWarning, match=r"skipped 1 unreadable line in .* \(line 2\); left out 1 turn "):
        assert len(list(log)) == 3
    assert log.skipped == 2 and log.skipped_lines == (2,)
    clean = read_log(_log(sessions, "s-clean"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(list(clean)) == 3 and clean.skipped == 0 and clean.message is None


def test_a_session_id_and_none_find_the_log_as_ttft_export_does(sessions: Path) -> None:
    old, new = _log(sessions, "20260101-000000-old1"), _log(sessions, "20260102-000000-new1")
    os.utime(old, (time.time() - 60, time.time() - 60))  # the newest is the last written
    new.write_bytes(new.read_bytes().splitlines(keepends=True)[0])
    assert [t.session_id for t in read_log("20260101-000000-old1")] == ["test"] * 3
    assert read_log("20260101-000000-old1").path == old and read_log().path == new
    assert read_log(None).path == new and len(list(read_log())) == 1
    assert read_log(str(old)).path == old  # a file, as a string or a Path
    for name in ("no-such-session", "../no/such.jsonl", "/nonexistent/log.jsonl"):
        with pytest.raises(LogReadError) as gone:
            read_log(name)
        assert isinstance(gone.value, TtftError) and isinstance(gone.value, OSError)
        assert "no " in str(gone.value)
    with pytest.raises(LogReadError, match="could not read"):
        read_log(sessions)  # a folder: said when the log is named, not at the first record


def test_no_session_yet_is_ttfts_error(sessions: Path) -> None:
    with pytest.raises(LogReadError, match="no sessions logged yet"):
        read_log()


def _parquet_export(path: Path, tmp_path: Path) -> Any:
    out = tmp_path / "turns.parquet"
    assert main(["export", str(path), "-f", "parquet", "-o", str(out), "--quiet"]) == 0
    return pl.read_parquet(out)


def test_each_engine_gives_the_export_tables_columns_types_and_values(sessions: Path, tmp_path: Path) -> None:
    path = _log(sessions, "s-frame", torn=True)
    exported = _parquet_export(path, tmp_path)
    with pytest.warns(SkippedLinesWarning, match=r"\(line 4\)") as said:
        polars = log_frame(path, engine="polars")
    assert said[0].filename == __file__
    assert isinstance(polars, pl.DataFrame) and dict(polars.schema) == polars_schema(table.COLUMNS)
    assert polars.equals(exported)  # the same rows, to the cell, as ttft export -f parquet writes
    with pytest.warns(SkippedLinesWarning):
        pandas = log_frame(path)  # pandas is the default
    assert list(pandas.columns) == list(table.HEADER)
    assert {c: str(d) for c, d in pandas.dtypes.items()} == pandas_dtypes(table.COLUMNS)
    with pytest.warns(SkippedLinesWarning):
        rel = log_frame(path, engine="duckdb")
    assert rel.columns == list(table.HEADER) and [str(t) for t in rel.types] == DUCKDB_TYPES
    assert rel.fetchall() == polars.rows()
    # the cells a notebook reads first: ints, floats, bools, nulls, JSON text, the masked URL
    row = dict(zip(rel.columns, rel.fetchall()[2], strict=True))
    assert row["turn_index"] == 2 and row["metrics.ttft_ms"] == pytest.approx(200.0)
    assert row["extra.bench.index"] == 3 and row["extra.bench.warmup"] is False and row["settings.stream"] is True
    assert row["error.type"] is None and json.loads(row["chunks"])[0]["kind"] == "reasoning"
    assert pandas["error.status_code"].tolist()[1] == 429 and pandas["error.status_code"].isna().tolist()[0]
    for cells in (
        polars["base_url"].to_list(),
        pandas["base_url"].tolist(),
        [r[0] for r in rel.select("base_url").fetchall()],
    ):
        assert cells[0] is not None and "127.0.0.1:1" in cells[0] and not any(SECRET in c for c in cells)


def test_records_in_hand_make_the_same_frame(sessions: Path) -> None:
    path = _log(sessions, "s-hand")
    whole = log_frame(path, engine="polars")
    typed = list(read_log(path))
    assert log_frame(typed, engine="polars").equals(whole)
    assert log_frame(read_log(path), engine="polars").equals(whole)  # the lazy reader itself
    assert log_frame([t.to_dict() for t in typed], engine="duckdb").fetchall() == whole.rows()
    assert len(log_frame(typed[:1], engine="pandas")) == 1


def test_an_empty_log_is_an_empty_typed_frame(sessions: Path) -> None:
    sessions.mkdir(parents=True)
    empty = sessions / "empty.jsonl"
    empty.write_bytes(b"")
    assert list(read_log(empty)) == []
    polars = log_frame(empty, engine="polars")
    assert polars.height == 0 and dict(polars.schema) == polars_schema(table.COLUMNS)
    rel = log_frame(empty, engine="duckdb")
    assert rel.fetchall() == [] and [str(t) for t in rel.types] == DUCKDB_TYPES
    assert len(log_frame([], engine="pandas").columns) == len(table.HEADER)


def test_polars_and_duckdb_need_no_pyarrow(sessions: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _log(sessions, "s-noarrow")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # an import of pyarrow fails, installed or not
    assert log_frame(path, engine="polars").height == 3
    assert len(log_frame(path, engine="duckdb").fetchall()) == 3


@pytest.mark.parametrize("engine", ["pandas", "polars", "duckdb"])
def test_a_missing_engine_is_said_naming_the_package(engine: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, engine, None)  # as if it were not installed
    with pytest.raises(MissingEngine) as missing:
        log_frame("no-such-session", engine=engine)  # said before any log is looked for
    assert isinstance(missing.value, TtftError) and isinstance(missing.value, ImportError)
    assert f"pip install {engine}" in str(missing.value) and missing.value.hint == f"pip install {engine}"
    assert missing.value.__cause__ is None and missing.value.__suppress_context__


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="choose from pandas, polars, duckdb"):
        log_frame([], engine="spark")
