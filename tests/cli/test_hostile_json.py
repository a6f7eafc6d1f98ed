"""Each entry point fed its worst JSON (issue 28): nested 100,000 deep, or past its size limit.

The chat's tool-call rendering and ``--resume``, ``ttft report`` on a summary and ``--merge``,
``ttft bench --dataset``, the history and drafts files, ``ttft sessions`` and ``export``: each gives
a clear message and the exit code docs/errors.md gives, keeps what it can, and never prints a
traceback. Anything unforeseen is a crash report (mode 0600, masked) named in one line, and the
chat stays up. Through the real CLI in a subprocess, the real chat under Textual's pilot, and
the loopback fake servers (error bodies: ``tests/backends/providers/test_hostile_json_bodies.py``).
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.json_guard import MAX_BYTES, MAX_DEPTH
from ttft.telemetry.log import drafts
from ttft.telemetry.log.json_line import encode_line
from ttft.telemetry.log.prompt_history import PromptHistory
from ttft.tui.chat.app import ChatApp
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit
from ttft.tui.crash import BUG_EXIT
from ttft.tui.widgets.transcript import ToolCalls

from tests.fakes import FakeServer, Schedule
from tests.fakes.batching_server import BatchingServer
from tests.support.paths import ROOT
from tests.support.tui_support import heard, wait_until
from tests.support.turns import at, play, stream

DEEP = "[" * 100_000 + "]" * 100_000
TOO_DEEP = f"JSON nested more than {MAX_DEPTH} levels deep"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    data, conf = tmp_path / "data", tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL", "TTFT_IN_PROCESS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(data))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return {**os.environ, "TTFT_DATA_DIR": str(data), "TTFT_CONFIG_DIR": str(conf), "PYTHONPATH": str(ROOT)}


def _ttft(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    p = subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", *args], env=env, capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert "Traceback" not in p.stderr and "Traceback" not in p.stdout, p.stderr[-2000:]
    return p


def _tool_turn(index: int, arguments: str) -> dict[str, Any]:
    """A logged turn whose model called a tool with these arguments (a string in the record)."""
    events = stream(visible=2)
    events.insert(-1, ev.ToolCallDelta(at(300), "lookup", arguments, index=0))  # before the turn's end
    return play(events) | {"session_id": "s-deep", "turn_index": index}


def _deep_session(env: dict[str, str]) -> Path:
    """A session log: a turn whose tool call nests 100,000 deep, a line that itself does, a good turn."""
    folder = Path(env["TTFT_DATA_DIR"], "sessions")
    folder.mkdir(parents=True)
    path = folder / "s-deep.jsonl"
    deep_line = b'{"schema":"ttft.turn/2","session_id":"s-deep","turn_index":1,"x":' + DEEP.encode() + b"}\n"
    path.write_bytes(encode_line(_tool_turn(0, DEEP)) + deep_line + encode_line(_tool_turn(2, '{"q": 1}')))
    return path


def _shown(app: ChatApp) -> str:
    import io

    from rich.console import Console

    console = Console(width=200, file=io.StringIO(), record=True)
    for w in app.query(ToolCalls):
        if w.display:
            console.print(w.content)
    return console.export_text()


# --- the chat ----------------------------------------------------------------------------------------
async def test_a_tool_call_nested_100000_deep_shows_the_turn_with_a_notice(env: dict[str, str]) -> None:
    """The real chat, through the lean reader, against a server that calls a tool with such arguments."""
    with FakeServer(Schedule(visible_tokens=1, tool_calls=(("lookup", DEEP),), tool_piece_chars=50_000)) as srv:
        app = ChatApp("compat:fake-model", base_url=srv.openai_base_url)
        async with app.run_test(size=(120, 40)) as pilot:
            app.query_one("#prompt").value = "look it up"  # type: ignore[attr-defined]
            await pilot.press("enter")
            await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, 30)
            await pilot.pause(0.3)
            shown = _shown(app)
            assert app.is_running and not app.crash_lines
            record = app.chat.session.records[0]
    assert record.status == "ok" and list(record.tool_calls) == [{"name": "lookup", "arguments": DEEP}]  # kept whole
    assert "tool call: lookup" in shown and TOO_DEEP in shown and "shown as sent" in shown
    assert f"the first 2,000 of {len(DEEP):,} characters shown" in shown


async def test_resume_of_a_log_with_such_a_tool_call_shows_its_turns(env: dict[str, str]) -> None:
    path = _deep_session(env)
    app = ChatApp("compat:fake-model", base_url="http://127.0.0.1:9/v1", resume=path, warm_up=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: len(app.chat.session.records) == 2, 20)
        await pilot.pause(0.3)
        shown = _shown(app)
        assert app.is_running and not app.crash_lines
        assert app.chat.session.turn_index == 3  # the line that did not read still holds its index
    assert TOO_DEEP in shown and '"q": 1' in shown


def test_sessions_lists_a_log_with_deep_json(env: dict[str, str]) -> None:
    _deep_session(env)
    p = _ttft(env, "sessions")
    assert p.returncode == 0 and "s-deep" in p.stdout
    assert "skipped 1 unreadable line" in p.stderr


async def test_an_unforeseen_error_in_the_chat_is_a_report_and_a_notice_and_the_chat_goes_on(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from ttft.tui.widgets.transcript import Transcript

    calls = {"n": 0}
    real = Transcript.add_record

    async def broken(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("drawing failed, token sk-secret-123456789 at http://u:pw-9876543@h/v1?k=v")
        return await real(self, *args, **kwargs)

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123456789")
    monkeypatch.setattr(Transcript, "add_record", broken)
    path = _deep_session(env)
    app = ChatApp("compat:fake-model", base_url="http://127.0.0.1:9/v1", resume=path, warm_up=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: bool(app.crash_lines), 20)
        await pilot.pause(0.3)
        assert app.is_running
        notices = heard(app)
        assert any("unexpected error" in str(m) and "crash report" in str(m) for m in notices), notices
        app.query_one("#prompt").value = "still typing"  # type: ignore[attr-defined]
        await pilot.press("x")
        assert app.query_one("#prompt").value.endswith("x")  # type: ignore[attr-defined]
        assert isinstance(app._exception, RuntimeError)  # kept for run_test to raise: cleared, as it is expected
        app._exception = None
    (line,) = app.crash_lines
    report = Path(line.rsplit(" ", 1)[-1])
    _assert_private_and_masked(report, "RuntimeError", ("sk-secret-123456789", "pw-9876543"))


def _assert_private_and_masked(report: Path, name: str, secrets: tuple[str, ...]) -> None:
    assert report.parent.name == "crashes" and report.is_file()
    assert stat.S_IMODE(report.stat().st_mode) == 0o600
    text = report.read_text()
    assert "Traceback" in text and name in text  # the maintainer's copy is whole
    assert not any(s in text for s in secrets), text


def test_an_unforeseen_error_in_a_command_is_one_line_and_a_report(
    env: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import ttft.tui.commands.sessions as sessions_command

    def broken(args: Any) -> int:
        raise KeyError("the key is sk-secret-123456789")

    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-123456789")
    monkeypatch.setattr(sessions_command, "run", broken)
    monkeypatch.setattr(sessions_command, "register", _registering(sessions_command.register, broken))
    assert main(["sessions", "--json"]) == BUG_EXIT == Exit.BUG
    _, err = capsys.readouterr()
    assert "Traceback" not in err and err.count("\n") == 1, err
    assert err.startswith("ttft hit an unexpected error (KeyError: ") and "sk-secret" not in err
    _assert_private_and_masked(Path(err.split("the crash report is ")[1].strip()), "KeyError", ("sk-secret-123456789",))


def _registering(register: Any, func: Any) -> Any:
    def wrapped(sub: Any) -> None:
        register(sub)
        sub.choices["sessions"].set_defaults(func=func)

    return wrapped


# --- report, merge ------------------------------------------------------------------------------------
def test_report_on_a_summary_nested_100000_deep(env: dict[str, str], tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "summary.json").write_text('{"schema": "ttft.bench/1", "details": ' + DEEP + "}")
    p = _ttft(env, "report", str(run))
    assert p.returncode == Exit.FAILED
    assert f"{run / 'summary.json'}: {TOO_DEEP}" in p.stderr


def test_report_on_a_summary_past_the_size_limit(env: dict[str, str], tmp_path: Path) -> None:
    big = tmp_path / "big.json"
    with big.open("wb") as f:  # a sparse file: the size is what is refused, before a byte is parsed
        f.write(b'{"schema": "ttft.bench/1", "x": "')
        f.truncate(MAX_BYTES + 1024)
    p = _ttft(env, "report", str(big))
    assert p.returncode == Exit.FAILED
    assert f"{big}: 64.0 MB of JSON, past ttft's limit of 64.0 MB" in p.stderr


def test_merge_reads_the_requests_around_a_deep_line_and_a_deep_summary(env: dict[str, str], tmp_path: Path) -> None:
    runs = []
    for name in ("a", "b"):  # two runs, as two machines made them
        folder = tmp_path / name
        p = _ttft(env, "bench", "-m", "compat:fake", "--base-url", _server_url(), "--out", str(folder), "-q",
                  "--concurrency", "1", "--requests", "3", "--warmup", "0")  # fmt: skip
        assert p.returncode == 0, p.stderr
        lines = (folder / "turns.jsonl").read_bytes().splitlines(keepends=True)
        (folder / "turns.jsonl").write_bytes(lines[0] + b'{"x": ' + DEEP.encode() + b"}\n" + b"".join(lines[1:]))
        (folder / "summary.json").write_text('{"run_id": ' + DEEP + "}")
        runs.append(str(folder))
    p = _ttft(env, "report", "--merge", *runs)
    assert p.returncode == 0, p.stderr
    assert p.stderr.count("skipped 1 unreadable line") == 2 and "== " in p.stdout


_SERVER: list[BatchingServer] = []


def _server_url() -> str:
    if not _SERVER:
        _SERVER.append(BatchingServer(slots=4, token_ms=1, alpha=0.0, prefill_ms=1).__enter__())
    return _SERVER[0].base_url


@pytest.fixture(scope="module", autouse=True)
def _close_server() -> Any:
    yield
    for s in _SERVER:
        s.__exit__(None, None, None)


# --- bench --dataset ------------------------------------------------------------------------------------
def test_a_dataset_line_nested_100000_deep_is_named_and_the_rest_is_sent(env: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "prompts.jsonl"
    good = [json.dumps({"prompt": f"question {i}"}) for i in range(3)]
    path.write_text("\n".join([good[0], DEEP, *good[1:]]) + "\n")
    out = tmp_path / "run"
    p = _ttft(env, "bench", "-m", "compat:fake", "--base-url", _server_url(), "--out", str(out), "--dataset",
              str(path), "--concurrency", "1", "--requests", "3", "--warmup", "0")  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert f"line 2: {TOO_DEEP}" in p.stderr + p.stdout
    assert len((out / "turns.jsonl").read_text().splitlines()) == 3


def test_a_dataset_that_is_one_list_nested_100000_deep_is_refused_in_words(env: dict[str, str], tmp_path: Path) -> None:
    path = tmp_path / "prompts.json"
    path.write_text(DEEP)
    p = _ttft(env, "bench", "-m", "compat:fake", "--base-url", _server_url(), "--out", str(tmp_path / "r"),
              "--dataset", str(path), "--requests", "1", "--warmup", "0")  # fmt: skip
    assert p.returncode == Exit.USAGE, p.stderr
    assert f"the dataset {path}: {TOO_DEEP}" in p.stderr


# --- history, drafts -------------------------------------------------------------------------------------
async def test_history_and_draft_files_nested_100000_deep_are_skipped_and_the_chat_starts(
    env: dict[str, str],
) -> None:
    data = Path(env["TTFT_DATA_DIR"])
    data.mkdir(parents=True, exist_ok=True)
    (data / "prompt_history.jsonl").write_text(DEEP + "\n" + json.dumps({"text": "an older prompt"}) + "\n")
    history = PromptHistory().load()
    assert history.entries == ["an older prompt"] and history.skipped == 1
    (data / "drafts").mkdir()
    (data / "drafts" / "s-draft.json").write_text('{"text": ' + DEEP + "}")
    assert drafts.load("s-draft") is None
    app = ChatApp("compat:fake-model", base_url="http://127.0.0.1:9/v1", session_id="s-draft", warm_up=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause(0.2)
        await pilot.press("up")
        await pilot.pause(0.1)
        assert app.query_one("#prompt").value == "an older prompt"  # type: ignore[attr-defined]
        assert app.is_running and not app.crash_lines


# --- sessions, export ------------------------------------------------------------------------------------
@pytest.mark.parametrize("fmt", ["jsonl", "csv", "otel"])
def test_sessions_and_export_on_a_log_with_deep_json(env: dict[str, str], tmp_path: Path, fmt: str) -> None:
    _deep_session(env)
    p = _ttft(env, "export", "s-deep", "-f", fmt, "-o", str(tmp_path / f"out.{fmt}"))
    assert p.returncode == 0, p.stderr
    assert "wrote 2 turns" in p.stderr and "skipped 1 unreadable line" in p.stderr


# --- config -----------------------------------------------------------------------------------------------
def test_a_config_file_nested_100000_deep_is_a_config_error(env: dict[str, str]) -> None:
    """TOML, not JSON, but its parser recurses the same way: measured by the same guard first."""
    Path(env["TTFT_CONFIG_DIR"], "config.toml").write_text("default = " + DEEP)
    p = _ttft(env, "ask", "-m", "compat:fake", "--base-url", "http://127.0.0.1:9/v1", "hi")
    assert p.returncode == Exit.USAGE
    assert f"config.toml: nests arrays or inline tables more than {MAX_DEPTH} levels deep" in p.stderr


def test_a_bug_that_ends_a_turn_names_its_crash_report_once(env: dict[str, str]) -> None:
    from ttft.backends.providers.errors import ErrorContext, failed_from_exception

    def boom(n: int) -> None:
        raise RuntimeError(f"boom {n}")

    failures = []
    for n in range(3):  # a bench whose every request meets the same bug: one report
        try:
            boom(n)
        except RuntimeError as exc:
            failures.append(failed_from_exception(exc, ErrorContext("openai", "http://127.0.0.1:9/v1")))
    assert {f.error_type for f in failures} == {"RuntimeError"}
    paths = {f.hint.split("Its crash report: ")[1] for f in failures if f.hint}
    assert len(paths) == 1
    report = Path(paths.pop())
    assert report.parent == Path(env["TTFT_DATA_DIR"], "crashes")
    _assert_private_and_masked(report, "boom 0", ())
