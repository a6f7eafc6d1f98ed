"""The contract a user scripts against, with every part real: ``ttft ask -m compat:MODEL --base-url URL
--mcp "python server.py" --allow-tools --json`` against a loopback server that plays a tool call, and
the official SDK's MCP server over stdio. One record, with its steps, and the server's answer in it."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit

from tests.fakes.agent_server import AgentServer, Call, Step

SERVER = Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py"
MCP = f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER))}"


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    conf = tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return tmp_path


def test_a_real_mcp_server_answers_the_models_call_and_the_record_has_every_step(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = [Step(calls=(Call("echo", {"text": "from the tool"}),)), Step(text="Done.")]
    with AgentServer(script) as srv:
        rc = main(["ask", "-m", "compat:m", "--base-url", srv.base_url, "--mcp", MCP, "--allow-tools", "--json", "go"])
        bodies = list(srv.requests)
    out, err = capsys.readouterr()
    assert rc == Exit.OK, err
    rec = json.loads(out)
    assert rec["status"] == "ok" and rec["answer"].strip() == "Done."
    assert [s["kind"] for s in rec["steps"]] == ["model", "tool", "model"]
    tool = rec["steps"][1]
    assert (tool["name"], tool["status"]) == ("echo", "ok") and tool["server"]
    assert tool["result_bytes"] == len("from the tool")
    assert rec["steps"][0]["end_ms"] <= tool["start_ms"] <= tool["end_ms"] <= rec["steps"][2]["start_ms"]
    assert len(bodies) == 2 and "from the tool" in json.dumps(bodies[1]["messages"][-1])  # the answer went back
    # the server's start (a Python process importing the SDK) is its own figure, said, and not ttft's own delay
    assert rec["metrics"]["mcp_start_ms"] > 0 and "MCP start " in err
    assert [t["function"]["name"] for t in bodies[0]["tools"]] == [
        "echo",
        "noop",
        "slow",
        "fail",
        "big",
        "picture",
        "die",
    ]


def test_a_spec_that_names_nothing_is_a_usage_error_before_anything_is_sent(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with AgentServer([Step(text="never")]) as srv:
        rc = main(["ask", "-m", "compat:m", "--base-url", srv.base_url, "--mcp", "   ", "--allow-tools", "go"])
    assert rc == Exit.USAGE
    assert "Traceback" not in capsys.readouterr().err
