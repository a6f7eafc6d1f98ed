"""Hostile data and hostile machines lose nothing.

Lone surrogates on the wire, a full disk, torn lines, an unwritable data folder, damaged
log files, SIGTERM / SIGHUP mid-stream and concurrent writers to one session: every turn
is kept (in the log, or in memory and said so), no command prints a traceback. Through the
real SDKs against the loopback fake server, real files and real processes.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ttft.backends.turn import new_recorder, run_turn
from ttft.telemetry.log.turns import LogWriteError, SessionLog, Skipped, read_records
from ttft.tui.chat.app import ChatApp
from ttft.tui.cli import main
from ttft.tui.widgets.transcript import NoteMessage

from tests.fakes import FakeServer, Schedule
from tests.support.backend_util import backend_for, make_request
from tests.support.paths import ROOT
from tests.support.tui_support import wait_until
from tests.support.turns import play, stream

_REAL_WRITE = os.write
LONE = "\ud800"  # valid JSON as "\ud800", but no UTF-8 file or terminal can hold it
REPLACED = "\ufffd"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    data, conf = tmp_path / "data", tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL", "TTFT_IN_PROCESS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(data))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return {**os.environ, "TTFT_DATA_DIR": str(data), "TTFT_CONFIG_DIR": str(conf), "PYTHONPATH": str(ROOT)}


@pytest.fixture
def srv():
    with FakeServer(Schedule(first_token_ms=10, token_ms=2, visible_tokens=4)) as s:
        yield s


def _ttft(env: dict[str, str], *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
    )


def _popen(env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ttft.tui.cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _session_files(env: dict[str, str]) -> list[Path]:
    return sorted(Path(env["TTFT_DATA_DIR"], "sessions").glob("*.jsonl"))


def _logged(env: dict[str, str]) -> list[dict[str, Any]]:
    """Every line of every session file, strictly: each must be valid UTF-8 and JSON."""
    out = []
    for f in _session_files(env):
        for line in f.read_bytes().decode("utf-8").splitlines():
            out.append(json.loads(line))
    return out


def _no_surrogate(value: Any) -> bool:
    return not any(0xD800 <= ord(ch) <= 0xDFFF for ch in json.dumps(value, ensure_ascii=False))


# --- 4. a lone surrogate ------------------------------------------------------------------
def _sse(events: list[tuple[str | None, dict[str, Any]]]) -> str:
    # json.dumps escapes the surrogate ("\ud800"): valid JSON, as an ASCII-escaping server sends it
    return "".join((f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n" for name, data in events)


def _chat_tool_call_sse() -> str:
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "fake-model"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
        return None, {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    call = {"index": 0, "id": "call_1", "type": "function", "function": {"name": "look" + LONE, "arguments": ""}}
    args = {"index": 0, "function": {"arguments": '{"q": "' + LONE + '"}'}}
    events = [
        chunk({"role": "assistant", "content": None, "tool_calls": [call]}),
        chunk({"tool_calls": [args]}),
        chunk({}, "tool_calls"),
    ]
    return _sse(events) + "data: [DONE]\n\n"


def _anthropic_tool_use_sse() -> str:
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "fake-model",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 1},
    }
    block = {"type": "tool_use", "id": "toolu_1", "name": "look", "input": {}}
    return _sse(
        [
            ("message_start", {"type": "message_start", "message": message}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": block}),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": '{"q": "' + LONE},
                },
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "input_json_delta", "partial_json": '"}'},
                },
            ),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 5}},
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
    )


TEXTS = Schedule(reasoning_tokens=1, visible_tokens=3, texts=("think " + LONE, "a", LONE, "b"), token_ms=1)
ERROR_MID = Schedule(visible_tokens=3, error_after=1, error_message="overloaded " + LONE, token_ms=1)
ERROR_HTTP = Schedule(fail_status=400, fail_message="bad " + LONE)
SURROGATE_CASES = [
    ("chat", "answer", TEXTS),
    ("chat", "reasoning", TEXTS),
    ("chat", "tool", Schedule(raw_sse=_chat_tool_call_sse())),
    ("chat", "error", ERROR_MID),
    ("chat", "error", ERROR_HTTP),
    ("responses", "answer", TEXTS),
    ("responses", "reasoning", TEXTS),
    ("responses", "error", ERROR_MID),
    ("messages", "answer", TEXTS),
    ("messages", "reasoning", replace(TEXTS, reasoning="thinking")),
    ("messages", "tool", Schedule(raw_sse=_anthropic_tool_use_sse())),
    ("messages", "error", ERROR_MID),
    ("messages", "error", ERROR_HTTP),
]


def _field(rec: dict[str, Any], path: str) -> str:
    if path == "tool":
        return json.dumps(rec["tool_calls"], ensure_ascii=False)
    if path == "error":
        return rec["error"]["message"]
    return rec[path]


@pytest.mark.parametrize(("api", "path", "schedule"), SURROGATE_CASES)
async def test_a_lone_surrogate_on_every_text_path_is_replaced_and_logged(
    api: str, path: str, schedule: Schedule, srv: FakeServer, env: dict[str, str]
) -> None:
    srv.schedule = schedule
    backend = backend_for(api, srv)
    request = make_request(max_retries=0)
    log = SessionLog("s-surrogate")
    try:
        record = await run_turn(
            backend, request, new_recorder(backend, request, session_id="s-surrogate", turn_index=0), log=log
        )
    finally:
        await backend.aclose()
    assert not log.write_errors
    (rec,) = _logged(env)  # the turn is in the log, as strict UTF-8
    assert rec["status"] == ("error" if path == "error" else "ok"), rec["error"]
    assert REPLACED in _field(rec, path) and _no_surrogate(rec)
    assert _no_surrogate(record.to_dict())  # in memory too: what --json and the chat show


def test_ask_prints_and_logs_an_answer_with_a_lone_surrogate(srv: FakeServer, env: dict[str, str]) -> None:
    srv.schedule = TEXTS
    p = _ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "hi")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    assert p.stdout == f"a{REPLACED}b\n"
    (rec,) = _logged(env)
    assert rec["answer"] == f"a{REPLACED}b" and rec["reasoning"] == f"think {REPLACED}"
    p = _ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--json", "hi")
    assert p.returncode == 0 and json.loads(p.stdout)["answer"] == f"a{REPLACED}b"


def test_ask_prompt_with_undecodable_argv_bytes(srv: FakeServer, env: dict[str, str]) -> None:
    # a byte that is not UTF-8 in argv becomes a lone surrogate (surrogateescape) in Python
    cmd = [sys.executable, "-m", "ttft.tui.cli", "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url]
    p = subprocess.run(
        [*cmd, os.fsdecode(b"caf\xe9")],
        env=env,
        capture_output=True,
        timeout=60,
        cwd=ROOT,
    )
    assert p.returncode == 0 and b"Traceback" not in p.stderr, p.stderr
    (rec,) = _logged(env)
    assert rec["prompt"] == f"caf{REPLACED}"


def test_bench_keeps_every_turn_with_a_lone_surrogate(
    srv: FakeServer, env: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    srv.schedule = TEXTS
    out = tmp_path / "run"
    args = ["bench", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--concurrency", "2"]
    rc = main([*args, "--requests", "4", "--warmup", "1", "--out", str(out), "--quiet"])
    assert rc == 0, capsys.readouterr().err
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_bytes().decode().splitlines()]
    assert len(turns) == 5 and all(t["answer"] == f"a{REPLACED}b" for t in turns)


def test_compare_headless_logs_both_panes_with_a_lone_surrogate(
    srv: FakeServer, env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    srv.schedule = TEXTS
    url = srv.openai_base_url
    rc = main(
        ["compare", "--headless", "-m", "compat:fake-model", "-m", "compat:fake-reasoner", "--base-url", url, "hi"]
    )
    assert rc == 0, capsys.readouterr().err
    logged = _logged(env)
    assert len(logged) == 2 and all(r["answer"] == f"a{REPLACED}b" for r in logged)


async def test_chat_keeps_a_turn_with_a_lone_surrogate(srv: FakeServer, env: dict[str, str]) -> None:
    srv.schedule = TEXTS
    app = ChatApp("compat:fake-model", base_url=srv.openai_base_url)
    async with app.run_test(size=(120, 40)) as pilot:
        app.query_one("#prompt").value = "hi"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=30)
        assert app.chat.session.records[0].answer == f"a{REPLACED}b"
        notes = " ".join(str(n.content) for n in app.query(NoteMessage))
        assert "could not write" not in notes
    (rec,) = _logged(env)
    assert rec["answer"] == f"a{REPLACED}b" and rec["reasoning"] == f"think {REPLACED}"


# --- 5. disk full, short writes, torn lines ----------------------------------------------
def _fail_log_writes(monkeypatch: pytest.MonkeyPatch, how: str) -> list[int]:
    """Make writes of turn records fail at ``os.write``: ``enospc`` at once, ``short`` after half the line
    went out (the next write then meets ENOSPC), ``zero`` after half (then 0 bytes written)."""
    real = os.write
    hits: list[int] = []
    torn: set[int] = set()

    def write(fd: int, data: Any) -> int:
        if fd in torn:
            torn.discard(fd)
            if how == "zero":
                return 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        if not bytes(data[:20]).lstrip(b"\n").startswith(b'{"schema":"ttft.turn'):
            return real(fd, data)
        hits.append(fd)
        if how == "enospc":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        torn.add(fd)
        return real(fd, bytes(data[: len(data) // 2]))

    monkeypatch.setattr(os, "write", write)
    return hits


@pytest.mark.parametrize("how", ["enospc", "short", "zero"])
def test_a_failed_or_short_append_raises_and_leaves_no_fragment(
    how: str, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    log = SessionLog("s-full")
    log.append(play(stream(visible=2)))
    before = log.path.read_bytes()
    hits = _fail_log_writes(monkeypatch, how)
    with pytest.raises(LogWriteError, match="could not write the session log") as exc:
        log.append(play(stream(visible=3)))
    assert hits and log.write_errors == [exc.value]
    assert log.path.read_bytes() == before  # no torn record for the next turn to be glued onto
    monkeypatch.setattr(os, "write", _REAL_WRITE)  # space is back
    log.append(play(stream(visible=4)))
    skipped = Skipped()
    recs = list(read_records(log.path, skipped))
    assert [len(r["chunks"]) for r in recs] == [2, 4] and not skipped


def test_a_torn_last_line_costs_only_itself(env: dict[str, str]) -> None:
    log = SessionLog("s-torn")
    log.append(play(stream(visible=2)))
    with log.path.open("ab") as f:  # a crash mid-write
        f.write(b'{"schema":"ttft.turn/1","session_id":"s-torn","turn_index":1,"answer":"cu')
    log.append(play(stream(visible=3)))
    skipped = Skipped()
    recs = list(read_records(log.path, skipped))
    assert [len(r["chunks"]) for r in recs] == [2, 3]  # the next turn starts on its own line
    assert skipped.lines == {log.path: 1} and skipped.message() == f"skipped 1 unreadable line in {log.path}"
    assert len({r["turn_index"] for r in recs}) == 2


def test_ask_on_a_full_disk_says_so_exits_3_and_still_prints_the_record(
    srv: FakeServer, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--json", "--session", "s-full"]
    hits = _fail_log_writes(monkeypatch, "short")
    assert main([*args, "hi"]) == 3
    out, err = capsys.readouterr()
    assert hits and json.loads(out)["answer"] == Schedule(visible_tokens=4).visible_text()  # not lost from memory
    assert "could not write the session log" in err and "No space left" in err and "Traceback" not in err
    monkeypatch.setattr(os, "write", _REAL_WRITE)
    assert main([*args, "again"]) == 0  # space is back: this turn is not glued onto a fragment
    capsys.readouterr()
    (rec,) = _logged(env)
    assert rec["prompt"] == "again"


def test_compare_headless_on_a_full_disk_reports_it(
    srv: FakeServer, env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _fail_log_writes(monkeypatch, "enospc")
    url = srv.openai_base_url
    rc = main(
        ["compare", "--headless", "-m", "compat:fake-model", "-m", "compat:fake-reasoner", "--base-url", url, "hi"]
    )
    out, err = capsys.readouterr()
    assert rc == 3 and "could not write the session log" in err and "2 turns were not saved" in err
    assert "A" in out and "B" in out  # the comparison itself is printed


def test_bench_on_a_full_disk_reports_it(
    srv: FakeServer, env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    _fail_log_writes(monkeypatch, "short")
    out = tmp_path / "run"
    args = ["bench", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--concurrency", "1"]
    rc = main([*args, "--requests", "2", "--warmup", "1", "--out", str(out), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 3 and f"could not write {out / 'turns.jsonl'}" in err and "No space left" in err
    assert (out / "turns.jsonl").read_bytes() == b""  # no torn line: the fragment was cut off again


async def test_chat_on_a_full_disk_keeps_the_turn_and_says_so(
    srv: FakeServer, env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _fail_log_writes(monkeypatch, "short")  # half the line goes out, then the disk is full
    app = ChatApp("compat:fake-model", base_url=srv.openai_base_url)
    async with app.run_test(size=(120, 40)) as pilot:
        app.query_one("#prompt").value = "hi"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=30)
        await wait_until(pilot, lambda: "No space left" in " ".join(str(n.content) for n in app.query(NoteMessage)))
        notes = " ".join(str(n.content) for n in app.query(NoteMessage))
        assert "could not write the session log" in notes and "No space left" in notes
        assert app.chat.session.records[0].answer == Schedule(visible_tokens=4).visible_text()


# --- 6. an unwritable data folder or output path ----------------------------------------
@pytest.fixture
def blocked(tmp_path: Path) -> Path:
    """A path no one can create, not even root: its parent is a regular file."""
    f = tmp_path / "a-file"
    f.write_text("x")
    return f / "dir"


@pytest.mark.parametrize("where", ["proc", "file"])
def test_ask_with_an_unwritable_data_folder(where: str, srv: FakeServer, env: dict[str, str], blocked: Path) -> None:
    if where == "proc" and not Path("/proc/self").exists():
        pytest.skip("no /proc here")
    data = "/proc/x" if where == "proc" else str(blocked)
    p = _ttft({**env, "TTFT_DATA_DIR": data}, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "hi")
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    assert p.stdout == Schedule(visible_tokens=4).visible_text() + "\n"  # the answer is still printed
    assert "ttft ask: could not write the session log" in p.stderr and data in p.stderr


def test_compare_headless_with_an_unwritable_data_folder(srv: FakeServer, env: dict[str, str], blocked: Path) -> None:
    url = srv.openai_base_url
    p = _ttft(
        {**env, "TTFT_DATA_DIR": str(blocked)},
        *("compare", "--headless", "-m", "compat:fake-model", "-m", "compat:fake-reasoner", "--base-url", url, "hi"),
    )
    assert p.returncode == 3 and "Traceback" not in p.stderr, p.stderr
    assert "could not write the session log" in p.stderr and "2 turns were not saved" in p.stderr


def test_export_report_and_bench_into_an_unwritable_path(
    env: dict[str, str], blocked: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    SessionLog("s-ok").append(play(stream(visible=3)))
    for fmt in ("jsonl", "csv", "otel"):
        assert main(["export", "s-ok", "-f", fmt, "-o", str(blocked / f"out.{fmt}")]) == 3  # not saved
        err = capsys.readouterr().err
        assert f"ttft export: could not write {blocked / f'out.{fmt}'}" in err
    assert main(["report", "s-ok", "--html", str(blocked / "r.html"), "--svg", str(blocked / "svg")]) == 3
    out, err = capsys.readouterr()
    assert "== turns ==" in out  # the report itself is printed
    assert f"could not write {blocked / 'r.html'}" in err and f"could not write the charts to {blocked / 'svg'}" in err
    rc = main(["bench", "-m", "compat:x", "--base-url", "http://127.0.0.1:9/v1", "--out", str(blocked), "--quiet"])
    assert rc == 3 and f"cannot write the results to {blocked}/" in capsys.readouterr().err


# --- 7. damaged log files ----------------------------------------------------------------
def _line(rec: dict[str, Any]) -> bytes:
    return json.dumps(rec, ensure_ascii=False).encode() + b"\n"


@pytest.fixture
def damaged(env: dict[str, str]) -> dict[str, Path]:
    """Three sessions: one clean, one with bytes that are not UTF-8, one with a field of the wrong type."""
    d = Path(env["TTFT_DATA_DIR"], "sessions")
    d.mkdir(parents=True)
    good = [play(stream(visible=2)) | {"turn_index": i} for i in range(2)]
    files = {"clean": d / "s-clean.jsonl", "bytes": d / "s-bytes.jsonl", "types": d / "s-types.jsonl"}
    files["clean"].write_bytes(b"".join(_line(r) for r in good))
    files["bytes"].write_bytes(_line(good[0]) + b'{"schema":"ttft.turn/1","answer":"\xff\xfe"}\n' + _line(good[1]))
    bad = [good[0] | {"metrics": [1, 2]}, good[0] | {"tokens": {"output": "many"}}, good[0] | {"chunks": [[1]]}]
    files["types"].write_bytes(b"".join(_line(r) for r in [*bad, good[1]]))
    return files


def test_sessions_lists_every_session_and_says_once_what_it_skipped(
    damaged: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["sessions"]) == 0
    out, err = capsys.readouterr()
    assert all(name in out for name in ("s-clean", "s-bytes", "s-types")) and "3 sessions" in out
    assert err.count("skipped") == 1 and "skipped 4 unreadable lines in 2 files" in err
    assert "s-bytes.jsonl (1)" in err and "s-types.jsonl (3)" in err


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "otel"])
def test_export_skips_what_it_cannot_read(
    fmt: str, damaged: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, skipped, kept in (("s-types", 3, 1), ("s-bytes", 1, 2)):
        assert main(["export", name, "-f", fmt, "-o", str(tmp_path / f"{name}.{fmt}")]) == 0
        out, err = capsys.readouterr()
        assert f"wrote {kept} turns" in err and not out
        assert err.count("skipped") == 1 and f"skipped {skipped} unreadable line" in err and "Traceback" not in err


def test_report_skips_what_it_cannot_read(damaged: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "s-types", "s-bytes", "s-clean"]) == 0
    out, err = capsys.readouterr()
    assert "== turns ==" in out and "s-clean" in out
    assert "skipped 3 unreadable lines in" in err and "skipped 1 unreadable line in" in err


def test_ask_appends_to_a_damaged_session(srv: FakeServer, damaged: dict[str, Path], env: dict[str, str]) -> None:
    p = _ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--session", "s-types", "hi")
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
    recs = list(read_records(damaged["types"]))
    assert [r["turn_index"] for r in recs] == [1, 2] and recs[-1]["prompt"] == "hi"


async def test_chat_resumes_a_damaged_session_and_says_what_it_skipped(damaged: dict[str, Path]) -> None:
    app = ChatApp("compat:fake-model", base_url="http://127.0.0.1:9/v1", resume=damaged["types"], warm_up=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(
            pilot,
            lambda: (
                len(app.chat.session.records) == 1 and any("skipped" in str(n.content) for n in app.query(NoteMessage))
            ),
        )
        assert app.chat.session.turn_index == 2
        notes = [str(n.content) for n in app.query(NoteMessage)]
        assert sum("skipped 3 unreadable lines" in n for n in notes) == 1


def test_a_log_line_with_an_escaped_lone_surrogate_is_read_clean(env: dict[str, str], tmp_path: Path) -> None:
    f = tmp_path / "s.jsonl"
    rec = play(stream(visible=2)) | {"answer": "x" + LONE}
    f.write_text(json.dumps(rec) + "\n")  # ensure_ascii: "\ud800" on disk
    (back,) = read_records(f)
    assert back["answer"] == "x" + REPLACED
    assert main(["export", str(f), "-f", "csv", "-o", str(tmp_path / "s.csv")]) == 0


# --- 8. SIGTERM and SIGHUP ---------------------------------------------------------------
SLOW = Schedule(first_token_ms=10, token_ms=40, visible_tokens=500)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_ask_logs_the_turn_in_flight_on_sigterm_and_sighup(sig: int, env: dict[str, str]) -> None:
    with FakeServer(SLOW) as s:
        proc = _popen(env, "ask", "-m", "compat:m", "--base-url", s.openai_base_url, "hi")
        assert s.wait_for(lambda r: r.chunks_sent >= 3, timeout=30) is not None
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 128 + sig, err
        assert s.wait_for(lambda r: r.disconnected, timeout=5) is not None  # the stream was closed at once
    assert out.startswith("w00 w01") and "cancelled" in err and "Traceback" not in err
    (rec,) = _logged(env)
    assert rec["status"] == "cancelled" and rec["answer"].startswith("w00 w01 w02")


def test_bench_logs_the_turns_in_flight_on_sigterm(env: dict[str, str], tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FakeServer(SLOW) as s:
        proc = _popen(
            env,
            *("bench", "-m", "compat:m", "--base-url", s.openai_base_url, "--concurrency", "2"),
            *("--requests", "4", "--warmup", "0", "--out", str(out), "--quiet"),
        )
        deadline = time.monotonic() + 30
        while sum(r.chunks_sent >= 2 for r in s.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and "interrupted" in err and "Traceback" not in err, err
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 2 and all(t["status"] == "cancelled" and t["answer"].startswith("w00 w01") for t in turns)


def test_compare_headless_logs_the_turns_in_flight_on_sigterm(env: dict[str, str]) -> None:
    with FakeServer(SLOW) as s:
        url = s.openai_base_url
        proc = _popen(env, "compare", "--headless", "-m", "compat:a", "-m", "compat:b", "--base-url", url, "hi")
        deadline = time.monotonic() + 30
        while sum(r.chunks_sent >= 2 for r in s.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 143 and "Traceback" not in err, err
    logged = _logged(env)
    assert len(logged) == 2 and all(r["status"] == "cancelled" and r["answer"].startswith("w00 w01") for r in logged)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
async def test_chat_logs_the_turn_in_flight_on_sigterm_and_sighup(sig: int, env: dict[str, str]) -> None:
    previous = signal.signal(sig, lambda *_: None)  # if the chat did not take the signal, this test must not die
    try:
        with FakeServer(SLOW) as s:
            app = ChatApp("compat:fake-model", base_url=s.openai_base_url)
            async with app.run_test(size=(120, 40)) as pilot:
                app.query_one("#prompt").value = "hi"
                await pilot.press("enter")
                # three chunks received (not merely sent: the backend's process may still hold them)
                await wait_until(
                    pilot,
                    lambda: app.chat.session.live is not None and len(app.chat.session.live.recorder.chunks) >= 3,
                    30,
                )
                os.kill(os.getpid(), sig)
                deadline = time.monotonic() + 10
                while app.return_code is None and time.monotonic() < deadline:
                    await asyncio.sleep(0.02)
                assert app.return_code == 128 + sig
    finally:
        signal.signal(sig, previous)
    (rec,) = _logged(env)
    assert rec["status"] == "cancelled" and rec["answer"].startswith("w00 w01 w02")


async def test_compare_screen_logs_the_turns_in_flight_on_sigterm(env: dict[str, str]) -> None:
    from ttft.tui.compare.app import CompareApp

    from tests.support.compare_fakes import ScheduledBackend

    previous = signal.signal(signal.SIGTERM, lambda *_: None)
    try:
        slow = [ScheduledBackend(f"slow{i}", ttft_s=0.02, gap_s=0.02, tokens=300) for i in range(2)]
        app = CompareApp(slow, session_id="s-term")
        async with app.run_test(size=(160, 48)):
            await app.compare.send("stop me")
            deadline = time.monotonic() + 10
            while not all(v.recorder is not None and v.recorder.answer for v in app.views):
                assert time.monotonic() < deadline, "the panes did not start streaming"
                await asyncio.sleep(0.01)
            os.kill(os.getpid(), signal.SIGTERM)
            while app.return_code is None and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
        assert app.return_code == 143
    finally:
        signal.signal(signal.SIGTERM, previous)
    recs = _logged(env)
    assert len(recs) == 2 and all(r["status"] == "cancelled" and r["answer"] for r in recs)


# --- 9. concurrent writers to one session ------------------------------------------------
WRITER = textwrap.dedent(
    """
    import random, sys, time
    from ttft.telemetry.log.turns import SessionLog
    from tests.support.turns import play, stream

    log = SessionLog(sys.argv[1])
    for _ in range(int(sys.argv[2])):
        index = log.next_turn_index()  # what a front end does before its turn ...
        time.sleep(random.random() / 500)  # ... which takes a while, while others append
        log.append(play(stream(visible=2)) | {"turn_index": index})
    """
)


def test_concurrent_writers_never_repeat_a_turn_index(env: dict[str, str]) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, "s-shared", "25"], env=env, cwd=ROOT, stderr=subprocess.PIPE)
        for _ in range(4)
    ]
    for p in procs:
        assert p.wait(timeout=120) == 0, p.stderr.read() if p.stderr else ""
    skipped = Skipped()
    recs = list(read_records(Path(env["TTFT_DATA_DIR"], "sessions", "s-shared.jsonl"), skipped))
    assert len(recs) == 100 and not skipped  # no interleaved or torn lines
    assert sorted(r["turn_index"] for r in recs) == list(range(100))


def test_concurrent_asks_on_one_session_get_distinct_turns(env: dict[str, str]) -> None:
    with FakeServer(Schedule(first_token_ms=600, token_ms=2, visible_tokens=3)) as s:
        args = ("ask", "-m", "compat:m", "--base-url", s.openai_base_url, "--session", "s-asks", "hi")
        procs = [_popen(env, *args) for _ in range(3)]
        results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], results
    recs = _logged(env)
    assert sorted(r["turn_index"] for r in recs) == [0, 1, 2]
