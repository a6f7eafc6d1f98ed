"""Export: JSONL and flat CSV, with and without the text (OpenTelemetry: test_otel_export.py)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from telemetry import events as ev
from telemetry.export import export
from telemetry.log import SessionLog
from tests.turns import at, play, stream
from tui.cli import main


@pytest.fixture
def records() -> list[dict]:
    ok = play(stream(first_ms=200, gap_ms=10, visible=5, reasoning=2))
    err = play([ev.AttemptSent(at(0)), ev.Failed(at(5), "rate_limit", "Too many", 429)])
    return [ok, err]


def test_jsonl_round_trip_and_redact(records: list[dict], tmp_path: Path) -> None:
    out = tmp_path / "a.jsonl"
    assert export(records, "jsonl", out) == 2
    back = [json.loads(line) for line in out.read_text().splitlines()]
    assert back == records
    export(records, "jsonl", out, redact_text=True)
    red = [json.loads(line) for line in out.read_text().splitlines()]
    assert red[0]["prompt"] is None and red[0]["answer"] is None and red[0]["reasoning"] is None
    assert red[0]["metrics"] == records[0]["metrics"]
    assert "wwww" not in out.read_text()


def test_csv_one_flat_row_per_turn(records: list[dict], tmp_path: Path) -> None:
    out = tmp_path / "a.csv"
    export(records, "csv", out)
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 2
    assert float(rows[0]["metrics.ttft_ms"]) == pytest.approx(200)
    assert rows[0]["tokens.source"] == "usage"
    assert rows[1]["error.status_code"] == "429"
    assert json.loads(rows[0]["chunks"])[0][1] == "reasoning"


def test_export_and_sessions_commands(records: list[dict], tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    log = SessionLog("20260102-030405-abcd")
    for r in records:
        log.append(r)
    assert main(["sessions"]) == 0
    assert "20260102-030405-abcd" in capsys.readouterr().out
    out = tmp_path / "x.csv"
    assert main(["export", "--format", "csv", "--out", str(out)]) == 0
    assert "wrote 2 turns" in capsys.readouterr().out
    assert len(list(csv.DictReader(out.open()))) == 2
    assert main(["export", "missing-session"]) == 1
    assert "no session or file" in capsys.readouterr().err


def test_version_and_help(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("ttft ")
