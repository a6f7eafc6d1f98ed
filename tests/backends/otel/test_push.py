"""Live OpenTelemetry: turns from ask, the chat, compare and bench arrive at a loopback OTLP/HTTP
receiver as spans and histograms whose values are the log's; a dead or slow collector delays nothing."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ttft.backends.finish import finish_turn
from ttft.backends.otel import push as otel
from ttft.backends.turn import new_recorder, run_turn
from ttft.telemetry.export import genai, genai_values
from ttft.telemetry.record import chunk_times_ms
from ttft.tui.chat.app import ChatApp
from ttft.tui.cli import main

from tests.fakes import FakeServer, Schedule
from tests.fakes.agent_server import AgentServer, Call, Step
from tests.fakes.batching_server import BatchingServer
from tests.fakes.otlp_receiver import OtlpReceiver, attrs
from tests.support.backend_util import make_request
from tests.support.compare_fakes import ScheduledBackend
from tests.support.paths import ROOT
from tests.support.tool_host import FakeHost, FakeTool, stand_in_mcp
from tests.support.tui_support import wait_until

MS = 1_000_000
ENDPOINT_VARS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


@pytest.fixture(autouse=True)
def _clean_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for k in (*ENDPOINT_VARS, "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", genai.CAPTURE_CONTENT_ENV):
        monkeypatch.delenv(k, raising=False)
    for k in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "TTFT_MODEL"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "conf"))
    yield
    otel.uninstall(0.5)


@pytest.fixture
def rx(monkeypatch: pytest.MonkeyPatch) -> Iterator[OtlpReceiver]:
    r = OtlpReceiver().start()
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.url)
    yield r
    r.stop()


@pytest.fixture(scope="module")
def srv() -> Iterator[FakeServer]:
    with FakeServer(Schedule(first_token_ms=40, token_ms=5, reasoning_tokens=3, visible_tokens=8)) as s:
        yield s


def _log(data: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for f in sorted((data / "sessions").glob("*.jsonl")) for line in f.read_text().splitlines()
    ]


def _roots(rx: OtlpReceiver) -> dict[tuple[str, int], Any]:
    out = {}
    for s in rx.spans():
        if not s.parent_span_id:
            a = attrs(s.attributes)
            out[(a["ttft.session_id"], a["ttft.turn_index"])] = s
    return out


def assert_span_is_the_record(span: Any, rec: dict[str, Any], rx: OtlpReceiver) -> None:
    """The span says what the log line says: name, times, counts, TTFT, phases."""
    a = attrs(span.attributes)
    assert span.name == f"chat {rec['model']}" and span.kind == span.SPAN_KIND_CLIENT
    assert abs(span.start_time_unix_nano - time.time_ns()) < 300 * 1_000_000_000  # a real wall-clock time
    assert span.start_time_unix_nano == genai_values.unix_ns(rec["sent_at"])
    ev = rec["events_ms"]
    assert (span.end_time_unix_nano - span.start_time_unix_nano) / MS == pytest.approx(ev["end"], abs=0.002)
    assert a["gen_ai.response.time_to_first_chunk"] == pytest.approx(rec["metrics"]["ttft_ms"] / 1000, abs=1e-9)
    assert a["gen_ai.usage.output_tokens"] == rec["tokens"]["output"]
    assert a["gen_ai.usage.input_tokens"] == rec["tokens"]["input"]
    assert a["gen_ai.provider.name"] == rec["provider"] and a["gen_ai.request.model"] == rec["model"]
    events = {e.name: (e.time_unix_nano - span.start_time_unix_nano) / MS for e in span.events}
    assert events["gen_ai.first_token"] == pytest.approx(ev["first_token"], abs=0.002)
    assert events["gen_ai.first_visible_token"] == pytest.approx(ev["first_visible"], abs=0.002)
    children = [s for s in rx.spans() if s.parent_span_id == span.span_id]
    assert {c.name for c in children} >= {"streaming"} and all(c.trace_id == span.trace_id for c in children)
    assert all(span.start_time_unix_nano <= c.start_time_unix_nano <= c.end_time_unix_nano for c in children)


def histogram(rx: OtlpReceiver, name: str) -> tuple[int, float]:
    """(count, sum) of the last export of a cumulative histogram, over its series."""
    found = [m for m in rx.metrics() if m.name == name]
    assert found, f"no {name}"
    last = found[-1].histogram
    return sum(p.count for p in last.data_points), sum(p.sum for p in last.data_points)


def assert_histograms_are_the_records(rx: OtlpReceiver, recs: list[dict[str, Any]]) -> None:
    n, total = histogram(rx, "gen_ai.client.inference.duration")
    assert n == len(recs) and total == pytest.approx(sum(r["metrics"]["total_ms"] for r in recs) / 1000, rel=1e-9)
    n, total = histogram(rx, "gen_ai.client.inference.time_to_first_chunk")
    assert n == len(recs) and total == pytest.approx(sum(r["metrics"]["ttft_ms"] for r in recs) / 1000, rel=1e-9)
    n, total = histogram(rx, "gen_ai.client.inference.time_per_output_chunk")
    times = [chunk_times_ms(r) for r in recs]
    assert n == sum(len(t) - 1 for t in times) and n > 0  # one point per chunk after the first
    assert total == pytest.approx(sum(t[-1] - t[0] for t in times) / 1000, rel=1e-6)
    # the usage counters (cumulative sums, each export the total so far) add up every turn's usage
    for name, key in (("input_tokens", "input"), ("output_tokens", "output"), ("reasoning.output_tokens", "reasoning")):
        found = [m for m in rx.metrics() if m.name == f"gen_ai.client.inference.usage.{name}"]
        assert found, name
        total = sum(p.as_int for p in found[-1].sum.data_points)
        assert total == sum(r["tokens"][key] for r in recs if r["tokens"]["source"] == "usage"), name
    assert not any(m.name.startswith(("gen_ai.client.operation.", "gen_ai.client.token.")) for m in rx.metrics())
    for m in rx.metrics():
        for p in (*m.histogram.data_points, *m.sum.data_points):
            assert not any(k.startswith(("gen_ai.usage.", "ttft.")) for k in attrs(p.attributes))


def _ttft(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ttft.tui.cli", *args], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), **extra}


def test_ask_turn_arrives_as_span_and_histograms(srv: FakeServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    env = _env(
        OTEL_SERVICE_NAME="my-svc",
        OTEL_RESOURCE_ATTRIBUTES="deployment.environment=test",
        OTEL_EXPORTER_OTLP_HEADERS="x-collector-token=tok123",
    )
    p = _ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "hi")
    assert p.returncode == 0, p.stderr
    assert "OpenTelemetry" not in p.stderr  # everything was delivered
    (rec,) = _log(tmp_path / "data")
    roots = _roots(rx)
    assert_span_is_the_record(roots[(rec["session_id"], rec["turn_index"])], rec, rx)
    assert_histograms_are_the_records(rx, [rec])
    res = rx.resources()[0]
    assert res["service.name"] == "my-svc" and res["deployment.environment"] == "test"
    assert rx.schema_urls() == {genai.SCHEMA_URL}
    assert {r.content_type for r in rx.received} == {"application/x-protobuf"}
    assert all(r.headers.get("x-collector-token") == "tok123" for r in rx.received)


def test_the_1_44_names_arrive_beside_the_new_ones_when_opted_in(
    srv: FakeServer, rx: OtlpReceiver, tmp_path: Path
) -> None:
    p = _ttft(_env(OTEL_SEMCONV_STABILITY_OPT_IN="gen_ai/dup"), "ask", "-m", "compat:fake-model",
              "--base-url", srv.openai_base_url, "hi")  # fmt: skip
    assert p.returncode == 0 and "OpenTelemetry" not in p.stderr, p.stderr
    (rec,) = _log(tmp_path / "data")
    for name in ("duration", "time_to_first_chunk", "time_per_output_chunk"):
        assert histogram(rx, f"gen_ai.client.operation.{name}") == histogram(rx, f"gen_ai.client.inference.{name}")
    found = [m for m in rx.metrics() if m.name == "gen_ai.client.token.usage"]
    assert found and {attrs(p.attributes)["gen_ai.token.type"] for p in found[-1].histogram.data_points} == {
        "input",
        "output",
    }
    n, total = histogram(rx, "gen_ai.client.inference.operation.output_tokens")
    assert (n, total) == (1, rec["tokens"]["output"])


def test_one_signal_endpoint_sends_that_signal_only(srv: FakeServer, tmp_path: Path) -> None:
    rx = OtlpReceiver().start()
    try:
        env = _env(OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{rx.url}/v1/traces")  # the Phoenix recipe's one variable
        p = _ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "hi")
    finally:
        rx.stop()
    assert p.returncode == 0 and "OpenTelemetry" not in p.stderr, p.stderr
    assert {r.path for r in rx.received} == {"/v1/traces"} and len(_roots(rx)) == 1


def test_chat_turn_in_the_pilot_arrives(srv: FakeServer, rx: OtlpReceiver, tmp_path: Path) -> None:
    assert otel.install() is not None

    async def chat() -> list[dict[str, Any]]:
        app = ChatApp("compat:fake-model", base_url=srv.openai_base_url)
        async with app.run_test(size=(120, 40)) as pilot:
            for k in range(2):
                app.query_one("#prompt").value = f"question {k}"
                await pilot.press("enter")
                await wait_until(
                    pilot, lambda k=k: len(app.chat.session.records) == k + 1 and not app.chat.busy, timeout=20
                )
            return [r.to_dict() for r in app.chat.session.records]  # as the log and the spans hold them

    shown = asyncio.run(chat())
    assert otel.uninstall() is None  # flushed: nothing lost
    logged = _log(tmp_path / "data")
    assert [r["turn_index"] for r in logged] == [0, 1] and [r["answer"] for r in logged] == [r["answer"] for r in shown]
    roots = _roots(rx)
    for rec in logged:
        assert_span_is_the_record(roots[(rec["session_id"], rec["turn_index"])], rec, rx)
    assert_histograms_are_the_records(rx, logged)
    assert "gen_ai.input.messages" not in attrs(next(iter(roots.values())).attributes)


def test_content_goes_out_only_when_asked(
    srv: FakeServer, rx: OtlpReceiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _env(**{genai.CAPTURE_CONTENT_ENV: "true"}, OPENAI_API_KEY="sk-SECRETKEY123")
    p = _ttft(env, "ask", "-m", "openai:fake-model", "--base-url", srv.openai_base_url, "tell me")
    assert p.returncode == 0, p.stderr
    (root,) = _roots(rx).values()
    a = attrs(root.attributes)
    assert json.loads(a["gen_ai.input.messages"])[0]["parts"][0]["content"] == "tell me"
    assert json.loads(a["gen_ai.output.messages"])[0]["parts"][-1]["content"] == _log(tmp_path / "data")[0]["answer"]
    sent = b"".join(r.message.SerializeToString() for r in rx.received)
    assert b"SECRETKEY123" not in sent and all("SECRETKEY123" not in json.dumps(r.headers) for r in rx.received)


def test_bench_turns_arrive_from_every_worker(rx: OtlpReceiver, tmp_path: Path) -> None:
    with BatchingServer(slots=4, token_ms=5, alpha=0.3, prefill_ms=10) as server:
        for workers in ("1", "2"):
            out = tmp_path / f"run{workers}"
            rc = main(
                [
                    "bench", "-m", "compat:batching-fake", "--base-url", server.base_url, "--concurrency", "2",
                    "--requests", "4", "--warmup", "0", "--max-output-tokens", "6", "--workers", workers,
                    "--out", str(out), "--quiet",
                ]
            )  # fmt: skip
            assert rc == 0
    assert otel.uninstall() is None
    turns = [
        json.loads(line) for w in ("1", "2") for line in (tmp_path / f"run{w}" / "turns.jsonl").read_text().splitlines()
    ]
    assert len(turns) == 8 and {t["extra"]["bench"]["worker"] for t in turns} == {0, 1}
    roots = _roots(rx)
    for rec in turns:
        span = roots[(rec["session_id"], rec["turn_index"])]
        assert_span_is_the_record(span, rec, rx)
        assert attrs(span.attributes)["ttft.bench.run_id"] == rec["extra"]["bench"]["run_id"]
    # the workers' processes pushed their own histograms: together they count every turn
    durations = [
        p for m in rx.metrics() if m.name == "gen_ai.client.inference.duration" for p in m.histogram.data_points
    ]
    assert sum(p.count for p in durations) >= len(turns)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("collector", ["dead", "slow"])
def test_a_dead_or_slow_collector_delays_nothing(collector: str, monkeypatch: pytest.MonkeyPatch) -> None:
    slow = OtlpReceiver(delay_s=5.0).start() if collector == "slow" else None
    url = slow.url if slow is not None else f"http://127.0.0.1:{_closed_port()}"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", url)
    push = otel.install(eager=True)
    assert push is not None
    try:
        recs, ends = [], []
        for _ in range(3):
            backend = ScheduledBackend(ttft_s=0.03, gap_s=0.002, tokens=20)
            request = make_request()
            recorder = new_recorder(backend, request, session_id="s", turn_index=len(recs))
            recs.append(asyncio.run(run_turn(backend, request, recorder)))
            t0 = time.perf_counter()
            finish_turn(recorder)  # already ended: what a sink costs is measured below
            ends.append(time.perf_counter() - t0)
        for rec in recs:  # the stamps are the schedule's: nothing waited on the collector
            assert rec.metrics.ttft_ms is not None and rec.metrics.ttft_ms < 30 + 500
        t0 = time.monotonic()
        line = otel.uninstall(1.0)
        # the exit waits a bounded time, whatever the collector does (the slow one holds each export 5 s);
        # 3 s over the 1 s budget: room for a loaded machine, still short of the collector's hold
        assert time.monotonic() - t0 < 1.0 + 3.0
        assert line is not None and "not delivered" in line and url.split("//")[1] in line
    finally:
        if slow is not None:
            slow.stop()


def test_ask_against_a_dead_collector_keeps_the_log_and_says_so_once(srv: FakeServer, tmp_path: Path) -> None:
    env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://user:PW123@127.0.0.1:{_closed_port()}")
    t0 = time.monotonic()
    p = _ttft(env, "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url, "hi")
    wall = time.monotonic() - t0
    assert p.returncode == 0, p.stderr
    assert len(_log(tmp_path / "data")) == 1
    lines = [line for line in p.stderr.splitlines() if "OpenTelemetry" in line]
    assert len(lines) == 1 and "not delivered" in lines[0] and "PW123" not in p.stderr, p.stderr
    assert "Traceback" not in p.stderr and wall < otel.CLOSE_TIMEOUT_S + 20  # bounded exit (generous: 2 shared cores)


def test_nothing_set_nothing_imported(srv: FakeServer) -> None:
    code = (
        "import sys; from ttft.tui.cli import main; "
        f"rc = main(['ask', '-m', 'compat:fake-model', '--base-url', '{srv.openai_base_url}', 'hi']); "
        "print('SDK' if any(m.startswith('opentelemetry.sdk') for m in sys.modules) else 'none', "
        "'push' if 'ttft.backends.otel.push' in sys.modules else 'none', file=sys.stderr)"
    )
    p = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    assert p.stderr.strip().splitlines()[-1] == "none none"


def test_only_the_signals_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    assert otel.configured({}) is None
    assert otel.configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_SDK_DISABLED": "true"}) is None
    s = otel.configured({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://h:6006/v1/traces"})
    assert s is not None and (s.traces, s.metrics) == (True, False)
    s = otel.configured({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://h:4318", "OTEL_METRICS_EXPORTER": "none"})
    assert s is not None and (s.traces, s.metrics) == (True, False)


def test_compare_panes_arrive_tagged_with_their_comparison(
    srv: FakeServer, rx: OtlpReceiver, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(
        ["compare", "--headless", "-m", "compat:fake-a", "-m", "compat:fake-b", "--base-url", srv.openai_base_url, "hi"]
    )
    capsys.readouterr()
    assert rc == 0
    assert otel.uninstall() is None
    logged = _log(tmp_path / "data")
    assert sorted(r["model"] for r in logged) == ["fake-a", "fake-b"]
    roots = _roots(rx)
    for rec in logged:
        span = roots[(rec["session_id"], rec["turn_index"])]
        assert_span_is_the_record(span, rec, rx)
        a = attrs(span.attributes)
        assert (
            a["ttft.compare.id"] == rec["extra"]["comparison_id"]
            and a["ttft.compare.pane"] == rec["extra"]["pane_label"]
        )
    assert_histograms_are_the_records(rx, logged)


def test_closing_stops_the_sdk_threads(rx: OtlpReceiver) -> None:
    # Left running, the SDK's batch and metric threads keep exporting (and retrying a dead
    # collector) for the life of the process: in a test run they outlive their test.
    before = {t.ident for t in threading.enumerate()}
    assert otel.install(eager=True) is not None
    backend = ScheduledBackend(ttft_s=0.01, gap_s=0.001, tokens=5)
    request = make_request()
    recorder = new_recorder(backend, request, session_id="s", turn_index=0)
    asyncio.run(run_turn(backend, request, recorder))
    finish_turn(recorder)
    assert otel.uninstall(5.0) is None and _roots(rx)
    leaked = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert not [n for n in leaked if n.startswith(("Otel", "ttft-otel"))], leaked


def test_a_tool_using_turn_arrives_as_an_agent_span_with_its_steps(
    rx: OtlpReceiver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stand_in_mcp(monkeypatch, FakeHost(FakeTool("search", "Tokyo 12:00", delay_s=0.1, server="web")))
    script = [Step(calls=(Call("search", {"q": "tokyo"}),)), Step(text="It is noon.")]
    with AgentServer(script) as model:
        rc = main(["ask", "-m", "compat:m", "--base-url", model.base_url, "--mcp", "web", "--allow-tools", "time?"])
    capsys.readouterr()
    assert rc == 0
    assert otel.uninstall() is None  # flushed: nothing lost
    (rec,) = _log(tmp_path / "data")
    spans = rx.spans()
    (root,) = [s for s in spans if not s.parent_span_id]
    assert root.name == "invoke_agent" and root.kind == root.SPAN_KIND_INTERNAL
    assert root.start_time_unix_nano == genai_values.unix_ns(rec["sent_at"])
    assert (root.end_time_unix_nano - root.start_time_unix_nano) / MS == pytest.approx(
        rec["events_ms"]["end"], abs=0.002
    )
    a = attrs(root.attributes)
    assert a["gen_ai.operation.name"] == "invoke_agent" and a["ttft.agent.step_count"] == 3
    steps = sorted((s for s in spans if s.parent_span_id == root.span_id), key=lambda s: s.start_time_unix_nano)
    assert [s.name for s in steps] == ["chat m", "execute_tool search", "chat m"]
    assert [s.kind for s in steps] == [root.SPAN_KIND_CLIENT, root.SPAN_KIND_INTERNAL, root.SPAN_KIND_CLIENT]
    for span, step in zip(steps, rec["steps"], strict=True):  # each at its step's own times, as logged
        start = (span.start_time_unix_nano - root.start_time_unix_nano) / MS
        end = (span.end_time_unix_nano - root.start_time_unix_nano) / MS
        assert (start, end) == (pytest.approx(step["start_ms"], abs=0.002), pytest.approx(step["end_ms"], abs=0.002))
    tool = attrs(steps[1].attributes)
    assert tool["gen_ai.tool.name"] == "search" and tool["gen_ai.tool.call.id"] == rec["steps"][1]["call_id"]
    assert tool["ttft.tool.server"] == "web" and tool["ttft.tool.status"] == "ok"
    assert attrs(steps[2].attributes)["gen_ai.response.time_to_first_chunk"] == pytest.approx(
        rec["steps"][2]["ttft_ms"] / 1000, abs=1e-9
    )
    assert any(s.parent_span_id == steps[0].span_id for s in spans)  # a model step keeps its phases
    n, took = histogram(rx, "gen_ai.execute_tool.duration")
    assert n == 1 and took == pytest.approx(rec["steps"][1]["duration_ms"] / 1000, rel=1e-9) and took >= 0.09
    assert histogram(rx, "gen_ai.invoke_agent.duration") == (1, pytest.approx(rec["metrics"]["total_ms"] / 1000))
    n, total = histogram(rx, "gen_ai.client.inference.duration")  # each model step one inference
    assert n == 2 and total == pytest.approx(
        sum(s["end_ms"] - s["start_ms"] for s in rec["steps"] if s["kind"] == "model") / 1000, abs=1e-5
    )
