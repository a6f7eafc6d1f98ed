"""Hostile pastes into the real ``ttft chat`` in a real terminal (tmux): a paste is only text.

Each case of issue 28's red team, pasted bracketed (``load-buffer`` + ``paste-buffer -p``): nothing is
sent until Enter (the loopback fake server sees no prompt), then Enter sends every character in order
(escapes, control characters and a forged end-of-paste marker included), the chat is still up, and no
traceback is on the screen.

- D1: a coloured log (escape sequences), ``\\x1b[0m\\x11`` (ctrl+q's byte), a forged ``\\x1b[201~``
  followed by a line break and more text;
- D2: bytes that are not UTF-8: replaced by U+FFFD, with a notice;
- D6: a 5 MB single line, ctrl+e: it stays folded and every key still echoes at once.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest
from aiohttp import web

from tests.cli.test_tmux_prompt import Tmux, prompts_sent, srv, start_chat, tmux, turn_done, wait_sent
from tests.fakes import FakeServer, Schedule

__all__ = ["srv", "tmux"]  # test_tmux_prompt's fixtures: a fake server, a tmux server of the test's own

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None,
    reason="tmux is not installed: these tests drive the real app in a real terminal",
)

SETTLE_S = 1.5  # well past the parser's wait after a paste (tui.driver.PASTE_TAIL_S): anything it would send, it has


def sent_by_the_user(srv: FakeServer) -> list[str]:
    return [p for p in prompts_sent(srv) if p != "Say OK."]  # not the warm-up's own canned prompt


def alive_and_clean(tmux: Tmux) -> str:
    """The chat's screen, once it is sure the chat still runs and shows no traceback."""
    done = subprocess.run([*tmux.base, "has-session", "-t", "t"], env=tmux.env, capture_output=True)
    assert done.returncode == 0, "the chat is gone"
    shown = tmux.screen()
    assert " ttft │ compat · fake-model " in shown and "Send" in shown, shown  # the chat's header and keys
    assert "Traceback" not in shown and "Error" not in shown.replace("ERROR", ""), shown
    return shown


def paste_then_nothing_sent(tmux: Tmux, srv: FakeServer, data: bytes, shown: str) -> None:
    tmux.paste(data, raw=False)  # as a terminal pastes: line breaks as CR
    tmux.wait(lambda s: shown in s, f"the paste in the box ({shown!r})")
    time.sleep(SETTLE_S)
    assert sent_by_the_user(srv) == [], "a paste sent a prompt by itself"
    alive_and_clean(tmux)


def test_a_coloured_log_is_pasted_as_text_and_sent_only_by_enter(tmux: Tmux, srv: FakeServer) -> None:
    log = "colored log:\x1b[31mERROR\x1b[0m disk full\n\x1b[1;33mWARN\x1b[0m retrying\n\x1b[32mINFO\x1b[0m done"
    start_chat(tmux, srv)
    paste_then_nothing_sent(tmux, srv, log.encode(), "retrying")
    box = tmux.screen()
    assert "[31mERROR" in box and "[1;33mWARN" in box  # the sequences are in the box as text, in order
    tmux.keys("Enter")
    assert wait_sent(srv, 1) == [log]  # every character, escapes included
    turn_done(tmux, 1)
    shown = alive_and_clean(tmux)
    assert "␛[31mERROR" in shown  # the transcript shows the escape, never sends it to the terminal


def test_a_paste_holding_ctrl_q_s_byte_does_not_quit(tmux: Tmux, srv: FakeServer) -> None:
    text = "innocent text \x1b[0m\x11 more \x03 and \x00 \x1b"
    start_chat(tmux, srv)
    paste_then_nothing_sent(tmux, srv, text.encode(), "more")
    tmux.keys("Enter")
    assert wait_sent(srv, 1) == [text]
    turn_done(tmux, 1)
    alive_and_clean(tmux)


def test_a_forged_end_of_paste_marker_types_nothing(tmux: Tmux, srv: FakeServer) -> None:
    text = "harmless text\x1b[201~\nINJECTED typed line\x11\nand a last line"
    start_chat(tmux, srv)
    paste_then_nothing_sent(tmux, srv, text.encode(), "last line")
    tmux.type(" (typed)")  # the box still takes keys after it
    tmux.wait(lambda s: "(typed)" in s, "a key typed after the paste")
    tmux.keys("Enter")
    assert wait_sent(srv, 1) == [text + " (typed)"]  # every character in order, the marker's too
    turn_done(tmux, 1)
    alive_and_clean(tmux)


def test_bytes_that_are_not_utf8_are_replaced_and_said(tmux: Tmux, srv: FakeServer) -> None:
    start_chat(tmux, srv)
    paste_then_nothing_sent(tmux, srv, b"caf\xe9 and \xff\xfe end", "end")
    tmux.wait(lambda s: "not UTF-8" in s, "the notice")
    tmux.keys("Enter")
    assert wait_sent(srv, 1) == ["caf\ufffd and \ufffd\ufffd end"]
    turn_done(tmux, 1)
    alive_and_clean(tmux)


class RoomyServer(FakeServer):
    """The fake server taking request bodies past aiohttp's 1 MiB default, as hosted APIs do."""

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        return app


@pytest.fixture
def roomy() -> Iterator[FakeServer]:
    with RoomyServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=4)) as s:
        yield s


def test_a_5_mb_single_line_stays_folded_and_keys_echo_at_once(tmux: Tmux, roomy: FakeServer) -> None:
    srv = roomy
    line = "".join(f"{i:07d}," for i in range(625_000))  # 5,000,000 characters, no line break
    start_chat(tmux, srv)
    tmux.type("see: ")
    tmux.wait(lambda s: "see: " in s, "the typed text")
    tmux.paste(line.encode(), raw=False)
    tmux.wait(lambda s: "[pasted 1 line, 5.0 MB" in s, "the folded paste")
    tmux.keys("C-e")
    tmux.wait(lambda s: "stays folded" in s, "the notice that it stays folded")
    echoes, typed = [], ""
    for ch in "xyz":
        typed += ch
        t = time.monotonic()
        tmux.type(ch)
        tmux.wait(lambda s, typed=typed: f"expand]{typed}" in s, f"{ch!r} after the marker")
        echoes.append(time.monotonic() - t)
    assert max(echoes) < 2.0, echoes  # a sanity bound: 2.2 s per key before (tests/benchmarks/prompt_long_line.py)
    assert sent_by_the_user(srv) == []
    tmux.keys("Enter")
    assert wait_sent(srv, 1) == ["see: " + line + "xyz"]
    alive_and_clean(tmux)
