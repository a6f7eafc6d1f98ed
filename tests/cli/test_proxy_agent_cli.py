"""A real agent CLI through ``ttft proxy --``: Claude Code (from npm), offline, in a loopback-only namespace.

Claude Code reads ``ANTHROPIC_BASE_URL``; ``ttft proxy`` sets it and runs ``claude -p`` against a loopback
fake Anthropic server (tests/fakes/agent_server.py) that scripts one tool call, Bash ``sleep 1``, then an
answer. The session rebuilt from the two calls has two model steps and one tool step, Bash, that covers
the sleep; the agent's answer is its own stdout; its key is in no file. With ``--otlp`` and Claude Code's
telemetry on, its own ``claude_code.tool_result`` event (OTel logs, protobuf or JSON) times the Bash step.

Where the CLI is not installed (``TTFT_CLAUDE_CODE`` names its ``claude``, else ``claude`` on PATH) or no
namespace can be made, the test skips and says why; in CI (``CI`` set), where .ci/run installs the pinned
version, a missing CLI fails it. To run it::

    npm install --prefix /tmp/npm-agent @anthropic-ai/claude-code@2.1.197
    TTFT_CLAUDE_CODE=/tmp/npm-agent/node_modules/.bin/claude pytest tests/cli/test_proxy_agent_cli.py
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.support.netns import LoopbackNamespace, why_not

KEY = "sk-ant-test-SECRET-claude-code-4b1d"

# Run inside the namespace: the fake model and ttft proxy, which runs the agent.
DRIVER = """
import json, os, subprocess, sys
from tests.fakes.agent_server import AgentServer, Call, Step

claude, out, home = sys.argv[1:4]
protocol = sys.argv[4] if len(sys.argv) > 4 else None  # with one: --otlp, and Claude Code's telemetry on
script = [
    Step(calls=(Call("Bash", {"command": "sleep 1", "description": "sleep a second"}),), first_ms=150),
    Step(text="Slept for a second.", first_ms=100),
]
srv = AgentServer(script).start()
env = {**os.environ, "HOME": home, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "DISABLE_AUTOUPDATER": "1"}
cmd = [sys.executable, "-m", "ttft.tui.cli", "proxy", "--port", "0", "--upstream", srv.url, "--json", out]
if protocol:  # what a person sets for Claude Code's tool events (docs/proxy.md); ttft sets where they go
    env.update(CLAUDE_CODE_ENABLE_TELEMETRY="1", OTEL_LOGS_EXPORTER="otlp", OTEL_EXPORTER_OTLP_PROTOCOL=protocol)
    cmd += ["--otlp", "0"]
cmd.append("--")
agent = [claude, "-p", "run sleep 1", "--allowedTools", "Bash", "--model", "claude-sonnet-4-5"]
p = subprocess.run([*cmd, *agent], env=env, capture_output=True, text=True, timeout=150, stdin=subprocess.DEVNULL)
srv.stop()
print(json.dumps({"rc": p.returncode, "stdout": p.stdout, "stderr": p.stderr, "served": len(srv.requests)}))
"""


def claude_code() -> str | None:
    return os.environ.get("TTFT_CLAUDE_CODE") or shutil.which("claude")


@pytest.fixture
def namespace():
    if claude_code() is None:
        if os.environ.get("CI"):  # .ci/run installs it (a pinned version): in CI a missing one is a failure
            pytest.fail("CI is set but Claude Code is not installed (.ci/run sets TTFT_CLAUDE_CODE)", pytrace=False)
        pytest.skip("Claude Code is not installed (npm install @anthropic-ai/claude-code; TTFT_CLAUDE_CODE=its claude)")
    if (why := why_not()) is not None:
        pytest.skip(why)
    with LoopbackNamespace() as ns:
        yield ns


def test_claude_code_through_the_proxy_has_two_model_steps_and_the_bash_step_covers_the_sleep(
    namespace: LoopbackNamespace, tmp_path: Path
) -> None:
    data, conf, home = tmp_path / "data", tmp_path / "conf", tmp_path / "home"
    for d in (conf, home):
        d.mkdir()
    out = tmp_path / "run.json"
    env = {
        **{k: v for k, v in os.environ.items() if not k.endswith(("_API_KEY", "_BASE_URL", "_AUTH_TOKEN"))},
        "ANTHROPIC_API_KEY": KEY,
        "TTFT_DATA_DIR": str(data),
        "TTFT_CONFIG_DIR": str(conf),
    }
    done = namespace.run(
        [sys.executable, "-c", DRIVER, str(claude_code()), str(out), str(home)], env=env, timeout=200, check=True
    )
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["rc"] == 0, got["stderr"]
    assert "Slept for a second." in got["stdout"]  # the agent's answer, on its own stdout
    assert "ttft proxy: " in got["stderr"] and "Bash" in got["stderr"] and "Traceback" not in got["stderr"]

    doc = json.loads(out.read_text())
    calls = doc["calls"]
    assert len(calls) == got["served"] >= 2
    assert all(c["source"] == "proxy" and c["client"].startswith("claude-cli/") for c in calls)
    [session] = [s for s in doc["sessions"] if s["agent"]["tool_steps"]]
    assert session["agent"]["model_steps"] == 2 and session["agent"]["tool_steps"] == 1
    [bash] = [s for s in session["steps"] if s["kind"] == "tool"]
    assert bash["name"] == "Bash"
    assert 1000 <= bash["duration_ms"] <= 30_000  # the sleep, and a sanity roof for a loaded machine
    assert [s["kind"] for s in session["steps"]] == ["model", "tool", "model"]

    for path in [out, *data.rglob("*"), *conf.rglob("*")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in got["stderr"]


@pytest.mark.parametrize("protocol", ["http/protobuf", "http/json"])
def test_with_otlp_claude_codes_own_tool_event_times_the_bash_step(
    namespace: LoopbackNamespace, tmp_path: Path, protocol: str
) -> None:
    """Claude Code's ``claude_code.tool_result`` event (its OTel logs, in either OTLP/HTTP encoding) times the
    Bash step itself: the sleep, without Claude Code's own work around it, which becomes the app's time."""
    data, conf, home = tmp_path / "data", tmp_path / "conf", tmp_path / "home"
    for d in (conf, home):
        d.mkdir()
    out = tmp_path / "run.json"
    env = {
        **{
            k: v
            for k, v in os.environ.items()
            if not k.endswith(("_API_KEY", "_BASE_URL", "_AUTH_TOKEN")) and not k.startswith("OTEL_")
        },
        "ANTHROPIC_API_KEY": KEY,
        "TTFT_DATA_DIR": str(data),
        "TTFT_CONFIG_DIR": str(conf),
    }
    argv = [sys.executable, "-c", DRIVER, str(claude_code()), str(out), str(home), protocol]
    done = namespace.run(argv, env=env, timeout=200, check=True)
    got = json.loads(done.stdout.splitlines()[-1])
    assert got["rc"] == 0, got["stderr"]
    assert "1 of 1 timed by the app's own telemetry" in got["stderr"] and "Traceback" not in got["stderr"]
    doc = json.loads(out.read_text())
    [session] = [s for s in doc["sessions"] if s["agent"]["tool_steps"]]
    [bash] = [s for s in session["steps"] if s["kind"] == "tool"]
    assert (bash["name"], bash["timing"], bash["span_source"]) == ("Bash", "span", "claude_code.tool_result")
    assert bash["matched_by"] == "call_id" and bash["status"] == "ok"
    assert 1000 <= bash["duration_ms"] <= bash["gap_ms"] <= 30_000  # the sleep, inside the app's step
    agent = session["agent"]
    assert agent["time_in_tools_ms"] == bash["duration_ms"]
    assert abs(agent["time_in_app_ms"] - (bash["gap_ms"] - bash["duration_ms"])) < 1
    app = doc["app_telemetry"]
    assert app["requests"] >= 1 and app["refused"] == 0 and app["joined"] == 1
    for path in [out, *data.rglob("*"), *conf.rglob("*")]:
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
