"""The turn log's schema: ``ttft.turn/2`` written, ``ttft.turn/1`` (an old-format fixture) still read."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

from ttft.telemetry.bench.aggregate import chunk_gaps_ms
from ttft.telemetry.log.turns import Skipped, read_records, tail_records
from ttft.telemetry.record import SCHEMA, TurnRecord, chunk_rows, upgrade
from ttft.telemetry.view.timeline import turn_timeline
from ttft.tui.cli import main

from tests.support.paths import FIXTURES
from tests.support.turns import play, stream

FIXTURE = FIXTURES / "turn_v1.jsonl"


def test_new_records_write_chunks_as_objects() -> None:
    rec = play(stream(first_ms=100, gap_ms=20, reasoning=1, visible=2, tokens_per_chunk=3))
    assert rec["schema"] == SCHEMA == "ttft.turn/2"
    assert rec["chunks"] == [
        {"t_ms": 100.0, "kind": "reasoning", "tokens": 3},
        {"t_ms": 120.0, "kind": "text", "tokens": 3},
        {"t_ms": 140.0, "kind": "text", "tokens": 3},
    ]
    assert upgrade(rec) is rec  # already current: untouched


def test_old_lines_are_upgraded_as_they_are_read(tmp_path: Path) -> None:
    raw = [json.loads(line) for line in FIXTURE.read_text().splitlines()]
    assert {r["schema"] for r in raw} == {"ttft.turn/1"} and raw[0]["chunks"][0] == [200.0, "reasoning", 1]
    log = tmp_path / "old.jsonl"
    shutil.copy(FIXTURE, log)
    new = play(stream(first_ms=50, gap_ms=5, visible=2)) | {"turn_index": 2}
    with log.open("a") as f:  # an old session resumed by the new ttft: both forms in one file
        f.write(json.dumps(new) + "\n")
    skipped = Skipped()
    recs = list(read_records(log, skipped))
    assert not skipped and len(recs) == 3
    assert {r["schema"] for r in recs} == {SCHEMA}
    assert recs[0]["chunks"][:3] == [
        {"t_ms": 200.0, "kind": "reasoning", "tokens": 1},
        {"t_ms": 210.0, "kind": "reasoning", "tokens": 1},
        {"t_ms": 220.0, "kind": "text", "tokens": 1},
    ]
    assert recs[1]["chunks"] == [] and recs[1]["error"]["status_code"] == 429
    assert recs[0]["metrics"] == raw[0]["metrics"]  # everything but the chunks' form is as logged
    assert tail_records(log, 3) == recs
    # readers of the figures agree across the two forms
    old, new = TurnRecord.from_dict(raw[0]), TurnRecord.from_dict(recs[0])
    assert chunk_gaps_ms(old) == chunk_gaps_ms(new) == [10.0, 10.0, 10.0, 10.0]
    assert turn_timeline(old) == turn_timeline(new)


def test_chunk_rows_reads_either_form() -> None:
    assert chunk_rows({"chunks": [[1.5, "text", 2]]}) == [{"t_ms": 1.5, "kind": "text", "tokens": 2}]
    assert chunk_rows({"chunks": [{"t_ms": 1.5, "kind": "tool", "tokens": 1}]})[0]["kind"] == "tool"
    assert chunk_rows({"chunks": None}) == chunk_rows({}) == []


def test_malformed_chunk_objects_are_skipped_lines(tmp_path: Path) -> None:
    good = play(stream(visible=2))
    bad = [
        good | {"chunks": [{"t_ms": "soon", "kind": "text", "tokens": 1}]},
        good | {"chunks": [{"t_ms": 1.0, "kind": "text"}]},
        good | {"schema": "ttft.turn/9"},
    ]
    log = tmp_path / "s.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in [*bad, good]))
    skipped = Skipped()
    assert [r["chunks"] for r in read_records(log, skipped)] == [good["chunks"]]
    assert skipped.lines == {log: 3}


def test_exporting_an_old_log_writes_the_current_form(tmp_path: Path) -> None:
    out = tmp_path / "old.jsonl"
    assert main(["export", str(FIXTURE), "-f", "jsonl", "-o", str(out)]) == 0
    recs = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["schema"] for r in recs] == [SCHEMA, SCHEMA]
    assert recs[0]["chunks"][-1] == {"t_ms": 240.0, "kind": "text", "tokens": 1}
    csv_out = tmp_path / "old.csv"
    assert main(["export", str(FIXTURE), "-f", "csv", "-o", str(csv_out)]) == 0
    rows = list(csv.DictReader(csv_out.open()))
    assert json.loads(rows[0]["chunks"])[0] == {"t_ms": 200.0, "kind": "reasoning", "tokens": 1}
    assert rows[0]["schema"] == SCHEMA and rows[0]["chunk_count"] == "5"
