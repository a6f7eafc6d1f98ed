"""Exports and reports are private, CSV cells never run, session ids stay in their folder."""

from __future__ import annotations

import csv
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from ttft.telemetry.export.formats import csv_cell, export
from ttft.telemetry.log.turns import LogWriteError, SessionLog, check_session_id

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


# --- issue 39, item 7: files the user did not make are not followed ---------------------------------
def _config_check(env: dict, limit_bytes: int = 1 << 30) -> subprocess.CompletedProcess[str]:
    """``check_config()`` in a child held to ``limit_bytes`` of memory and 30 s: a reader that follows
    /dev/zero or waits on a FIFO fails here instead of eating the machine or hanging the suite."""
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({limit_bytes}, {limit_bytes}))\n"
        "from ttft.backends.providers.config import ProviderError, check_config\n"
        "try:\n"
        "    check_config()\n"
        "except ProviderError as exc:\n"
        "    print(exc, file=sys.stderr); sys.exit(2)\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30, cwd=ROOT, check=False
    )


@pytest.mark.parametrize("kind", ["link to /dev/zero", "FIFO", "folder", "over 1 MiB"])
def test_a_config_that_is_not_a_small_regular_file_is_refused_at_once(kind: str, env: dict) -> None:
    config = Path(env["TTFT_CONFIG_DIR"], "config.toml")
    if kind == "link to /dev/zero":
        config.symlink_to("/dev/zero")
    elif kind == "FIFO":
        os.mkfifo(config)  # no writer ever comes: reading it would wait for ever
    elif kind == "folder":
        config.mkdir()
    else:
        config.write_bytes(b"# " + b"x" * (1 << 20) + b"\n")
    started = time.monotonic()
    p = _config_check(env)
    assert p.returncode == 2, p.stderr
    assert time.monotonic() - started < 20
    said = p.stderr.strip()
    assert said.startswith(f"{config}: ") and len(said.splitlines()) == 1, said
    assert ("1 MiB" in said) if kind == "over 1 MiB" else ("not a regular file" in said), said
    # the command line says the same in one line, with the config's exit code
    c = run_ttft(env, "ask", "-m", "compat:m", "--base-url", "http://127.0.0.1:9/v1", "hi")
    assert c.returncode == 2 and b"Traceback" not in c.stderr and str(config).encode() in c.stderr, c.stderr


def test_a_config_linked_to_a_regular_file_is_read(env: dict, tmp_path: Path) -> None:
    """Dotfile managers link config.toml in: a link to a regular file is the user's own file."""
    real = tmp_path / "dotfiles" / "ttft.toml"
    real.parent.mkdir()
    real.write_text('default = "nosuchprovider:m"\n')
    Path(env["TTFT_CONFIG_DIR"], "config.toml").symlink_to(real)
    p = _config_check(env)
    assert p.returncode == 2 and "unknown provider 'nosuchprovider'" in p.stderr, p.stderr  # it was read


def test_every_value_an_error_quotes_is_cut_to_200_characters(env: dict) -> None:
    long = "x" * 100_000
    Path(env["TTFT_CONFIG_DIR"], "config.toml").write_text(f'default = "{long}"\n')
    p = run_ttft(env, "ask", "-m", "compat:m", "--base-url", "http://127.0.0.1:9/v1", "hi")
    err = p.stderr.decode()
    assert p.returncode == 2 and "unknown provider 'xxx" in err and "(100,002 characters)" in err, err[:500]
    assert len(err) < 600 and "x" * 201 not in err, len(err)
    Path(env["TTFT_CONFIG_DIR"], "config.toml").unlink()
    for args in (
        ["ask", "--timeout", long, "hi"],
        ["ask", "-m", f"nosuch{long}:m", "hi"],
        ["ask", "-m", "compat:m", "--base-url", "http://127.0.0.1:9/v1", "--session", f"a/{long}", "hi"],
        ["ask", "-m", "compat:m", "--base-url", "http://127.0.0.1:9/v1", "--mcp", f"'{long}", "hi"],
    ):
        p = run_ttft(env, *args)
        err = p.stderr.decode()
        assert p.returncode == 2 and "characters)" in err and "Traceback" not in err, err[:500]
        assert "x" * 201 not in err, (args[:2], len(err))


def _turn(srv: FakeServer, env: dict, session: str) -> subprocess.CompletedProcess[bytes]:
    return run_ttft(
        env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--session", session, "hi"
    )


def test_a_session_log_that_is_a_symlink_is_not_followed(srv: FakeServer, env: dict, tmp_path: Path) -> None:
    sessions = Path(env["TTFT_DATA_DIR"], "sessions")
    sessions.mkdir(parents=True)
    target = tmp_path / "elsewhere.txt"
    target.write_text("not a log\n")
    target.chmod(0o644)
    (sessions / "planted.jsonl").symlink_to(target)
    p = _turn(srv, env, "planted")
    err = p.stderr.decode()
    assert p.returncode != 0 and "symbolic link" in err and "Traceback" not in err, err
    assert target.read_text() == "not a log\n" and stat.S_IMODE(target.stat().st_mode) == 0o644  # untouched
    with pytest.raises(LogWriteError, match="symbolic link"):
        SessionLog("planted").append({"schema": "ttft.turn/2", "session_id": "planted", "turn_index": 0})
    assert target.read_text() == "not a log\n"


def test_an_older_log_found_wider_is_made_0600_as_a_turn_is_appended(srv: FakeServer, env: dict) -> None:
    sessions = Path(env["TTFT_DATA_DIR"], "sessions")
    sessions.mkdir(parents=True)
    old = sessions / "older.jsonl"
    old.write_text("")
    old.chmod(0o644)
    assert _turn(srv, env, "older").returncode == 0
    assert stat.S_IMODE(old.stat().st_mode) == 0o600 and len(old.read_text().splitlines()) == 1
    new = _turn(srv, env, "brand-new")
    assert new.returncode == 0 and stat.S_IMODE((sessions / "brand-new.jsonl").stat().st_mode) == 0o600


def test_the_bench_files_are_private_like_every_turn_file(srv: FakeServer, env: dict, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "levels.csv").write_text("old\n")
    (out / "levels.csv").chmod(0o644)  # a run before this one: replaced, and private
    b = run_ttft(
        env, "bench", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--concurrency", "1",
        "--requests", "1", "--warmup", "0", "--out", str(out), "--quiet",
    )  # fmt: skip
    assert b.returncode == 0, b.stderr.decode()[-2000:]
    for name in ("turns.jsonl", "summary.json", "levels.csv"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o600, name
    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "turns.jsonl").symlink_to(tmp_path / "victim.txt")
    b = run_ttft(
        env, "bench", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--concurrency", "1",
        "--requests", "1", "--warmup", "0", "--out", str(planted), "--quiet",
    )  # fmt: skip
    assert b.returncode != 0 and b"symbolic link" in b.stderr and b"Traceback" not in b.stderr, b.stderr
    assert not (tmp_path / "victim.txt").exists()
