"""``backends.proxy.run``: a whole proxy run in this process, called through by the official OpenAI SDK,
with a real child program where there is one: what it keeps, logs, writes, and what it leaves out."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import sys
from pathlib import Path

import openai
import pytest
from ttft.backends.proxy.otlp import program_env
from ttft.backends.proxy.plan import ProxyPlan, upstream_root
from ttft.backends.proxy.run import SCHEMA, Listeners, ProxyRunner, Started, without_content
from ttft.backends.proxy.server import ProxiedCall, ProxyConfig

from tests.fakes.server import FakeServer
from tests.support.turns import recorder, stream

KEY = "sk-test-SECRET-run-77aa01"


async def _call(base_url: str) -> str:
    client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=30)
    try:
        out = await client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "tell me"}], stream=True
        )
        return "".join([c.choices[0].delta.content or "" async for c in out if c.choices])
    finally:
        await client.close()


def _plan(fake: FakeServer, tmp_path: Path, **kw: object) -> ProxyPlan:
    keep = bool(kw.pop("keep_content", False))
    config = ProxyConfig(port=0, upstream=fake.url, keep_content=keep)
    return ProxyPlan(config, sessions_dir=tmp_path / "sessions", **kw)  # type: ignore[arg-type]


async def test_a_run_without_a_program_ends_on_stop_with_its_calls_logged_and_written(
    fake: FakeServer, tmp_path: Path
) -> None:
    started: list[Started] = []
    seen: list[ProxiedCall] = []
    out = tmp_path / "run.json"
    runner = ProxyRunner(_plan(fake, tmp_path, json_out=out), Listeners(on_start=started.append, on_call=seen.append))
    task = asyncio.create_task(runner.run())
    while not started:
        await asyncio.sleep(0.01)
    s = started[0]
    assert s.env["OPENAI_BASE_URL"] == s.base_url + "/v1" and s.env["ANTHROPIC_BASE_URL"] == s.base_url
    answers = [await _call(s.env["OPENAI_BASE_URL"]) for _ in range(2)]
    assert all(answers)
    runner.stop(signal.SIGTERM)
    result = await asyncio.wait_for(task, 30)

    assert result.status == 128 + signal.SIGTERM and result.program_problem is None and result.not_saved == ()
    assert [c.record for c in result.calls] == [c.record for c in seen]  # each handed on as it ended
    for call in result.calls:  # no content without keep_content, whatever the server left
        assert call.record.prompt == "" and call.record.answer == "" and call.record.source == "proxy"
    lines = [json.loads(x) for x in result.log_path.read_text().splitlines()]
    assert result.log_path.parent == tmp_path / "sessions" and result.log_path.stem == result.session_id
    assert [d["turn_index"] for d in lines] == [0, 1]
    assert all(d["session_id"] == result.session_id and d["answer"] == "" for d in lines)
    assert oct(result.log_path.stat().st_mode & 0o777) == "0o600"

    doc = json.loads(out.read_text())
    assert doc["schema"] == SCHEMA and len(doc["calls"]) == 2
    assert doc["calls"][0]["metrics"]["ttft_ms"] == lines[0]["metrics"]["ttft_ms"]
    assert [s["call_indices"] for s in doc["sessions"]] == [[s for s in c.call_indices] for c in result.sessions]
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    for text in (out.read_text(), result.log_path.read_text()):
        assert KEY not in text


async def test_keep_content_keeps_the_answer(fake: FakeServer, tmp_path: Path) -> None:
    started: list[Started] = []
    runner = ProxyRunner(_plan(fake, tmp_path, keep_content=True), Listeners(on_start=started.append))
    task = asyncio.create_task(runner.run())
    while not started:
        await asyncio.sleep(0.01)
    answer = await _call(started[0].env["OPENAI_BASE_URL"])
    runner.stop()
    result = await asyncio.wait_for(task, 30)
    assert result.status == 130
    [call] = result.calls
    assert call.record.answer == answer
    assert json.loads(result.log_path.read_text())["answer"] == answer


async def test_the_program_gets_the_two_base_urls_and_nothing_else_changed(fake: FakeServer, tmp_path: Path) -> None:
    dump = tmp_path / "env.json"
    program = f"import json, os; open({str(dump)!r}, 'w').write(json.dumps(dict(os.environ)))"
    started: list[Started] = []
    runner = ProxyRunner(
        _plan(fake, tmp_path, command=(sys.executable, "-c", program)), Listeners(on_start=started.append)
    )
    result = await runner.run()
    assert result.status == 0 and result.calls == () and result.sessions == ()
    seen = json.loads(dump.read_text())
    expected = {**os.environ, **started[0].env}
    assert {k: v for k, v in seen.items() if k != "LC_CTYPE"} == {k: v for k, v in expected.items() if k != "LC_CTYPE"}
    assert not result.log_path.exists()  # no call, no log file


async def test_with_otlp_the_program_is_pointed_at_the_receiver_and_nowhere_else(
    fake: FakeServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://collector.example:4318/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "grpc")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://collector.example:4318/v1/metrics")
    dump = tmp_path / "env.json"
    program = f"import json, os; open({str(dump)!r}, 'w').write(json.dumps(dict(os.environ)))"
    plan = ProxyPlan(
        ProxyConfig(port=0, upstream=fake.url, otlp_port=0),
        command=(sys.executable, "-c", program),
        sessions_dir=tmp_path / "sessions",
        json_out=tmp_path / "run.json",
    )
    started: list[Started] = []
    result = await ProxyRunner(plan, Listeners(on_start=started.append)).run()
    seen = json.loads(dump.read_text())
    endpoint = started[0].env["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert endpoint.startswith("http://127.0.0.1:") and endpoint == result.otlp_endpoint
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
    assert program_env(os.environ, started[0].env)["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/json"
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    assert program_env(os.environ, started[0].env)["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert seen["OTEL_EXPORTER_OTLP_ENDPOINT"] == endpoint and seen["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    # a signal's own endpoint, or gRPC, would send the traces or logs past the receiver: the program goes without
    assert "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" not in seen and "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL" not in seen
    assert seen["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] == "http/json"  # an HTTP protocol it reads: the person's choice
    assert seen["OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"] == "http://collector.example:4318/v1/metrics"  # not read
    doc = json.loads((tmp_path / "run.json").read_text())
    assert doc["app_telemetry"] == {
        "endpoint": endpoint,
        "requests": 0,
        "refused": 0,
        "items": 0,
        "tool_spans": 0,
        "dropped": 0,
        "joined": 0,
        "spans": [],
    }


@pytest.mark.parametrize(
    ("command", "status", "said"),
    [
        (("ttft-no-such-program",), 127, "ttft-no-such-program: command not found"),
        ((os.devnull,), 126, "permission denied"),
        ((sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"), 143, None),
        ((sys.executable, "-c", "raise SystemExit(9)"), 9, None),
    ],
    ids=["not-found", "not-executable", "killed", "exit-9"],
)
async def test_the_programs_status_as_a_shell_gives_it(
    fake: FakeServer, tmp_path: Path, command: tuple[str, ...], status: int, said: str | None
) -> None:
    result = await ProxyRunner(_plan(fake, tmp_path, command=command)).run()
    assert result.status == status
    assert result.program_problem == said if said is None else said in (result.program_problem or "")


async def test_a_json_path_that_is_a_link_is_replaced_never_written_through(fake: FakeServer, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    link = tmp_path / "run.json"
    link.symlink_to(target)
    result = await ProxyRunner(_plan(fake, tmp_path, json_out=link, command=("true",))).run()
    assert result.status == 0 and result.not_saved == ()
    assert target.read_text() == "keep me"
    assert not link.is_symlink() and json.loads(link.read_text())["schema"] == SCHEMA


async def test_a_json_file_that_cannot_be_written_is_said_and_the_status_kept(fake: FakeServer, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    out = tmp_path / "file" / "run.json"
    result = await ProxyRunner(_plan(fake, tmp_path, json_out=out, command=(sys.executable, "-c", "exit(4)"))).run()
    assert result.status == 4
    assert len(result.not_saved) == 1 and str(out) in result.not_saved[0]


async def test_a_log_that_cannot_be_written_is_said_once_and_the_run_goes_on(fake: FakeServer, tmp_path: Path) -> None:
    blocked = tmp_path / "sessions"
    blocked.write_text("a file where the folder should be")
    problems: list[str] = []
    started: list[Started] = []
    runner = ProxyRunner(_plan(fake, tmp_path), Listeners(on_start=started.append, on_problem=problems.append))
    task = asyncio.create_task(runner.run())
    while not started:
        await asyncio.sleep(0.01)
    for _ in range(2):
        assert await _call(started[0].env["OPENAI_BASE_URL"])
    runner.stop()
    result = await asyncio.wait_for(task, 30)
    assert len(result.calls) == 2
    assert len(problems) == 1 and "could not write the session log" in problems[0]
    assert result.not_saved and "session log" in result.not_saved[0]


@pytest.mark.parametrize("json_out", [False, True])
async def test_the_calls_kept_for_the_end_hold_their_chunk_times_only_for_json(
    fake: FakeServer, tmp_path: Path, json_out: bool
) -> None:
    """A long run keeps every call for its summary and sessions, but a call's per-chunk times (most of its
    record) only when --json will write them; what is handed on as it ends and the log keep them all."""
    out = tmp_path / "run.json" if json_out else None
    started: list[Started] = []
    seen: list[ProxiedCall] = []
    runner = ProxyRunner(_plan(fake, tmp_path, json_out=out), Listeners(on_start=started.append, on_call=seen.append))
    task = asyncio.create_task(runner.run())
    while not started:
        await asyncio.sleep(0.01)
    assert await _call(started[0].env["OPENAI_BASE_URL"])
    runner.stop()
    result = await asyncio.wait_for(task, 30)
    [call], [handed] = result.calls, seen
    [line] = [json.loads(x) for x in result.log_path.read_text().splitlines()]
    assert len(handed.record.chunks) == len(line["chunks"]) > 1
    assert call.record.metrics == handed.record.metrics and call.record.tokens == handed.record.tokens
    assert len(result.sessions) == 1
    if json_out:
        assert call.record == handed.record
        assert len(json.loads(tmp_path.joinpath("run.json").read_text())["calls"][0]["chunks"]) == len(line["chunks"])
    else:
        assert call.record.chunks == () and call.record == dataclasses.replace(handed.record, chunks=())


def test_without_content_keeps_names_sizes_and_timings_only() -> None:
    rec = recorder(prompt="my secret plan")
    for e in stream(visible=3):
        rec.feed(e)
    record = dataclasses.replace(
        rec.finish(), reasoning="thought", tool_calls=({"name": "Bash", "arguments": '{"command": "rm -rf x"}'},)
    )
    assert record.answer and record.prompt
    bare = without_content(record)
    assert (bare.prompt, bare.answer, bare.reasoning) == ("", "", "")
    assert bare.tool_calls == ({"name": "Bash", "arguments": ""},)
    assert bare.metrics == record.metrics and bare.tokens == record.tokens
    assert without_content(bare) is bare


def test_an_upstream_given_as_an_api_base_is_its_servers_root() -> None:
    assert upstream_root("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080"
    assert upstream_root("http://127.0.0.1:8080/v1/") == "http://127.0.0.1:8080"
    assert upstream_root("https://gw.example.com/openai/v1") == "https://gw.example.com/openai"
    assert upstream_root("http://127.0.0.1:8080") == "http://127.0.0.1:8080"
