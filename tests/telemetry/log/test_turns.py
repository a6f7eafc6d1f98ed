"""The durable log: one fsynced line per turn, readable after a crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.log.sessions import list_sessions, resolve
from ttft.telemetry.log.turns import SessionLog, read_records

from tests.support.paths import ROOT
from tests.support.turns import at, play, recorder, stream


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def test_append_and_read_back_every_status(data_dir: Path) -> None:
    log = SessionLog()
    r_ok = recorder()
    for e in stream(visible=3):
        r_ok.feed(e)
    log.append(r_ok.finish())
    r_err = recorder()
    for e in [ev.AttemptSent(at(0)), ev.TextDelta(at(10), "part"), ev.Failed(at(20), "x", "dropped")]:
        r_err.feed(e)
    log.append(r_err.finish())
    recs = log.records()
    assert [r["status"] for r in recs] == ["ok", "error"]
    assert recs[1]["answer"] == "part"
    assert log.path.parent == data_dir / "sessions"
    # both recorders said turn 0: the log keeps indices unique, so the second is written as turn 1
    assert [r["turn_index"] for r in recs] == [0, 1] and log.next_turn_index() == 2
    keys = set(recs[0])
    for k in (
        "schema",
        "session_id",
        "turn_index",
        "started_at",
        "provider",
        "api",
        "model",
        "base_url",
        "settings",
        "status",
        "error",
        "attempts",
        "prompt",
        "answer",
        "reasoning",
        "events_ms",
        "metrics",
        "tokens",
        "server",
        "chunks",
    ):
        assert k in keys
    assert recs[0]["started_at"].endswith("+00:00")


def test_torn_last_line_is_skipped(data_dir: Path) -> None:
    log = SessionLog("s1")
    log.append(play(stream(visible=2)))
    with log.path.open("a") as f:
        f.write('{"schema": "ttft.turn/1", "answer": "cut')
    assert len(list(read_records(log.path))) == 1


def test_sessions_listing_and_resolve(data_dir: Path) -> None:
    a = SessionLog("20260101-000000-aaaa")
    a.append(play(stream(first_ms=100, visible=3)))
    time.sleep(0.01)
    b = SessionLog("20260101-000001-bbbb")
    b.append(play(stream(first_ms=300, visible=3)))
    b.append(play(stream(first_ms=500, visible=3)))
    sessions = list_sessions()
    assert sessions[0].session_id == b.session_id
    assert sessions[0].turns == 2 and sessions[0].median_ttft_ms == pytest.approx(400)
    assert resolve(None) == b.path
    assert resolve(a.session_id) == a.path
    with pytest.raises(FileNotFoundError):
        resolve("nope")


def test_a_killed_process_leaves_every_finished_turn(tmp_path: Path, data_dir: Path) -> None:
    """Write N turns, then SIGKILL mid-turn: exactly N valid lines survive."""
    n = 5
    script = textwrap.dedent(
        f"""
        import sys, time
        sys.path.insert(0, {str(ROOT)!r})
        from ttft.telemetry.log.turns import SessionLog
        from tests.support.turns import play, stream
        log = SessionLog("crash")
        for i in range({n}):
            log.append(play(stream(visible=3)))
        print("written", flush=True)
        time.sleep(60)  # the turn in flight when the process dies
        """
    )
    env = {**os.environ, "TTFT_DATA_DIR": str(data_dir)}
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    path = data_dir / "sessions" / "crash.jsonl"
    lines = path.read_text().splitlines()
    assert len(lines) == n
    assert all(json.loads(line)["schema"] == "ttft.turn/2" for line in lines)


def test_a_new_session_never_takes_an_id_whose_file_exists(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import secrets

    import ttft.telemetry.log.turns as log_module

    draws = iter(["aaaaaa", "aaaaaa", "bbbbbb"])
    monkeypatch.setattr(secrets, "token_hex", lambda n: next(draws))
    monkeypatch.setattr(log_module, "datetime", _FixedClock)
    first = SessionLog(directory=tmp_path)
    first.path.parent.mkdir(parents=True, exist_ok=True)
    first.path.write_text("")  # a session begun in the same second with the same draw
    second = SessionLog(directory=tmp_path)
    assert first.session_id == "20260101-090000-aaaaaa"
    assert second.session_id == "20260101-090000-bbbbbb" and second.path != first.path


class _FixedClock:
    @staticmethod
    def now(tz: object = None) -> datetime:
        return datetime(2026, 1, 1, 9, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "change",
    [
        (b'"tpot_ms":10.0', b'"tpot_ms":NaN'),  # orjson refuses NaN: the stdlib reads it, as before
        (b'"attempts":1', b'"attempts":123456789012345678901234567890'),  # past 64 bits: exact, as before
        (b'"prompt":"', b'"prompt":"\\ud800 lone '),  # a lone surrogate's escape: read, then scrubbed
        (b'"prompt":"', b'"prompt":"\\ud83d\\ude00 paired '),
        (b'"schema"', b'"schema":"x","schema"'),  # a repeated key: the last one counts in both parsers
    ],
)
def test_a_log_line_reads_as_the_stdlib_reads_it(change: tuple[bytes, bytes]) -> None:
    from ttft.telemetry import json_guard
    from ttft.telemetry.log.json_line import encode_line
    from ttft.telemetry.log.surrogates import scrub_value
    from ttft.telemetry.log.turns import BAD_LINE, parse_line, well_formed
    from ttft.telemetry.record import upgrade

    line = encode_line(play(stream(visible=3)))
    assert change[0] in line
    line = line.replace(change[0], change[1], 1)
    expected = json_guard.loads(line)  # the stdlib's reading, as parse_line read every line before
    expected = scrub_value(upgrade(expected)) if well_formed(expected) else BAD_LINE
    got = parse_line(line)
    assert got is not BAD_LINE and json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert parse_line(b"[" * 200 + b"]" * 200) is BAD_LINE  # past the guard's depth: never parsed
    assert parse_line(b'{"schema":"ttft.turn/2", "prompt": "\xff"}') is BAD_LINE  # not UTF-8
