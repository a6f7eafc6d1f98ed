"""Exports and reports are private, CSV cells never run, session ids stay in their folder."""

from __future__ import annotations

import csv
import json
import stat
from pathlib import Path

import pytest

from telemetry.export.formats import csv_cell, export
from telemetry.log.turns import SessionLog, check_session_id
from tests.fakes import FakeServer, Schedule
from tests.support.security_util import ROOT, env_fixture, run_ttft  # noqa: F401


@pytest.fixture
def srv():
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=3)) as s:
        yield s


def test_exports_and_html_reports_are_private(srv: FakeServer, env: dict, tmp_path: Path) -> None:
    srv.schedule = Schedule(first_token_ms=5, token_ms=1, visible_tokens=3)
    assert run_ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "hi").returncode == 0
    old = tmp_path / "old.csv"
    old.write_text("")
    old.chmod(0o644)  # an existing file is made private too
    targets = [
        ("jsonl", tmp_path / "a.jsonl"),
        ("csv", tmp_path / "a.csv"),
        ("otel", tmp_path / "a.json"),
        ("csv", old),
    ]
    for fmt, out in targets:
        assert run_ttft(env, "export", "-f", fmt, "-o", str(out)).returncode == 0
        assert stat.S_IMODE(out.stat().st_mode) == 0o600, out
    html = tmp_path / "r.html"
    log = next(Path(env["TTFT_DATA_DIR"], "sessions").glob("*.jsonl"))
    r = run_ttft(env, "report", str(log), "--html", str(html))
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(html.stat().st_mode) == 0o600


def test_csv_cells_never_run_as_formulas(tmp_path: Path) -> None:
    rec = {
        "prompt": '=HYPERLINK("http://evil.example","x")',
        "answer": "+1+1",
        "model": "@SUM(A1)",
        "reasoning": "-2+3",
        "provider": "\tTAB",
        "api": "\rCR",
        "metrics": {"ttft_ms": -5, "tpot_ms": -1.5},
        "extra": {"n": "-5", "e": "+1.5e3"},
    }
    export([rec], "csv", tmp_path / "t.csv")
    (row,) = list(csv.DictReader((tmp_path / "t.csv").open(encoding="utf-8", newline="")))
    assert row["prompt"].startswith("'=") and row["answer"] == "'+1+1" and row["model"] == "'@SUM(A1)"
    assert row["reasoning"] == "'-2+3" and row["provider"] == "'\tTAB" and row["api"] == "'\rCR"
    assert row["metrics.ttft_ms"] == "-5.0" and row["metrics.tpot_ms"] == "-1.5"  # numbers stay numbers
    assert json.loads(row["extra.other"]) == {"n": "-5", "e": "+1.5e3"}  # JSON text starts with "{"
    assert csv_cell("plain") == "plain" and csv_cell(-5) == -5


@pytest.mark.parametrize("bad", ["../../x", "/tmp/evil", "a/b", "..", ".hidden", "a\\b", "x\x1b"])
def test_session_ids_cannot_leave_the_sessions_folder(bad: str, env: dict, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a session id"):
        check_session_id(bad)
    with pytest.raises(ValueError):
        SessionLog(bad)
    p = run_ttft(env, "ask", "-m", "compat:m", "--base-url", "http://127.0.0.1:9/v1", "--session", bad, "hi")
    assert p.returncode == 2 and b"not a session id" in p.stderr and b"Traceback" not in p.stderr
    assert not list(tmp_path.rglob("*.jsonl")) and not Path("/tmp/evil.jsonl").exists()
    if not (ROOT / bad).exists():  # read-only commands still take a path that exists ("..": a folder)
        e = run_ttft(env, "export", bad)
        assert e.returncode == 1 and b"not a session id" in e.stderr and b"Traceback" not in e.stderr
    assert check_session_id("20260101-090000-a1b2") == "20260101-090000-a1b2"
