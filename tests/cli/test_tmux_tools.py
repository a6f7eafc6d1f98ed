"""The real ``ttft chat --mcp`` in a real terminal (tmux): a whole tool-using turn. The model (the loopback
fake playing a tool call) asks for the real MCP server's ``echo``, the dialog asks, ``a`` allows it,
the result goes back, and the answer, the call, its result and the steps are on screen and in the log."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.backends.mcp.servers import FAKE
from tests.cli.test_tmux_prompt import WAIT_S, Tmux, needs_tmux
from tests.cli.test_tmux_prompt import tmux as tmux  # the fixture
from tests.fakes.agent_server import AgentServer, Call, Step

pytestmark = needs_tmux()


@pytest.fixture
def model() -> Iterator[AgentServer]:
    script = [Step(calls=(Call("echo", {"text": "tmux-hello"}),)), Step(text="The echo said tmux-hello.")]
    with AgentServer(script) as srv:
        yield srv


def _logged(data: Path) -> list[dict[str, object]]:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        lines = [json.loads(x) for f in (data / "sessions").glob("*.jsonl") for x in f.read_text().splitlines()]
        if lines:
            return lines
        time.sleep(0.2)
    raise AssertionError("no turn logged")


def start_with_tools(tmux: Tmux, model: AgentServer) -> None:
    """The chat on the loopback model with the real MCP server, once /tools says the server is ready."""
    tmux.start("-m", "compat:m", "--base-url", model.base_url, "--mcp", f"'{sys.executable} {FAKE}'")
    tmux.wait(lambda s: "Ask anything" in s, "the chat's empty prompt")
    tmux.type("/tools")
    tmux.keys("Enter")
    tmux.wait(lambda s: " ready " in s, "the MCP server ready in /tools")
    tmux.keys("Escape")
    tmux.wait(lambda s: "Ask anything" in s, "back in the chat")


def test_a_whole_tool_loop_in_the_real_chat(tmux: Tmux, model: AgentServer) -> None:
    start_with_tools(tmux, model)
    tmux.type("echo it")
    tmux.keys("Enter")
    shown = tmux.wait(lambda s: "Run this tool call?" in s, "the approval dialog")
    assert "echo" in shown and "tmux-hello" in shown
    tmux.keys("a")
    shown = tmux.wait(lambda s: "The echo said tmux-hello." in s and " OK " in s, "the final answer and its figures")
    assert "↳ echo" in shown and "steps" in shown
    (rec,) = [r for r in _logged(Path(tmux.env["TTFT_DATA_DIR"])) if r.get("prompt") == "echo it"]
    steps = rec["steps"]
    assert isinstance(steps, list) and [s["kind"] for s in steps] == ["model", "approval", "tool", "model"]
    tools = [m for m in model.requests[-1]["messages"] if m.get("role") == "tool"]
    assert tools and tools[0]["content"] == "tmux-hello"
    tmux.quit()


def test_arguments_nested_3000_deep_are_a_refused_step_in_the_real_chat(tmux: Tmux) -> None:
    # issue 39: the step vanished and the turn read "OK"; now nobody is asked, the step says refused, the model answers
    deep = "[" * 3000 + "]" * 3000
    with AgentServer([Step(calls=(Call("echo", raw=deep),)), Step(text="The call was refused.")]) as model:
        start_with_tools(tmux, model)
        tmux.type("echo deep")
        tmux.keys("Enter")
        shown = tmux.wait(lambda s: "The call was refused." in s and " OK " in s, "the final answer")
        assert "Run this tool call?" not in shown and "Traceback" not in shown
        assert "echo" in shown and "refused" in shown
        (rec,) = [r for r in _logged(Path(tmux.env["TTFT_DATA_DIR"])) if r.get("prompt") == "echo deep"]
        steps = rec["steps"]
        assert isinstance(steps, list) and [(s["kind"], s["status"]) for s in steps] == [
            ("model", "ok"),
            ("tool", "refused"),
            ("model", "ok"),
        ]
        tmux.quit()
