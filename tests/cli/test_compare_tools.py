"""``ttft compare --headless --mcp``: every pane's model is offered the same tools (one real MCP server,
the official SDK's, over stdio), each pane's turn runs the agent loop against a loopback model that
calls ``echo``, and the summary and verdicts cover steps and the time to the final answer. Without
consent no tool runs, each pane's record says ``tool_not_allowed``, and the exit is 5, as for ``ttft ask``."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from ttft.telemetry.log.sessions import list_sessions
from ttft.telemetry.log.turns import read_records
from ttft.tui import cli
from ttft.tui.cli import main
from ttft.tui.commands import compare as cmd
from ttft.tui.commands.args import compare_args
from ttft.tui.commands.exits import Exit

from tests.fakes.agent_server import AgentServer, Call, Step
from tests.support.compare_fakes import ScheduledBackend

SERVER = Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py"
MCP = f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER))}"
SCRIPT = [Step(calls=(Call("echo", {"text": "from the tool"}),)), Step(text="Done.")]


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    conf = tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return tmp_path


def _argv(url: str, *extra: str) -> list[str]:
    return ["compare", "--headless", "-m", f"compat:a@{url}", "-m", f"compat:b@{url}", "--mcp", MCP, *extra, "go"]


def _logged(comparison_id: str) -> list[dict[str, Any]]:
    (session,) = list_sessions()
    return [r for r in read_records(session.path) if r["extra"]["comparison_id"] == comparison_id]


def test_both_panes_run_the_tool_and_the_verdict_covers_steps_and_time_to_answer(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with AgentServer(SCRIPT) as srv:
        rc = main(_argv(srv.base_url, "--allow-tools", "--json"))
        bodies = list(srv.requests)
    out, err = capsys.readouterr()
    assert rc == Exit.OK, err
    assert "Traceback" not in err
    # the same tools offered to both models, and the tool's answer went back to each
    assert len(bodies) == 4
    offered = [[t["function"]["name"] for t in b["tools"]] for b in bodies]
    assert all(o == offered[0] for o in offered) and "echo" in offered[0]
    assert sum("from the tool" in json.dumps(b["messages"]) for b in bodies) == 2
    doc = json.loads(out)
    rows = {r["pane"]: r for r in doc["panes"]}
    for label in ("A", "B"):
        assert rows[label]["steps_median"] == 3.0 and rows[label]["steps_n"] == 1
        assert rows[label]["tools_median"] > 0 and rows[label]["own_median"] is not None
        assert rows[label]["e2e_median"] > 0
    metrics = [v["metric"] for v in doc["verdicts"]]
    assert "steps" in metrics and "e2e" in metrics
    texts = " ".join(v["text"] for v in doc["verdicts"])
    assert "steps" in texts
    assert "final answer" in texts or "in E2E" in texts or "level in E2E" in texts
    records = _logged(doc["comparison_id"])
    assert len(records) == 2
    for rec in records:
        assert rec["status"] == "ok" and rec["agent"]["step_count"] == 3
        assert [s["kind"] for s in rec["steps"]] == ["model", "tool", "model"]
        assert rec["steps"][1]["name"] == "echo" and rec["steps"][1]["status"] == "ok"
    # the servers started after the submit: the first turn keeps that apart from ttft's own delay
    assert any((rec["metrics"]["mcp_start_ms"] or 0) > 0 for rec in records)


def test_the_table_shows_steps_and_the_verdict_lines_say_them(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with AgentServer(SCRIPT) as srv:
        rc = main(_argv(srv.base_url, "--allow-tool", "echo"))
    out, err = capsys.readouterr()
    assert rc == Exit.OK, err
    head = next(line for line in out.splitlines() if "TTFT" in line)
    for column in ("E2E", "steps", "tool time", "ttft's own"):
        assert column in head
    verdicts = [line for line in out.splitlines() if line.startswith("• ")]
    assert any("steps" in v for v in verdicts)
    assert any("E2E" in v or "final answer" in v for v in verdicts)


def test_without_consent_no_tool_runs_each_record_says_so_and_the_exit_is_5(
    env: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with AgentServer(SCRIPT) as srv:
        rc = main(_argv(srv.base_url, "--json"))
        bodies = list(srv.requests)
    out, err = capsys.readouterr()
    assert rc == Exit.TOOL_DENIED == 5, err
    assert len(bodies) == 2  # one model step per pane: the call was not run, so nothing went back
    assert not any("from the tool" in json.dumps(b["messages"]) for b in bodies)
    doc = json.loads(out)
    records = _logged(doc["comparison_id"])
    assert len(records) == 2
    for rec in records:
        assert rec["status"] == "error" and rec["error"]["type"] == "tool_not_allowed"
        assert rec["agent"]["stopped"] == "denied"
        assert [(s["kind"], s.get("status")) for s in rec["steps"] if s["kind"] == "tool"] == [("tool", "denied")]


def test_allow_flags_without_mcp_are_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["compare", "--headless", "-m", "compat:a@http://127.0.0.1:9/v1", "--allow-tools", "go"])
    assert rc == Exit.USAGE
    assert "need --mcp SPEC" in capsys.readouterr().err


def test_a_pane_whose_model_takes_no_tools_is_a_usage_error_before_anything_is_sent(
    capsys: pytest.CaptureFixture[str],
) -> None:
    made: list[ScheduledBackend] = []

    def factory(spec: str, base_url: str | None) -> ScheduledBackend:
        made.append(ScheduledBackend(spec, api="local" if spec == "local:x" else "chat.completions"))
        return made[-1]

    args = compare_args(
        cli.build_parser("compare").parse_args(
            ["compare", "--headless", "-m", "compat:a", "-m", "local:x", "--mcp", MCP, "--allow-tools", "go"]
        )
    )
    rc = cmd.run(args, factory=factory)
    err = capsys.readouterr().err
    assert rc == Exit.USAGE and "pane B (fake:local:x)" in err and "no tool support" in err
    assert not any(b.requests for b in made)
