"""``ttft ask --mcp`` end to end: the steps in ``--json``, consent (no flag: no tool runs, exit 5), the
MCP client missing (exit 2), the local engine (exit 2), tool output neutralised on the answer's echo.

The MCP client's two modules (``ttft.backends.mcp.config``, ``ttft.backends.mcp.host``) are stood in for by modules
of the same interface that hand out an in-process host (tests.support.tool_host): these test ask's side.
The real client and server, end to end, are tests/cli/test_ask_mcp_real.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit

from tests.fakes.agent_server import AgentServer, Call, Step
from tests.support.tool_host import FakeHost, FakeTool, stand_in_mcp

SCRIPT = [Step(calls=(Call("search", {"q": "tokyo"}),)), Step(text="It is noon.")]


@pytest.fixture
def env(tmp_path, monkeypatch):
    conf = tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return tmp_path


@pytest.fixture
def host(monkeypatch) -> FakeHost:
    """A stand-in MCP client whose host holds one tool, ``search`` on server ``web``."""
    made = FakeHost(FakeTool("search", "\x1b]52;c;ZXZpbA==\x07Tokyo 12:00", delay_s=0.05, server="web"))
    seen = stand_in_mcp(monkeypatch, made)
    made.seen = seen  # type: ignore[attr-defined]
    return made


@pytest.fixture(scope="module")
def srv():
    with AgentServer(SCRIPT) as s:
        yield s


def _ask(srv: AgentServer, *flags: str) -> int:
    return main(["ask", "-m", "compat:m", "--base-url", srv.base_url, "--mcp", "web=uvx web-search", *flags, "time?"])


def _log(env: Path) -> list[dict]:
    files = sorted((env / "data" / "sessions").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def test_json_prints_the_steps_of_a_tool_using_turn(srv, env, host, capsys) -> None:
    rc = _ask(srv, "--allow-tools", "--json")
    out, err = capsys.readouterr()
    rec = json.loads(out)
    assert rc == 0 and rec["status"] == "ok" and rec["answer"].strip() == "It is noon."
    assert [s["kind"] for s in rec["steps"]] == ["model", "tool", "model"]
    tool = rec["steps"][1]
    assert (tool["name"], tool["server"], tool["status"]) == ("search", "web", "ok")
    assert tool["duration_ms"] >= 40 and tool["start_ms"] >= rec["steps"][0]["end_ms"]
    assert rec["agent"]["step_count"] == 3 and rec["agent"]["stopped"] == "answer"
    assert {"time_in_model_ms", "time_in_tools_ms", "time_in_ttft_ms"} <= rec["agent"].keys()
    assert rec["metrics"]["ttft_ms"] == rec["steps"][0]["ttft_ms"]
    assert host.calls == [("search", {"q": "tokyo"})] and host.closed
    assert host.seen["servers"] == ["web=uvx web-search"]
    assert _log(env)[-1]["steps"] == rec["steps"]  # logged as printed
    assert "3 steps: model" in err


def test_the_echo_shows_tool_output_neutralised(srv, env, host, capsys, monkeypatch) -> None:
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    rc = _ask(srv, "--allow-tool", "search")
    out, _ = capsys.readouterr()
    assert rc == 0 and "\x1b" not in out and "\x07" not in out
    assert 'tool call: search({"q": "tokyo"})' in out and "tool result: search (ok," in out
    assert "Tokyo 12:00" in out and out.rstrip().endswith("It is noon.")


def test_without_consent_no_tool_runs_and_the_exit_code_says_so(srv, env, host, capsys) -> None:
    rc = _ask(srv, "--json")
    out, err = capsys.readouterr()
    rec = json.loads(out)
    assert rc == Exit.TOOL_DENIED == 5 and host.calls == []
    assert rec["status"] == "error" and rec["error"]["type"] == "tool_not_allowed"
    assert rec["steps"][-1]["status"] == "denied" and "--allow-tool" in err


def test_the_local_engine_has_no_tools(env, host, capsys) -> None:
    assert main(["ask", "-m", "local:/nowhere/m.gguf", "--mcp", "x", "hi"]) == Exit.USAGE
    assert "no tool support" in capsys.readouterr().err


def test_allow_flags_without_mcp_are_a_usage_error(srv, env, capsys) -> None:
    os.environ.pop("OPENAI_API_KEY", None)
    assert main(["ask", "-m", "compat:m", "--base-url", srv.base_url, "--allow-tools", "hi"]) == Exit.USAGE
    assert "need --mcp" in capsys.readouterr().err


# The stand-in MCP client for a ttft run in its own process: one tool that takes 60 s.
_SLOW_MCP = """
import sys
import ttft.backends.mcp.config
import ttft.backends.mcp.host
from tests.support.tool_host import FakeHost, FakeTool, stand_in_mcp
ttft.backends.mcp.config.resolve_specs = lambda specs: list(specs)
async def start_host(servers, **kw):
    return FakeHost(FakeTool("search", "late", delay_s=60, server="web"))
ttft.backends.mcp.host.start_host = start_host
from ttft.tui.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_ctrl_c_in_a_tool_exits_130_and_logs_every_step_that_arrived(srv, env) -> None:
    import signal
    import subprocess

    from tests.support.paths import ROOT

    args = ["ask", "-m", "compat:m", "--base-url", srv.base_url, "--mcp", "web", "--allow-tools", "time?"]
    proc = subprocess.Popen(
        [sys.executable, "-c", _SLOW_MCP, *args],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()  # the call's line ends with the model's step: the tool runs next
    assert line.startswith("tool call: search(")
    import time

    time.sleep(0.5)  # into the tool's 60 s
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "cancelled" in err
    rec = _log(env)[-1]
    assert rec["status"] == "cancelled" and rec["agent"]["stopped"] == "cancelled"
    assert [(s["kind"], s["status"]) for s in rec["steps"]] == [("model", "ok"), ("tool", "cancelled")]
