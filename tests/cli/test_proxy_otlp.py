"""``ttft proxy --otlp -- CMD``: a scripted agent (the official OpenAI SDK for its model calls, the OpenTelemetry
SDK with its OTLP/HTTP exporter for its ``execute_tool`` spans) run through the proxy against a loopback
fake model that asks for one tool. The app's step between the two calls is split into the tool's own time
(its span) and the app's own time around it, joined by call id, or by the trace its calls carry in their
``traceparent`` header; the summary and ``--json`` say so. Plus the lines to set and a port that is taken."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_proxy import proxy as run_proxy
from tests.fakes.agent_server import AgentServer, Call, Step
from tests.support.child_env import child_env
from tests.support.paths import ROOT

PRE_S, TOOL_S, POST_S = 0.3, 0.4, 0.2  # the app's work before the tool, the tool, the app's work after

AGENT = """
import sys, time
import openai
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.propagate import inject
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

mode, pre, tool, post = sys.argv[1], *map(float, sys.argv[2:5])
provider = TracerProvider()
provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # OTEL_EXPORTER_OTLP_ENDPOINT: the proxy's
tracer = provider.get_tracer("scripted-agent")
client = openai.OpenAI(api_key="sk-test-otlp-agent", max_retries=0)  # OPENAI_BASE_URL: the proxy's
messages = [{"role": "user", "content": "run the tool"}]
with tracer.start_as_current_span("invoke_agent scripted"):
    for _ in range(4):
        headers = {}
        if mode == "trace":
            inject(headers)  # the W3C traceparent of the agent's span
        stream = client.chat.completions.create(
            model="gpt-4o-mini", messages=messages, stream=True, extra_headers=headers,
            stream_options={"include_usage": True},
        )
        calls, text = {}, ""
        for chunk in stream:
            for choice in chunk.choices:
                text += choice.delta.content or ""
                for tc in choice.delta.tool_calls or ():
                    c = calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
                    c["id"] = tc.id or c["id"]
                    c["name"] = (tc.function and tc.function.name) or c["name"]
                    c["arguments"] += (tc.function and tc.function.arguments) or ""
        if not calls:
            print(text.strip(), flush=True)
            break
        asked = [{"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
                 for c in calls.values()]
        messages.append({"role": "assistant", "content": None, "tool_calls": asked})
        time.sleep(pre)
        for c in calls.values():
            attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": c["name"]}
            if mode == "call_id":
                attrs["gen_ai.tool.call.id"] = c["id"]
            with tracer.start_as_current_span("execute_tool " + c["name"], attributes=attrs):
                time.sleep(tool)
            messages.append({"role": "tool", "tool_call_id": c["id"], "content": "done"})
        time.sleep(post)
provider.shutdown()
"""


@pytest.fixture(scope="module")
def srv():
    server = AgentServer([Step(calls=(Call("grep", {"pattern": "x"}),), first_ms=40), Step(text="all done")]).start()
    yield server
    server.stop()


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    return child_env(tmp_path, drop_prefixes=("OTEL_",))


def proxy(env: dict[str, str], *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return run_proxy(env, *args, timeout=timeout)


def run_agent(srv: AgentServer, env: dict[str, str], tmp_path: Path, mode: str) -> tuple[dict, str]:
    out = tmp_path / "run.json"
    times = (str(PRE_S), str(TOOL_S), str(POST_S))
    p = proxy(
        env,
        *("--port", "0", "--otlp", "0", "--upstream", srv.url, "--json", str(out)),
        *("--", sys.executable, "-c", AGENT, mode, *times),
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "all done"  # the agent's own stdout
    assert "Traceback" not in p.stderr
    return json.loads(out.read_text()), p.stderr


def the_tool_step(doc: dict) -> tuple[dict, dict]:
    [session] = doc["sessions"]
    assert [st["kind"] for st in session["steps"]] == ["model", "tool", "model"]
    return session, session["steps"][1]


@pytest.mark.parametrize("mode", ["call_id", "trace"])
def test_the_agents_tool_span_splits_its_step_into_tool_and_app_time(
    srv: AgentServer, env: dict[str, str], tmp_path: Path, mode: str
) -> None:
    doc, err = run_agent(srv, env, tmp_path, mode)
    session, tool = the_tool_step(doc)
    assert (tool["name"], tool["timing"], tool["span_source"]) == ("grep", "span", "execute_tool")
    assert tool["matched_by"] == ("call_id" if mode == "call_id" else "trace_id")
    # generous bounds for a loaded machine: the sleeps are the floor, the schedule's slack the roof
    assert TOOL_S * 1000 <= tool["duration_ms"] <= TOOL_S * 1000 + 150
    assert tool["gap_ms"] >= (PRE_S + TOOL_S + POST_S) * 1000
    agent = session["agent"]
    assert agent["time_in_tools_ms"] == tool["duration_ms"]
    assert (PRE_S + POST_S) * 1000 - 20 <= agent["time_in_app_ms"] <= (PRE_S + POST_S) * 1000 + 400
    total = agent["time_in_model_ms"] + agent["time_in_tools_ms"] + agent["time_in_app_ms"]
    assert abs(total - (session["steps"][-1]["end_ms"] - session["steps"][0]["start_ms"])) < 1
    assert agent["stopped"] == "answer" and [c["status"] for c in doc["calls"]] == ["ok", "ok"]
    assert "1 of 1 timed by the app's own telemetry" in session["summary"]
    assert "app telemetry: 1 tool span in 1 export, 1 timing a tool step" in err
    app = doc["app_telemetry"]
    assert (app["tool_spans"], app["joined"], app["refused"]) == (1, 1, 0)
    assert app["endpoint"].startswith("http://127.0.0.1:") and app["spans"][0]["name"] == "grep"
    traces = {c["extra"].get("trace_id") for c in doc["calls"]}
    if mode == "trace":  # every call carried the agent's trace, and the span is of it
        [trace] = traces
        assert trace == app["spans"][0]["trace_id"] and session["trace_ids"] == [trace]
        assert all(len(c["extra"]["parent_span_id"]) == 16 for c in doc["calls"])
    else:
        assert traces == {None} and session["trace_ids"] == []


def test_print_env_names_the_receiver_too(env: dict[str, str]) -> None:
    p = proxy(env, "--print-env", "--port", "9100", "--otlp")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == [
        "export ANTHROPIC_BASE_URL=http://127.0.0.1:9100",
        "export OPENAI_BASE_URL=http://127.0.0.1:9100/v1",
        "export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318",
        "export OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf",
    ]
    p = proxy(env, "--print-env", "--otlp", "0")
    assert p.returncode == 2 and "--otlp PORT (not 0)" in p.stderr


def test_a_taken_otlp_port_says_what_to_do(env: dict[str, str], srv: AgentServer) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        p = proxy(env, "--port", "0", "--otlp", str(port), "--upstream", srv.url, "--", sys.executable, "-c", "0")
    assert p.returncode == 2
    assert f"the OTLP port {port} on 127.0.0.1 is taken" in p.stderr and "--otlp PORT" in p.stderr
    assert "Traceback" not in p.stderr


def test_with_otlp_and_nothing_sent_the_summary_says_what_to_set(env: dict[str, str], srv: AgentServer) -> None:
    program = (
        "import openai; openai.OpenAI(api_key='k', max_retries=0).chat.completions.create("
        "model='m', messages=[{'role': 'user', 'content': 'hi'}])"
    )
    p = proxy(env, "--port", "0", "--otlp", "0", "--upstream", srv.url, "--", sys.executable, "-c", program)
    assert p.returncode == 0, p.stderr
    assert "--otlp: nothing came to http://127.0.0.1:" in p.stderr and "CLAUDE_CODE_ENABLE_TELEMETRY=1" in p.stderr


def test_without_the_protocol_package_otlp_says_what_to_install(env: dict[str, str]) -> None:
    blocked = (
        "import runpy, sys; sys.modules['opentelemetry.proto.collector.trace.v1.trace_service_pb2'] = None; "
        "sys.argv = ['ttft', 'proxy', '--otlp', '--port', '0', '--', 'true']; "
        "runpy.run_module('ttft.tui.cli', run_name='__main__')"
    )
    p = subprocess.run([sys.executable, "-c", blocked], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 2
    assert "--otlp needs the OpenTelemetry protocol package: pip install 'ttft[otel]'" in p.stderr
    assert "Traceback" not in p.stderr
