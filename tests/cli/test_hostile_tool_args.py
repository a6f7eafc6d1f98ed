"""A model's tool-call arguments nested thousands deep (issue 39): refused in words on every path, never a
``RecursionError``. ``ttft ask`` over Chat Completions (lean and SDK), Responses and Anthropic Messages, headless
compare and the bench each run the real command against the loopback model that streams such a call: the call
is ``refused``, the model reads why as an error result and answers, the record and its notice say so, and the
bench counts the step and goes on."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from ttft.backends.base import MAX_TOOL_ARGUMENT_BYTES, ArgumentsRefused, Message, ToolCall
from ttft.backends.providers.tools_wire import messages_messages
from ttft.tui.cli import main
from ttft.tui.commands.exits import Exit

from tests.fakes.agent_server import AgentServer, Call, Step

SERVER = Path(__file__).resolve().parents[1] / "fakes" / "mcp_server.py"
MCP = f"{shlex.quote(sys.executable)} {shlex.quote(str(SERVER))}"
DEEP = "[" * 3000 + "]" * 3000  # 6 KB: the red team's case
DEEP_OBJECT = '{"a": ' * 3000 + "1" + "}" * 3000
SCRIPT = [Step(calls=(Call("echo", raw=DEEP),)), Step(text="I could not run it.")]


@pytest.fixture(autouse=True)
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    conf = tmp_path / "conf"
    conf.mkdir()
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(conf))
    return tmp_path


def _log(env: Path) -> list[dict[str, Any]]:
    files = sorted((env / "data" / "sessions").glob("*.jsonl"))
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def _tool_results(body: dict[str, Any]) -> list[str]:
    """The tool results a request sent back, in any of the three wire formats."""
    out: list[str] = []
    for m in body.get("messages") or body.get("input") or ():
        if m.get("role") == "tool":
            out.append(str(m["content"]))
        elif m.get("type") == "function_call_output":
            out.append(str(m["output"]))
        elif isinstance(m.get("content"), list):
            out += [json.dumps(b["content"]) for b in m["content"] if b.get("type") == "tool_result"]
    return out


@pytest.mark.parametrize("raw", [DEEP, DEEP_OBJECT], ids=["arrays", "objects"])
def test_the_guard_refuses_arguments_nested_past_its_limit_in_words(raw: str) -> None:
    with pytest.raises(ArgumentsRefused, match="nested more than 128 levels") as caught:
        ToolCall("c1", "echo", raw).arguments_object()
    assert caught.value.reason == "too_deep" and "the arguments of echo" in str(caught.value)
    with pytest.raises(ArgumentsRefused, match="past ttft's limit"):
        ToolCall("c1", "echo", '{"t": "' + "x" * MAX_TOOL_ARGUMENT_BYTES + '"}').arguments_object()
    assert ToolCall("c1", "echo", ' {"q": [[1]]} ').arguments_object() == {"q": [[1]]}
    assert ToolCall("c1", "echo", "  ").arguments_object() == {}


def test_the_anthropic_echo_of_a_refused_call_is_an_empty_input_not_a_crash() -> None:
    calls = (ToolCall("toolu_1", "echo", DEEP_OBJECT),)
    sent = messages_messages([Message("user", "go"), Message("assistant", "", tool_calls=calls)])
    assert sent[-1]["content"][0]["input"] == {}
    json.dumps(sent)  # nothing deep is left for the SDK's encoder to recurse into


@pytest.mark.parametrize(
    ("spec", "flags"),
    [
        ("compat:m", []),
        ("compat:m", ["--sdk"]),
        ("openai-responses:m", []),
        ("anthropic:m", []),
        ("anthropic:m", ["--sdk"]),
    ],
    ids=["chat-lean", "chat-sdk", "responses", "messages-lean", "messages-sdk"],
)
def test_ask_refuses_the_call_tells_the_model_and_logs_the_step(
    env: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, spec: str, flags: list[str]
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
    with AgentServer(SCRIPT) as srv:
        base = srv.url if spec.startswith("anthropic") else srv.base_url
        rc = main(["ask", "-m", spec, "--base-url", base, "--mcp", MCP, "--allow-tools", "--json", *flags, "go"])
        bodies = list(srv.requests)
    out, err = capsys.readouterr()
    assert rc == Exit.OK, err
    assert "Traceback" not in err and "RecursionError" not in out + err
    assert len(bodies) == 2  # the call was refused and the model asked again: the turn went on
    (result,) = _tool_results(bodies[1])
    assert "refused this call without running it" in result and "nested more than 128 levels" in result
    assert "refused the call of echo" in err  # the notice, said as the turn runs
    doc = json.loads(out)
    assert doc["answer"].strip() == "I could not run it."
    (rec,) = _log(env)
    assert rec["status"] == "ok" and rec["agent"]["stopped"] == "answer"
    tools = [s for s in rec["steps"] if s["kind"] == "tool"]
    assert [(t["name"], t["status"]) for t in tools] == [("echo", "refused")]
    assert any(k.startswith("tool_arguments_refused:") for k in rec["notices"])


def test_headless_compare_keeps_the_refused_step_in_each_pane(env: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with AgentServer(SCRIPT) as srv:
        argv = ["compare", "--headless", "-m", f"compat:a@{srv.base_url}", "-m", f"compat:b@{srv.base_url}"]
        rc = main([*argv, "--mcp", MCP, "--allow-tools", "--json", "go"])
    _, err = capsys.readouterr()
    assert rc == Exit.OK, err
    assert "Traceback" not in err
    records = _log(env)
    assert len(records) == 2
    for rec in records:
        assert rec["status"] == "ok" and rec["agent"]["step_count"] == 3
        assert [s["status"] for s in rec["steps"] if s["kind"] == "tool"] == ["refused"]


def test_the_bench_counts_the_refused_step_and_goes_on(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    with AgentServer([Step(calls=(Call("lookup", raw=DEEP),)), Step(text="ok")]) as srv:
        argv = ["bench", "-m", "compat:agent-fake", "--base-url", srv.base_url, "--requests", "3", "--warmup", "0"]
        rc = main([*argv, "--concurrency", "1", "--tool-latency", "0", "--out", str(out)])
    assert rc == Exit.OK, capsys.readouterr().err
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 3
    for t in turns:
        assert t["status"] == "ok" and [s["status"] for s in t["steps"] if s["kind"] == "tool"] == ["refused"]
    agent = json.loads((out / "summary.json").read_text())["levels"][0]["agent"]
    assert (agent["tool_calls"], agent["tool_errors"], agent["answered"]) == (3, 3, 3)
