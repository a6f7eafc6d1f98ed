"""Model output, a server's error text and a log file's fields never drive the terminal.

An answer carrying OSC/CSI sequences goes through the real OpenAI SDK from the loopback fake
server to ``ttft ask`` on a pseudo-terminal, piped, as ``--json``, and to the chat under
Textual's pilot: shown as visible characters, never sent as control sequences; the log keeps
the exact text.
"""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.text import Text
from ttft.tui.chat.app import ChatApp
from ttft.tui.cli import main
from ttft.tui.format import visible_controls
from ttft.tui.terminal import visible_text
from ttft.tui.widgets.error_card import ErrorCard

from tests.fakes import FakeServer, Schedule
from tests.support.security_util import ROOT, env_fixture, log_lines, run_ttft  # noqa: F401
from tests.support.tui_support import wait_until

# What a prompt injection can make a model write: a new window title, a cleared screen, the
# clipboard overwritten (OSC 52), a hyperlink hiding its target (OSC 8), a C1 CSI setting red.
HOSTILE = (
    "Hello ",
    "\x1b]0;PWNED\x07",
    " \x1b[2J",
    " \x1b]52;c;ZWNobyBwd25lZA==\x07",
    " \x1b]8;;https://evil.example/\x1b\\click\x1b]8;;\x1b\\",
    " \x9b31mRED",
    " tab:\tTAB",
    " end.",
)
ANSWER = "".join(HOSTILE)
SHOWN = ("␛]0;PWNED␇", "␛[2J", "␛]52;c;ZWNobyBwd25lZA==␇", "␛]8;;https://evil.example/␛\\click", "<0x9b>31mRED")
RAW = ("\x1b", "\x07", "\x9b")


def _hostile_schedule(**kw: Any) -> Schedule:
    return Schedule(first_token_ms=10, token_ms=2, texts=HOSTILE, visible_tokens=len(HOSTILE), **kw)


def _hostile_schedule(**kw: Any) -> Schedule:
    return Schedule(first_token_ms=10, token_ms=2, texts=HOSTILE, visible_tokens=len(HOSTILE), **kw)


@pytest.fixture
def srv():
    with FakeServer(_hostile_schedule()) as s:
        yield s


def _on_a_terminal(env: dict[str, str], *args: str) -> tuple[int, bytes, bytes]:
    """``ttft ARGS`` with stdout on a pseudo-terminal (stderr piped): rc, what the terminal got, stderr."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ttft.tui.cli", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    err = proc.stderr.read() if proc.stderr else b""
    return proc.wait(timeout=60), out, err


def _has_raw_controls(text: str) -> bool:
    return any(c in text for c in RAW)


# --- 1. model output never drives the terminal ------------------------------------------------
def test_visible_controls_shows_every_control_but_newline_and_tab() -> None:
    assert visible_controls("a\tb\nc") == "a\tb\nc"
    assert visible_controls(ANSWER) == (
        "Hello ␛]0;PWNED␇ ␛[2J ␛]52;c;ZWNobyBwd25lZA==␇ ␛]8;;https://evil.example/␛\\click␛]8;;␛\\"
        " <0x9b>31mRED tab:\tTAB end."
    )
    every = "".join(map(chr, [*range(0x20), 0x7F, *range(0x80, 0xA0)]))
    shown = visible_controls(every)
    assert not any((0 <= ord(c) < 0x20 and c not in "\t\n") or 0x7F <= ord(c) < 0xA0 for c in shown)
    assert "␀" in shown and "␛" in shown and "␍" in shown and "␡" in shown and "<0x85>" in shown
    plain = "no control here"
    assert visible_controls(plain) is plain  # clean text costs one scan, no copy


def test_visible_text_keeps_styles_on_their_characters() -> None:
    t = Text.assemble(("\x9bX", "red"), (" ok ", ""), ("\x1b[2J", "bold"))
    v = visible_text(t)
    assert v.plain == "<0x9b>X ok ␛[2J"
    styled = {str(s.style): v.plain[s.start : s.end] for s in v.spans}
    assert styled == {"red": "<0x9b>X", "bold": "␛[2J"}


def test_ask_on_a_terminal_shows_control_characters_and_the_log_keeps_them(srv: FakeServer, env: dict) -> None:
    rc, out, err = _on_a_terminal(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "hi")
    assert rc == 0, err
    text = out.decode("utf-8")
    assert not _has_raw_controls(text), text
    for shown in SHOWN:
        assert shown in text
    assert b"Traceback" not in err
    (rec,) = log_lines(env)
    assert rec["answer"] == ANSWER  # the log keeps the exact text


def test_ask_piped_is_byte_exact_and_json_escapes_c1(srv: FakeServer, env: dict) -> None:
    p = run_ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "hi")
    assert p.returncode == 0, p.stderr
    assert p.stdout == ANSWER.encode() + b"\n"
    p = run_ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--json", "hi")
    assert p.returncode == 0, p.stderr
    assert b"\x1b" not in p.stdout and b"\xc2\x9b" not in p.stdout  # not even C1, which JSON leaves raw
    assert json.loads(p.stdout)["answer"] == ANSWER


def test_server_error_text_on_stderr_is_neutralised(srv: FakeServer, env: dict) -> None:
    srv.schedule = Schedule(fail_status=400, fail_message="bad \x1b]0;PWNED\x07 request \x9b2J")
    p = run_ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--max-retries", "0", "hi")
    assert p.returncode == 1
    err = p.stderr.decode()
    assert "␛]0;PWNED␇" in err and "<0x9b>2J" in err and not _has_raw_controls(err)
    (rec,) = log_lines(env)
    assert "\x1b]0;PWNED\x07" in rec["error"]["message"]  # exact in the log


def _painted(app: ChatApp) -> str:
    """Every character the screen would send to the terminal now (text segments, not cursor moves)."""
    console = Console(file=io.StringIO(), record=True, width=app.size.width, force_terminal=True)
    console.print(app.screen._compositor.render_update(full=True))
    return console.export_text(styles=False)


async def test_chat_shows_control_characters_while_streaming_and_after(srv: FakeServer, env: dict) -> None:
    # the hostile chunks, then the stream stalls: the live (streamed) view, then the final render
    srv.schedule = _hostile_schedule(stall_after=len(HOSTILE), stall_s=30)
    app = ChatApp("compat:fake-model", base_url=srv.openai_base_url)
    async with app.run_test(size=(160, 40)) as pilot:
        app.query_one("#prompt").value = "hi"
        await pilot.press("enter")
        await wait_until(
            pilot, lambda: app.chat.drawn.answer is not None and "end." in app.chat.drawn.answer.stream.tail.text, 20
        )
        await pilot.pause(0.1)
        live = _painted(app)
        assert not _has_raw_controls(live) and "\t" not in live and "tab:    TAB" in live  # a tab: 4 spaces
        for shown in SHOWN:
            assert shown in live, live
        await pilot.press("escape")  # the turn ends cancelled and gets its full Markdown render
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, 20)
        await pilot.pause(0.1)
        final = _painted(app)
        assert not _has_raw_controls(final)
        for shown in ("␛]0;PWNED␇", "␛[2J", "<0x9b>31mRED"):
            assert shown in final, final
        assert app.chat.session.records[0].answer == ANSWER
    (rec,) = log_lines(env)
    assert rec["answer"] == ANSWER and rec["status"] == "cancelled"


async def test_chat_error_card_greeting_and_header_show_control_characters(srv: FakeServer, env: dict) -> None:
    srv.schedule = Schedule(fail_status=400, fail_message="no \x1b]0;PWNED\x07 way")
    app = ChatApp("compat:evil\x1b[2Jmodel", base_url=srv.openai_base_url)
    async with app.run_test(size=(160, 40)) as pilot:
        await pilot.pause(0.1)
        greeting = _painted(app)
        assert "evil␛[2Jmodel" in greeting and not _has_raw_controls(greeting)
        app.query_one("#prompt").value = "hi"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, 20)
        await pilot.pause(0.1)
        card = app.query_one(ErrorCard)
        assert "␛]0;PWNED␇" in str(card.content) and "\x1b" not in str(card.content)
        screen = _painted(app)
        assert not _has_raw_controls(screen) and "␛]0;PWNED␇" in screen


async def test_a_control_character_no_widget_handled_is_dropped_as_it_is_painted() -> None:
    from ttft.tui.screens.settings import SettingsScreen

    app = ChatApp("compat:m", base_url="http://127.0.0.1:9/v1", warm_up=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.chat.action_settings("model")
        await wait_until(
            pilot, lambda: isinstance(app.screen, SettingsScreen) and bool(app.screen.query("#model-list"))
        )
        await pilot.pause(0.1)
        # a server's /v1/models list, shown by Textual's own OptionList (picking one copies the id as sent)
        app.screen._show_models(["compat:evil\x1b]0;PWNED\x07\x9b31m-model"], None)  # type: ignore[attr-defined]
        await pilot.pause(0.2)
        screen = _painted(app)
        assert "compat:evil]0;PWNED31m-model" in screen and not _has_raw_controls(screen)


def test_compare_headless_shows_a_servers_control_characters(srv: FakeServer, env: dict) -> None:
    srv.schedules["bad-model"] = Schedule(fail_status=400, fail_message="no \x1b]0;PWNED\x07 \x9b2J way")
    url = srv.openai_base_url
    p = run_ttft(env, "compare", "--headless", "-m", f"compat:fake-model@{url}", "-m", f"compat:bad-model@{url}", "hi")
    out = p.stdout.decode() + p.stderr.decode()
    assert "␛]0;PWNED␇" in out and "<0x9b>2J" in out and not _has_raw_controls(out), out
    assert "Traceback" not in out


def _hostile_log(env: dict[str, str]) -> Path:
    d = Path(env["TTFT_DATA_DIR"], "sessions")
    d.mkdir(parents=True)
    rec = {
        "schema": "ttft.turn/1",
        "session_id": "s1",
        "turn_index": 0,
        "started_at": "2026-01-01T00:00:00+00:00",
        "provider": "compat",
        "model": "evil\x1b]0;PWNED\x07\x9b2J",
        "status": "ok",
        "metrics": {"ttft_ms": 10.0, "tpot_ms": 2.0, "e2e_ms": 20.0, "itl_ms": {}},
        "tokens": {"output": 3},
        "answer": "x",
    }
    path = d / "s1.jsonl"
    path.write_text(json.dumps(rec) + "\n", encoding="utf-8")
    return path


def test_sessions_and_report_show_control_characters(env: dict, capsys: pytest.CaptureFixture[str]) -> None:
    path = _hostile_log(env)
    assert main(["sessions"]) == 0
    out = capsys.readouterr().out
    assert "evil␛]0;PWNED␇<0x9b>2J" in out and not _has_raw_controls(out)
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "== turns ==" in out and not _has_raw_controls(out)


# --- 2. bidi controls never reorder what the reader sees (issue 23, item 8a) ------------------
# "Trojan Source": an override (RLO ... PDF) and an isolate (RLI ... PDI) make a terminal with bidi
# support show the text in another order than it is; an RLM mark is ordinary Hebrew punctuation.
BIDI = (
    "Run ",
    "\u202eexe.txt",
    "\u202c then ",
    "\u2067admin\u2069",
    " and \u202a\u202b\u202d\u2066\u2068 end",
    " ok \u05e9\u05dc\u05d5\u05dd\u200f.",
)
BIDI_ANSWER = "".join(BIDI)
BIDI_SHOWN = ("<U+202E>exe.txt<U+202C>", "<U+2067>admin<U+2069>", "<U+202A><U+202B><U+202D><U+2066><U+2068> end")
RAW_BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def _has_raw_bidi(text: str) -> bool:
    return any(c in text for c in RAW_BIDI)


def _bidi_schedule(**kw: Any) -> Schedule:
    return Schedule(first_token_ms=10, token_ms=2, texts=BIDI, visible_tokens=len(BIDI), **kw)


def test_visible_controls_shows_the_bidi_controls_and_keeps_the_marks() -> None:
    for c in RAW_BIDI:
        assert visible_controls(f"a{c}b") == f"a<U+{ord(c):04X}>b"
    marks = "\u05e9\u200f \u200e1 \u061c"  # RLM, LRM, ALM: no span, everyday RTL punctuation
    assert visible_controls(marks) is marks
    shown = visible_controls(BIDI_ANSWER)
    assert not _has_raw_bidi(shown) and all(s in shown for s in BIDI_SHOWN) and "\u200f" in shown
    styled = visible_text(Text.assemble(("\u202eX", "red"), (" ok", "")))
    assert styled.plain == "<U+202E>X ok" and styled.spans[0].end == len("<U+202E>X")


def test_ask_on_a_terminal_shows_bidi_controls_and_the_log_keeps_them(srv: FakeServer, env: dict) -> None:
    srv.schedule = _bidi_schedule()
    rc, out, err = _on_a_terminal(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "hi")
    assert rc == 0, err
    text = out.decode("utf-8")
    assert not _has_raw_bidi(text), repr(text)
    for shown in BIDI_SHOWN:
        assert shown in text
    assert "\u200f" in text  # the mark reaches the terminal as it is
    (rec,) = log_lines(env)
    assert rec["answer"] == BIDI_ANSWER


@pytest.mark.parametrize("api", ["compat", "responses", "messages"])
def test_ask_piped_keeps_bidi_exact_and_json_escapes_them(srv: FakeServer, env: dict, api: str) -> None:
    srv.schedule = _bidi_schedule()
    spec, url = {
        "compat": ("compat:fake-model", srv.openai_base_url),
        "responses": ("openai-responses:fake-model", srv.openai_base_url),
        "messages": ("anthropic:fake-model", srv.url),
    }[api]
    keyed = {**env, "OPENAI_API_KEY": "sk-test-bidi", "ANTHROPIC_API_KEY": "sk-test-bidi"}
    p = run_ttft(keyed, "ask", "-m", spec, "--base-url", url, "hi")
    assert p.returncode == 0, p.stderr
    assert p.stdout == BIDI_ANSWER.encode() + b"\n"  # a pipe: byte-exact
    p = run_ttft(keyed, "ask", "-m", spec, "--base-url", url, "--json", "hi")
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert not _has_raw_bidi(out) and "\\u202e" in out  # escaped: safe on a terminal ...
    assert json.loads(out)["answer"] == BIDI_ANSWER  # ... and the same value


def test_a_servers_bidi_controls_on_stderr_are_shown(srv: FakeServer, env: dict) -> None:
    srv.schedule = Schedule(fail_status=400, fail_message="model \u202eevil\u202c not found")
    p = run_ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "--max-retries", "0", "hi")
    err = p.stderr.decode()
    assert p.returncode == 1 and "<U+202E>evil<U+202C>" in err and not _has_raw_bidi(err)
    (rec,) = log_lines(env)
    assert "\u202eevil\u202c" in rec["error"]["message"]  # exact in the log


async def test_chat_shows_bidi_controls_while_streaming_and_after(srv: FakeServer, env: dict) -> None:
    srv.schedule = _bidi_schedule(stall_after=len(BIDI), stall_s=30)
    app = ChatApp("compat:fake-model", base_url=srv.openai_base_url)
    async with app.run_test(size=(160, 40)) as pilot:
        app.query_one("#prompt").value = "hi"
        await pilot.press("enter")
        await wait_until(
            pilot, lambda: app.chat.drawn.answer is not None and "\u200f." in app.chat.drawn.answer.stream.tail.text, 20
        )
        await pilot.pause(0.1)
        live = _painted(app)
        assert not _has_raw_bidi(live)
        for shown in BIDI_SHOWN:
            assert shown in live, live
        await pilot.press("escape")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, 20)
        await pilot.pause(0.1)
        final = _painted(app)
        assert not _has_raw_bidi(final)
        for shown in BIDI_SHOWN:
            assert shown in final, final
        assert app.chat.session.records[0].answer == BIDI_ANSWER
    (rec,) = log_lines(env)
    assert rec["answer"] == BIDI_ANSWER


async def test_a_bidi_control_no_widget_handled_is_dropped_as_it_is_painted() -> None:
    from ttft.tui.screens.settings import SettingsScreen

    app = ChatApp("compat:m", base_url="http://127.0.0.1:9/v1", warm_up=False)
    async with app.run_test(size=(120, 40)) as pilot:
        app.chat.action_settings("model")
        await wait_until(
            pilot, lambda: isinstance(app.screen, SettingsScreen) and bool(app.screen.query("#model-list"))
        )
        await pilot.pause(0.1)
        app.screen._show_models(["compat:safe\u202elave-model\u202c"], None)  # type: ignore[attr-defined]
        await pilot.pause(0.2)
        screen = _painted(app)
        assert "compat:safelave-model" in screen and not _has_raw_bidi(screen)
