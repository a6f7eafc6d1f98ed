"""The real ``ttft proxy`` in a real terminal (tmux): with no program it opens the live view, an official
SDK's call through it appears as a row, and q (or Ctrl-C) stops it and prints the summary as the headless
run does."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator

import openai
import pytest

from tests.cli.test_tmux_prompt import Tmux, needs_tmux
from tests.cli.test_tmux_prompt import tmux as tmux  # the fixture
from tests.fakes import FakeServer, Schedule
from tests.support.paths import ROOT

pytestmark = needs_tmux()

KEY = "sk-test-SECRET-liveview-7c2a"


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer(Schedule(first_token_ms=20, token_ms=1, visible_tokens=4)) as s:
        yield s


@pytest.mark.parametrize(("key", "status"), [("q", 0), ("C-c", 130)])
def test_the_live_view_shows_a_call_and_its_quit_prints_the_summary(
    tmux: Tmux, srv: FakeServer, key: str, status: int
) -> None:
    proxy = " ".join([sys.executable, "-m", "ttft.tui.cli", "proxy", "--port", "0", "--upstream", srv.url])
    # the pane stays once ttft exits, so the summary it printed and its status can be read
    tmux.run(
        "new-session", "-d", "-s", "t", "-x", "160", "-y", "40", "-c", str(ROOT), f"{proxy}; echo EXIT=$?; sleep 60"
    )
    shown = tmux.wait(lambda s: "listening on http://127.0.0.1:" in s, "the live view's header")
    port = re.search(r"listening on http://127\.0\.0\.1:(\d+)", shown)
    assert port is not None, shown
    assert "LIVE" in shown and "export OPENAI_BASE_URL=" in shown

    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port[1]}/v1", api_key=KEY, max_retries=0, timeout=30)
    answer = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert answer.choices[0].message.content

    shown = tmux.wait(lambda s: "gpt-4o-mini" in s and "OpenAI/Python" in s, "the call's row")
    assert "1 call" in shown and KEY not in shown

    tmux.keys(key)  # q: a quit asked for (0); Ctrl-C: an interruption, as the headless run's (130)
    shown = tmux.wait(lambda s: "EXIT=" in s, "ttft's exit")
    assert f"EXIT={status}" in shown, shown
    assert "ttft proxy: 1 call: OpenAI/Python gpt-4o-mini ×1" in shown and "TTFT p50" in shown
    assert "Traceback" not in shown and KEY not in shown
