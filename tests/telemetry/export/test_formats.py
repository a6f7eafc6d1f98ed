"""Export: JSONL and flat CSV, with and without the text (OpenTelemetry: test_otel_export.py)."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.export import table
from ttft.telemetry.export.formats import export
from ttft.telemetry.log.turns import SessionLog
from ttft.tui.cli import main

from tests.support.paths import ROOT
from tests.support.turns import at, play, stream


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
    assert json.loads(rows[0]["chunks"])[0]["kind"] == "reasoning"
    assert rows[0]["chunk_count"] == "7" and rows[1]["chunk_count"] == "0"
    assert rows[0]["settings.stream"] == "true" and rows[0]["error.type"] == ""


def test_csv_header_is_fixed_whatever_the_content(records: list[dict], tmp_path: Path) -> None:
    ok, err = records
    bench = ok | {"extra": {"bench": {"run_id": "r", "mode": "concurrency", "level": 2.0, "index": 0}}}
    heads = []
    for i, recs in enumerate(([ok], [err], [bench], [])):
        out = tmp_path / f"{i}.csv"
        export(recs, "csv", out)
        heads.append(out.read_text().splitlines()[0])
    assert len(set(heads)) == 1 and heads[0].split(",") == list(table.HEADER)
    assert "error," not in heads[0] + "," and "error.type" in heads[0]  # no always-empty "error" column


def test_every_field_of_a_record_has_a_column(records: list[dict]) -> None:
    # A new record field needs its column in telemetry/export/table.py (or a JSON column for its object).
    for r in records:
        assert table.unlisted(r) == []
    assert table.unlisted(records[0] | {"novel": 1, "metrics": {**records[0]["metrics"], "x_ms": 2}}) == [
        "metrics.x_ms",
        "novel",
    ]


def test_cost_and_attachments_have_columns_and_redact_drops_the_names(records: list[dict], tmp_path: Path) -> None:
    ok = records[0] | {
        "attachments": [{"name": "divorce-papers.txt", "bytes": 900, "media_type": "text/plain", "est_tokens": 230}],
        "cost": {
            "input_usd": 1e-4,
            "output_usd": 2e-4,
            "total_usd": 3e-4,
            "priced_as": "openai:o3",
            "source": "config",
        },
    }
    assert table.unlisted(ok) == []
    out = tmp_path / "c.csv"
    export([ok, records[1]], "csv", out)
    rows = list(csv.DictReader(out.open()))
    assert float(rows[0]["cost.total_usd"]) == 3e-4 and rows[0]["cost.priced_as"] == "openai:o3"
    assert json.loads(rows[0]["attachments"])[0]["bytes"] == 900
    assert rows[1]["cost.total_usd"] == "" and json.loads(rows[1]["attachments"]) == []  # not priced: empty
    export([ok], "jsonl", out, redact_text=True)
    assert "divorce" not in out.read_text()  # a file's name can say what it holds
    assert json.loads(out.read_text())["attachments"] == [
        {"name": None, "bytes": 900, "media_type": "text/plain", "est_tokens": 230}
    ]


def test_dash_writes_data_to_stdout_and_the_message_to_stderr(
    records: list[dict], tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    log = SessionLog("20260102-030405-abcd")
    for r in records:
        log.append(r)
    for fmt in ("csv", "jsonl"):
        assert main(["export", "-f", fmt, "-o", "-"]) == 0
        out, err = capsys.readouterr()
        assert "wrote 2 turns" in err and "standard output" in err and "wrote" not in out
        lines = out.splitlines()
        assert len(lines) == (3 if fmt == "csv" else 2)
    assert json.loads(lines[0])["schema"] == "ttft.turn/2"
    assert not (tmp_path / "-").exists()


@pytest.mark.parametrize("target", ["-", "/dev/stdout"])
def test_stdout_holds_only_the_data_in_a_real_pipe(records: list[dict], tmp_path: Path, target: str) -> None:
    env = {**os.environ, "TTFT_DATA_DIR": str(tmp_path / "data"), "PYTHONPATH": str(ROOT)}
    log = SessionLog("20260102-030405-abcd", directory=tmp_path / "data" / "sessions")
    for r in records:
        log.append(r)
    p = subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", "export", "-f", "csv", "-o", target],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(io.StringIO(p.stdout)))
    assert [r["status"] for r in rows] == ["ok", "error"]
    assert "wrote 2 turns" in p.stderr and "wrote" not in p.stdout


def test_export_and_sessions_commands(records: list[dict], tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    log = SessionLog("20260102-030405-abcd")
    for r in records:
        log.append(r)
    assert main(["sessions"]) == 0
    assert "20260102-030405-abcd" in capsys.readouterr().out
    out = tmp_path / "x.csv"
    assert main(["export", "--format", "csv", "--out", str(out)]) == 0
    assert "wrote 2 turns" in capsys.readouterr().err
    assert len(list(csv.DictReader(out.open()))) == 2
    assert main(["export", "missing-session"]) == 1
    assert "no session or file" in capsys.readouterr().err


def test_a_redacted_export_never_overwrites_the_full_one(
    records: list[dict], tmp_path: Path, monkeypatch, capsys
) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    log = SessionLog("20260102-030405-abcd")
    for r in records:
        log.append(r)
    assert main(["export"]) == 0 and main(["export", "--redact"]) == 0
    full, redacted = Path("20260102-030405-abcd.jsonl"), Path("20260102-030405-abcd.redacted.jsonl")
    assert [json.loads(line)["prompt"] for line in full.read_text().splitlines()] == [r["prompt"] for r in records]
    assert all(json.loads(line)["prompt"] is None for line in redacted.read_text().splitlines())


def test_version_and_help(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.startswith("ttft ")


def test_parquet_without_polars_says_so(records: list[dict], tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    log = SessionLog("20260102-030405-abcd")
    for r in records:
        log.append(r)
    monkeypatch.setitem(sys.modules, "polars", None)  # as if it were not installed
    out = tmp_path / "x.parquet"
    assert main(["export", "-f", "parquet", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "Parquet needs polars (pip install polars)" in err and "Traceback" not in err
    assert not out.exists()


def test_an_int_too_big_for_its_column_is_null_not_a_crash(records: list[dict], tmp_path: Path) -> None:
    # A hand-edited or damaged log: polars refused the whole Parquet file over one such value.
    pytest.importorskip("polars")
    import polars as pl

    odd = records[0] | {"tokens": {**records[0]["tokens"], "input": 10**30, "output": 1e30}}
    out = tmp_path / "a.parquet"
    assert export([odd, records[1]], "parquet", out) == 2
    frame = pl.read_parquet(out)
    assert frame["tokens.input"].to_list()[0] is None and frame["tokens.output"].to_list()[0] is None
    assert frame["tokens.input"].dtype == pl.Int64
    assert table.row(records[0])["tokens.output"] == records[0]["tokens"]["output"]  # an ordinary count stays


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_dash_on_a_terminal_shows_control_characters_instead_of_sending_them(
    records: list[dict], tmp_path: Path, monkeypatch
) -> None:
    # model text reaches a CSV cell as it is, and JSON leaves C1 (0x9b: a CSI by itself) unescaped
    hostile = records[0] | {"answer": "hi\x1b]0;owned\x07\x1b[2J\x9b31m\ttab\nline \u202eevil\u2066"}
    for fmt in ("csv", "jsonl"):
        term = _Terminal()
        monkeypatch.setattr(sys, "stdout", term)
        assert export([hostile], fmt, Path("-")) == 1
        out = term.getvalue()
        assert not any(ch in out for ch in "\x1b\x07\x9b\r\u202e\u2066"), repr(out)
        assert "\\x9b31m" in out  # shown, JSON or CSV
        assert "\\u202eevil\\u2066" in out  # a bidi override and isolate: escaped, never reordering the line
        assert "\\x1b]0;owned" in out or (fmt == "jsonl" and "\\u001b]0;owned" in out)
    pipe = io.StringIO()
    monkeypatch.setattr(sys, "stdout", pipe)
    export([hostile], "csv", Path("-"))
    assert "\x1b]0;owned\x07" in pipe.getvalue() and "\u202eevil\u2066" in pipe.getvalue()  # a pipe: exact


def test_parquet_is_refused_on_a_terminal(records: list[dict], monkeypatch) -> None:
    pytest.importorskip("polars")
    monkeypatch.setattr(sys, "stdout", _Terminal())
    with pytest.raises(OSError, match="binary"):
        export(records, "parquet", Path("-"))


def test_odd_url_and_tool_call_fields_are_dropped_not_leaked(records: list[dict], tmp_path: Path) -> None:
    # export() takes any dicts (a log read elsewhere, an old tool's): a field that is not of its
    # record type is written as nothing rather than a traceback or, for a URL, unmasked.
    ok = records[0]
    odd = ok | {"base_url": {"url": "https://user:hunter2@h/v1"}, "tool_calls": "call(secret)"}
    url = ok | {"base_url": "https://user:hunter2@h/v1?key=abc", "tool_calls": [{"name": "f", "arguments": "{}"}]}
    out = tmp_path / "a.jsonl"
    assert export([odd, url], "jsonl", out, redact_text=True) == 2
    text = out.read_text()
    assert "hunter2" not in text and "secret" not in text and "abc" not in text
    back = [json.loads(line) for line in text.splitlines()]
    assert back[0]["base_url"] is None and back[0]["tool_calls"] == []
    assert back[1]["base_url"].startswith("https://") and "h/v1" in back[1]["base_url"]
    assert back[1]["tool_calls"] == [{"name": "f", "arguments": None}]
