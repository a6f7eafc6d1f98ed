"""``ttft proxy --watch`` in a real terminal (tmux): a program runs through ``ttft proxy -- ...`` in one
process while the watch's live view, in the terminal, shows its calls as they end, says WATCHING and then
ENDED when the proxy is gone, and q leaves it (exit 0) with no traceback and no key on screen."""

from __future__ import annotations

import shlex
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_proxy_watch import KEY, PROGRAM, ttft
from tests.cli.test_tmux_prompt import Tmux, needs_tmux
from tests.cli.test_tmux_prompt import tmux as tmux  # the fixture
from tests.fakes import FakeServer, Schedule
from tests.support.child_env import child_env
from tests.support.paths import ROOT

pytestmark = needs_tmux()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The proxy's and the watch's own data and config folders (the tmux fixture keeps its own)."""
    return child_env(tmp_path / "run")


@pytest.fixture
def srv() -> Iterator[FakeServer]:
    with FakeServer(Schedule(first_token_ms=20, token_ms=1, visible_tokens=4)) as s:
        yield s


def test_the_watch_view_shows_another_runs_calls_and_says_when_it_ended(
    tmux: Tmux, srv: FakeServer, env: dict[str, str], tmp_path: Path
) -> None:
    (tmp_path / "key.txt").write_text(KEY)
    (tmp_path / "agent.py").write_text(PROGRAM)
    go = tmp_path / "go"
    states = Path(env["TTFT_DATA_DIR"]) / "proxies"
    prog = [sys.executable, str(tmp_path / "agent.py"), str(tmp_path / "key.txt"), str(go)]
    proxy = ttft(env, "--port", "0", "--upstream", srv.url, "--", *prog)
    try:
        deadline = time.monotonic() + 30
        while not list(states.glob("*.json")) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert list(states.glob("*.json")), "the proxy published no state file"
        dirs = " ".join(f"{k}={shlex.quote(env[k])}" for k in ("TTFT_DATA_DIR", "TTFT_CONFIG_DIR"))
        watch = f"env {dirs} {sys.executable} -m ttft.tui.cli proxy --watch"
        tmux.run(
            "new-session", "-d", "-s", "t", "-x", "160", "-y", "40", "-c", str(ROOT), f"{watch}; echo EXIT=$?; sleep 60"
        )
        shown = tmux.wait(lambda s: "gpt-4o-mini" in s and "OpenAI/Python" in s, "the first call's row")
        assert "WATCHING" in shown and KEY not in shown
        go.touch()  # the program's second call
        shown = tmux.wait(lambda s: "claude-sonnet-4-5" in s, "the second call's row")
        assert "Anthropic/Python" in shown
        proxy.communicate(timeout=60)
        assert proxy.returncode == 0
        shown = tmux.wait(lambda s: "ENDED" in s, "the view saying the proxy ended")
        tmux.keys("q")
        shown = tmux.wait(lambda s: "EXIT=" in s, "the watch's exit")
        assert "EXIT=0" in shown, shown
        assert "Traceback" not in shown and KEY not in shown
    finally:
        if proxy.poll() is None:
            proxy.kill()
            proxy.communicate(timeout=30)
