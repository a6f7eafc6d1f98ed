"""telemetry.export.log_slices: a log exported in slices by worker processes writes the file one pass writes.

CSV and JSONL byte for byte, Parquet row for row, against the single pass and against the table as
it was built before (one ``get`` per column path, every cell through ``csv_value``); unreadable lines
counted and numbered as the reader numbers them."""

from __future__ import annotations

import csv
import io
import itertools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ttft.telemetry.export import formats, log_slices, table
from ttft.telemetry.log.json_line import encode_line
from ttft.telemetry.log.turns import Skipped, read_records
from ttft.telemetry.record import chunk_rows
from ttft.tui.cli import main

from tests.support.paths import ROOT
from tests.support.turns import play, stream

SECRET = "sk-live-0123456789abcdef"


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    return tmp_path


def _log(path: Path) -> Path:
    """Turns of many shapes, unreadable lines among them and a torn last line."""
    base = play(stream(visible=5))
    lines = []
    for i in range(120):
        rec = dict(base, session_id=path.stem, turn_index=i, prompt=f"q{i} ünï 😀", answer=f"a{i}")
        if i % 7 == 0:
            rec["prompt"] = '=HYPERLINK("http://x")'  # a formula: neutralised in CSV
        if i % 11 == 0:
            rec["status"] = "error"
            rec["error"] = {"type": "auth", "message": f"bad key {SECRET}", "status_code": 401, "hint": None}
        if i % 13 == 0:
            rec["extra"] = {"bench": {"run_id": "r", "mode": "users", "level": 4, "index": i, "warmup": True}}
        if i % 17 == 0:
            rec["base_url"] = "https://user:pw@example.test/v1?key=abc"
        lines.append(encode_line(rec))
        if i == 30:
            lines.append(b"not json\n")
        if i == 60:
            lines.append(b'{"schema":"ttft.turn/2","answer":"\\ud800 lone"}\n')  # not well formed: skipped
        if i == 90:  # a NaN: orjson refuses it, the stdlib reads it (and the reader then judges the record)
            lines.append(encode_line(rec).replace(b'"ttft_ms":200.0', b'"ttft_ms":NaN'))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines) + b'{"schema":"ttft.turn/2","tor')
    return path


def _reference_row(rec: dict[str, Any]) -> list[Any]:
    """The table's row as it was built before the per-object plan: one get() per column path."""
    extra = rec.get("extra") or {}
    other = {k: v for k, v in extra.items() if k not in table._TOP_EXTRA} if isinstance(extra, dict) else {}
    out = []
    for c in table.COLUMNS:
        if c.name == "chunks":
            value: Any = chunk_rows(rec)
        elif c.name == "chunk_count":
            value = len(rec.get("chunks") or ())
        elif c.name == "extra.other":
            value = other or None
        else:
            value = table.get(rec, tuple(c.name.split(".")))
        value = table.cast(value, c.type)
        if isinstance(value, bool):
            value = "true" if value else "false"
        out.append(formats.csv_cell(value))
    return out


def _reference_csv(path: Path) -> bytes:
    buf = io.StringIO(newline="")
    w = csv.writer(buf)
    w.writerow(table.HEADER)
    for rec in read_records(path):
        w.writerow(_reference_row(formats.safe_urls(rec)))
    return buf.getvalue().encode()


def _export(
    path: Path, fmt: str, out: Path, monkeypatch: pytest.MonkeyPatch, *, sliced: bool, more: tuple[str, ...] = ()
) -> str:
    monkeypatch.setattr(log_slices, "PARALLEL_FROM", 0 if sliced else 1 << 60)
    monkeypatch.setattr(log_slices, "SLICE_BYTES", 7_000)  # many slices, cut anywhere
    monkeypatch.setattr(log_slices, "_workers", lambda: 2)
    assert main(["export", str(path), "-f", fmt, "-o", str(out), *more]) == 0
    return out.name


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("redact", [False, True])
def test_sliced_export_is_the_single_pass_byte_for_byte(
    fmt: str, redact: bool, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(data_dir / "sessions" / "20260101-000000-slic.jsonl")
    more = ("--redact",) if redact else ()
    _export(log, fmt, data_dir / f"one.{fmt}", monkeypatch, sliced=False, more=more)
    one_err = capsys.readouterr().err
    _export(log, fmt, data_dir / f"many.{fmt}", monkeypatch, sliced=True, more=more)
    many_err = capsys.readouterr().err
    sliced = (data_dir / f"many.{fmt}").read_bytes()
    assert sliced == (data_dir / f"one.{fmt}").read_bytes()
    assert one_err.replace("one.", "many.") == many_err  # the same turns and skipped lines reported
    skipped = Skipped()
    n = sum(1 for _ in read_records(log, skipped))
    assert n == 122 and sum(skipped.lines.values()) == 2  # the lone surrogate and the NaN read as records
    assert f"wrote {n} turns" in many_err and "skipped 2 unreadable lines" in many_err
    assert SECRET.encode() not in sliced and b"user:pw" not in sliced
    if fmt == "csv" and not redact:
        assert sliced == _reference_csv(log)


def test_skipped_lines_are_numbered_as_the_reader_numbers_them(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _log(data_dir / "sessions" / "20260101-000000-slic.jsonl")
    monkeypatch.setattr(log_slices, "SLICE_BYTES", 5_000)
    monkeypatch.setattr(log_slices, "_workers", lambda: 2)
    read, sliced = Skipped(), Skipped()
    n = sum(1 for _ in read_records(log, read))
    assert log_slices.export(log, "csv", data_dir / "x.csv", redact_text=False, skipped=sliced) == n == 122
    assert sliced.lines == read.lines and sliced.numbers == read.numbers
    assert len(read.numbers[log]) == 2


def test_slices_start_at_line_starts_and_cover_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(b"".join(b"%d%s\n" % (i, b"x" * (i % 37)) for i in range(500)) + b"tail")
    data = path.read_bytes()
    for step in (1, 10, 64, 1000, 10**6):
        cuts = log_slices.slices(path, len(data), step)
        assert cuts[0][0] == 0 and cuts[-1][1] == len(data)
        assert all(a < b for a, b in cuts) and all(b == c for (_, b), (c, _) in itertools.pairwise(cuts))
        assert all(a == 0 or data[a - 1 : a] == b"\n" for a, _ in cuts)


_SLICED_PARQUET = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from ttft.telemetry.export import log_slices
log_slices.SLICE_BYTES = 7_000
log_slices._workers = lambda: 2
print(log_slices.export(Path(sys.argv[2]), "parquet", Path(sys.argv[3]), redact_text=False, skipped=None))
"""


def _sliced_parquet(log: Path, out: Path) -> int:
    """In a process of its own: polars, once loaded (as this one has), cannot be forked."""
    p = subprocess.run([sys.executable, "-c", _SLICED_PARQUET, str(ROOT), str(log), str(out)], capture_output=True)
    assert p.returncode == 0, p.stderr.decode()
    return int(p.stdout)


def test_sliced_parquet_holds_the_rows_of_the_whole_table(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pl = pytest.importorskip("polars")
    log = _log(data_dir / "sessions" / "20260101-000000-slic.jsonl")
    rows = [table.row(formats.safe_urls(r)) for r in read_records(log)]
    expected = pl.from_dicts(rows, schema=formats.polars_schema(table.COLUMNS))  # as the export built it before
    assert _sliced_parquet(log, data_dir / "many.parquet") == 122
    monkeypatch.setattr(formats, "PARQUET_BATCH", 17)  # the single pass, in parts too
    assert not log_slices.usable("parquet", 1 << 40, False)  # polars is loaded here: no fork
    _export(log, "parquet", data_dir / "one.parquet", monkeypatch, sliced=True)
    for name in ("many", "one"):
        got = pl.read_parquet(data_dir / f"{name}.parquet")
        assert got.schema == expected.schema and got.height == 122
        assert got.equals(expected)


def test_parquet_of_no_turns_keeps_the_typed_columns(data_dir: Path) -> None:
    pl = pytest.importorskip("polars")
    log = data_dir / "sessions" / "20260101-000000-none.jsonl"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"not json\n" * 3)
    assert _sliced_parquet(log, data_dir / "none.parquet") == 0
    got = pl.read_parquet(data_dir / "none.parquet")
    assert got.height == 0 and got.schema == pl.Schema(formats.polars_schema(table.COLUMNS))


def test_a_small_log_is_one_pass(data_dir: Path) -> None:
    assert not log_slices.usable("csv", log_slices.PARALLEL_FROM - 1, False)
    assert not log_slices.usable("otel", 1 << 40, False) and not log_slices.usable("csv", 1 << 40, True)


def test_jsonl_rows_read_back_as_records(data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = _log(data_dir / "sessions" / "20260101-000000-slic.jsonl")
    _export(log, "jsonl", data_dir / "x.jsonl", monkeypatch, sliced=True)
    got = [json.loads(line) for line in (data_dir / "x.jsonl").read_text().splitlines()]
    assert [r.get("turn_index") for r in got] == [r.get("turn_index") for r in read_records(log)]
