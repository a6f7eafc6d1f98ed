"""The real ``ttft chat`` in a real terminal (tmux): a bracketed paste reaches the server byte-exact,
ctrl+j and alt+enter make a two-line prompt, and a new chat process recalls the last prompt with Up.

Each test starts its own tmux server (its own socket), runs the chat against the loopback fake
server, types with ``send-keys``, pastes with ``load-buffer`` + ``paste-buffer -p`` (bracketed), and
reads the screen with ``capture-pane``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.fakes import FakeServer, Schedule
from tests.support.paths import ROOT


def needs_tmux() -> pytest.MarkDecorator:
    """Skip a module where tmux is missing, except in CI (``CI`` set, as .ci/run sets it and installs
    tmux): there a missing tmux fails the module's collection, never passes as a quiet skip."""
    if shutil.which("tmux") is None and os.environ.get("CI"):
        pytest.fail("CI is set but tmux is not installed: the real-terminal tests cannot run", pytrace=False)
    return pytest.mark.skipif(
        shutil.which("tmux") is None, reason="tmux is not installed: these tests drive the real app in a real terminal"
    )


pytestmark = needs_tmux()

WAIT_S = 40.0  # a cold start imports Textual and starts the backend's process on a loaded machine


class Tmux:
    """One tmux server of the test's own, one window running ``ttft chat``."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        self.tmp, self.env = tmp, env
        self.base = ["tmux", "-u", "-S", str(tmp / "tmux.sock"), "-f", "/dev/null"]

    def run(self, *args: str) -> str:
        done = subprocess.run([*self.base, *args], env=self.env, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def start(self, *chat_args: str) -> None:
        cmd = " ".join([sys.executable, "-m", "ttft.tui.cli", "chat", *chat_args])
        self.run("new-session", "-d", "-s", "t", "-x", "120", "-y", "40", "-c", str(ROOT), cmd)

    def keys(self, *keys: str) -> None:
        self.run("send-keys", "-t", "t", *keys)

    def type(self, text: str) -> None:
        self.run("send-keys", "-t", "t", "-l", text)

    def paste(self, data: bytes, *, raw: bool) -> None:
        """A bracketed paste of ``data``; ``raw``: its line ends as they are (else as tmux sends them, LF
        as CR, as a terminal sends a paste's line breaks)."""
        buf = self.tmp / "paste.bin"
        buf.write_bytes(data)
        self.run("load-buffer", "-b", "p", str(buf))
        self.run("paste-buffer", "-p", "-b", "p", "-t", "t", *(["-r"] if raw else []))

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "t")

    def wait(self, cond: Callable[[str], bool], what: str) -> str:
        deadline = time.monotonic() + WAIT_S
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if cond(shown):
                return shown
            time.sleep(0.2)
        raise AssertionError(f"not on screen within {WAIT_S:.0f} s: {what}\n{shown}")

    def quit(self) -> None:
        self.keys("C-q")
        deadline = time.monotonic() + WAIT_S
        while time.monotonic() < deadline:
            if subprocess.run([*self.base, "has-session", "-t", "t"], env=self.env, capture_output=True).returncode:
                return
            time.sleep(0.2)
        raise AssertionError("the chat did not quit")

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], env=self.env, capture_output=True, timeout=30)


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer(Schedule(first_token_ms=5, token_ms=1, visible_tokens=4)) as s:
        yield s


@pytest.fixture
def tmux(tmp_path: Path) -> Iterator[Tmux]:
    env = {
        **{k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "TMUX", "TTFT_MODEL")},
        "TTFT_DATA_DIR": str(tmp_path / "data"),
        "TTFT_CONFIG_DIR": str(tmp_path / "conf"),
        "PYTHONPATH": str(ROOT),
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TERM": "xterm-256color",
    }
    (tmp_path / "conf").mkdir()
    t = Tmux(tmp_path, env)
    yield t
    t.close()


def prompts_sent(srv: FakeServer) -> list[str]:
    return [
        r.body["messages"][-1]["content"] for r in srv.generation_requests() if r.path.endswith("/chat/completions")
    ]


def wait_sent(srv: FakeServer, n: int) -> list[str]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        sent = [p for p in prompts_sent(srv) if p != "Say OK."]  # not the warm-up's own canned prompt
        if len(sent) >= n:
            return sent
        time.sleep(0.1)
    raise AssertionError(f"the server did not get {n} prompts: {prompts_sent(srv)}")


def turn_done(tmux: Tmux, n: int) -> None:
    """Until turn ``n``'s figures are in the pane (a prompt sent before would wait for it)."""
    tmux.wait(lambda s: " OK " in s and f"turn {n} " in s, f"turn {n}'s figures")


def start_chat(tmux: Tmux, srv: FakeServer) -> None:
    tmux.start("-m", "compat:fake-model", "--base-url", srv.openai_base_url)
    tmux.wait(lambda s: "Ask anything" in s, "the chat's empty prompt")


def test_a_200_line_bracketed_paste_reaches_the_server_byte_exact(tmux: Tmux, srv: FakeServer) -> None:
    lines = []
    for i in range(200):
        if i % 17 == 5:
            lines.append("")  # blank lines
        elif i % 3 == 0:
            lines.append(f"\tline {i}\twith tabs")
        else:
            lines.append(f"line {i}: non-ASCII ünïcødé 漢字 — “quotes” 🙂")
    pasted = "\r\n".join(lines) + "\r\n"  # a file saved on Windows
    start_chat(tmux, srv)
    tmux.paste(pasted.encode(), raw=True)
    tmux.wait(lambda s: "[pasted 200 lines," in s, "the folded paste")
    tmux.keys("Enter")
    (sent,) = wait_sent(srv, 1)
    assert sent == pasted.replace("\r\n", "\n")  # every character, CRLF as LF
    # A paste as a terminal sends it (line breaks as CR) keeps its lines too.
    turn_done(tmux, 1)
    tmux.paste("a\n\tb\n\nc ü".encode(), raw=False)
    tmux.wait(lambda s: "c ü" in s, "the short paste, unfolded")
    tmux.keys("Enter")
    assert wait_sent(srv, 2)[1] == "a\n\tb\n\nc ü"


def test_ctrl_j_gives_a_two_line_prompt_and_a_new_chat_recalls_it_with_up(tmux: Tmux, srv: FakeServer) -> None:
    start_chat(tmux, srv)
    tmux.type("first line")
    tmux.keys("C-j")
    tmux.type("second line")
    shown = tmux.wait(lambda s: "second line" in s, "the second line")
    rows = shown.splitlines()
    first = next(k for k, row in enumerate(rows) if "first line" in row)
    assert "second line" in rows[first + 1]  # two lines in the box, one under the other
    tmux.keys("Enter")
    assert wait_sent(srv, 1) == ["first line\nsecond line"]
    turn_done(tmux, 1)
    tmux.keys("M-Enter")  # alt+enter in an empty box: a line break, nothing sent
    tmux.type("x")
    tmux.keys("Enter")
    assert wait_sent(srv, 2)[1] == "\nx"
    tmux.quit()
    history = Path(tmux.env["TTFT_DATA_DIR"], "prompt_history.jsonl")
    assert [json.loads(x)["text"] for x in history.read_text().splitlines()] == ["first line\nsecond line", "\nx"]
    assert history.stat().st_mode & 0o777 == 0o600
    start_chat(tmux, srv)  # a new chat process
    tmux.keys("Up")
    tmux.keys("Up")
    shown = tmux.wait(lambda s: "second line" in s and "first line" in s, "the recalled prompt")
    assert "Ask anything" not in shown
