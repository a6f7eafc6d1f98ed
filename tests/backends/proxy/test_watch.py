"""``backends.proxy.state`` and ``backends.proxy.watch``: a run's state file while it listens (private,
locked, gone when it ends; a dead run's found stale and removed, whatever its pid became), the choice
of the run to watch, and a watcher that follows a real run's session log as the official SDK calls
through it: the same calls, and the same sessions rebuilt, as the run's own."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import openai
import pytest
from ttft.backends.proxy.plan import ProxyPlan
from ttft.backends.proxy.run import Listeners, ProxyRunner, Started
from ttft.backends.proxy.server import ProxiedCall, ProxyConfig
from ttft.backends.proxy.state import RunInfo, alive, program_name, publish, read_state, running
from ttft.backends.proxy.watch import ManyProxies, NoProxy, ProxyWatcher, WatchListeners, WatchPlan, choose

from tests.fakes.server import FakeServer

KEY = "sk-test-SECRET-watch-41c0"


def info(tmp_path: Path, session: str, port: int, program: str = "") -> RunInfo:
    return RunInfo(os.getpid(), port, f"http://127.0.0.1:{port}", "", session, tmp_path / f"{session}.jsonl", program)


def test_a_published_run_is_found_until_it_is_removed(tmp_path: Path) -> None:
    folder = tmp_path / "proxies"
    state = publish(
        info(tmp_path, "20260101-000000-aaaaaa", 8787, program_name(("/usr/bin/claude", "--key", "x"))), folder
    )
    (found,) = running(folder)
    assert found.port == 8787 and found.program == "claude" and found.log_path.name == "20260101-000000-aaaaaa.jsonl"
    assert alive(found) and oct(state.path.stat().st_mode & 0o777) == "0o600"
    assert "--key" not in state.path.read_text()  # the program's arguments may hold a key: never written
    assert [p.name for p in folder.iterdir()] == [state.path.name]  # no temporary file left
    state.remove()
    assert running(folder) == [] and not alive(found) and list(folder.iterdir()) == []


def test_a_dead_runs_state_file_is_stale_and_removed(tmp_path: Path) -> None:
    """A process that died without removing its file: its lock went with it, whatever its pid is now."""
    folder = tmp_path / "proxies"
    program = f"""
import sys, time
sys.path.insert(0, {str(Path.cwd())!r})
from pathlib import Path
from ttft.backends.proxy.state import RunInfo, publish
publish(RunInfo({os.getpid()}, 9000, "http://127.0.0.1:9000", "", "20260101-000000-bbbbbb", Path("/tmp/x.jsonl")),
        Path({str(folder)!r}))
print("up", flush=True)
time.sleep(60)
"""
    p = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE)
    try:
        assert p.stdout is not None and p.stdout.readline() == b"up\n"
        (found,) = running(folder)  # the pid in it is this test's own, alive: the lock decides
        assert found.port == 9000 and alive(found)
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        assert not alive(found)
        assert running(folder) == [] and list(folder.iterdir()) == []
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


@pytest.mark.parametrize(
    "text",
    [b"not json", b'{"schema": "ttft.proxy-state/1", "pid": "1"}', b"[" * 10_000, b"{" + b" " * 100_000 + b"}"],
)
def test_a_state_file_that_does_not_read_is_skipped(tmp_path: Path, text: bytes) -> None:
    folder = tmp_path / "proxies"
    folder.mkdir()
    (folder / "x.json").write_bytes(text)
    assert read_state(folder / "x.json")[0] is None
    assert running(folder) == []


def test_choose_picks_the_only_run_or_the_one_on_the_port(tmp_path: Path) -> None:
    folder = tmp_path / "proxies"
    with pytest.raises(NoProxy, match="no ttft proxy is running"):
        choose(WatchPlan(state_dir=folder))
    a = publish(info(tmp_path, "20260101-000000-aaaaaa", 8787, "claude"), folder)
    b = publish(info(tmp_path, "20260101-000001-bbbbbb", 9000), folder)
    try:
        with pytest.raises(ManyProxies, match=r"2 ttft proxies are running: port 8787 \(pid \d+, claude\), port 9000"):
            choose(WatchPlan(state_dir=folder))
        assert choose(WatchPlan(port=9000, state_dir=folder)).session_id == "20260101-000001-bbbbbb"
        with pytest.raises(NoProxy, match=r"no ttft proxy is running on port 1234 \(running: port 8787"):
            choose(WatchPlan(port=1234, state_dir=folder))
        b.remove()
        assert choose(WatchPlan(state_dir=folder)).port == 8787
    finally:
        a.remove()
        b.remove()


async def _chat(base_url: str, messages: list[dict[str, str]]) -> str:
    client = openai.AsyncOpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=30)
    async with client:
        out = await client.chat.completions.create(model="gpt-4o-mini", messages=messages)  # type: ignore[arg-type]
        return out.choices[0].message.content or ""


async def test_a_watcher_sees_a_runs_calls_and_rebuilds_its_sessions(fake: FakeServer, tmp_path: Path) -> None:
    plan = ProxyPlan(ProxyConfig(port=0, upstream=fake.url), sessions_dir=tmp_path / "sessions")
    started: list[Started] = []
    runner = ProxyRunner(plan, Listeners(on_start=started.append))
    run = asyncio.create_task(runner.run())
    while not started:
        await asyncio.sleep(0.01)
    target = choose(WatchPlan())  # the run's own state file, in this test's data directory
    assert target.base_url == started[0].base_url and target.log_path == started[0].log_path.absolute()
    url = started[0].env["OPENAI_BASE_URL"]
    first = [{"role": "user", "content": "one"}]
    answer = await _chat(url, first)  # before the watch: read from the log's start

    seen: list[tuple[ProxiedCall, datetime]] = []
    ends: list[bool] = []
    watcher = ProxyWatcher(
        target, WatchListeners(on_call=lambda c, t: seen.append((c, t)), on_end=lambda: ends.append(True)), poll_s=0.05
    )
    watching = asyncio.create_task(watcher.run())
    await _chat(url, [*first, {"role": "assistant", "content": answer}, {"role": "user", "content": "two"}])
    await _chat(url, [{"role": "user", "content": "another conversation"}])
    for _ in range(200):
        if len(seen) == 3:
            break
        await asyncio.sleep(0.02)
    assert len(seen) == 3 and not watching.done()  # the proxy still runs: so does the watch

    runner.stop(signal.SIGTERM)
    result = await asyncio.wait_for(run, 30)
    watched = await asyncio.wait_for(watching, 10)
    assert watched.ended and ends == [True] and running() == []
    assert [c.record.turn_index for c in watched.calls] == [c.record.turn_index for c in result.calls] == [0, 1, 2]
    for mine, theirs in zip(result.calls, watched.calls, strict=True):
        assert theirs.record.metrics.ttft_ms == pytest.approx(mine.record.metrics.ttft_ms)
        assert theirs.shape.message_digests == mine.shape.message_digests and theirs.shape.client == mine.shape.client
    assert [s.call_indices for s in watched.sessions] == [s.call_indices for s in result.sessions] == [(0, 1), (2,)]
    # the same sentences, the same figures but for the clocks: the watch places each call by its own wall
    # offset (the wall clock less the monotonic one when its record began), and a VM's wall clock is slewed
    # against the monotonic one (0.5 ms steps, ~5 ms a second, were seen on these machines), so a gap
    # between two calls may read a few ms apart
    for theirs_s, mine_s in zip(watched.sessions, result.sessions, strict=True):
        assert _words(theirs_s.summary) == _words(mine_s.summary)
        for a, b in zip(_figures(theirs_s.summary), _figures(mine_s.summary), strict=True):
            assert a == pytest.approx(b, abs=5.0)
        assert theirs_s.record.agent is not None and mine_s.record.agent is not None
        assert theirs_s.record.agent.time_in_model_ms == pytest.approx(mine_s.record.agent.time_in_model_ms, abs=0.01)
        assert theirs_s.record.agent.time_in_app_ms == pytest.approx(mine_s.record.agent.time_in_app_ms, abs=5.0)
    for _, when in seen:  # the time each call ended, on this machine's clock
        assert abs((when - datetime.now()).total_seconds()) < 60
    text = result.log_path.read_text()
    assert KEY not in text and '"proxy":{' in text
    assert "one" not in json.dumps([json.loads(x)["extra"] for x in text.splitlines()])  # digests, never words


_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def _words(summary: str) -> str:
    return _NUMBER.sub("#", summary)


def _figures(summary: str) -> list[float]:
    return [float(n) for n in _NUMBER.findall(summary)]


async def test_a_watch_stopped_leaves_the_proxy_running(fake: FakeServer, tmp_path: Path) -> None:
    plan = ProxyPlan(ProxyConfig(port=0, upstream=fake.url), sessions_dir=tmp_path / "sessions")
    started: list[Started] = []
    runner = ProxyRunner(plan, Listeners(on_start=started.append))
    run = asyncio.create_task(runner.run())
    while not started:
        await asyncio.sleep(0.01)
    watcher = ProxyWatcher(choose(WatchPlan()), poll_s=0.05)
    watching = asyncio.create_task(watcher.run())
    await asyncio.sleep(0.2)
    watcher.stop()
    watched = await asyncio.wait_for(watching, 10)
    assert not watched.ended and watched.calls == ()
    assert len(running()) == 1  # the proxy runs on
    runner.stop(signal.SIGTERM)
    await asyncio.wait_for(run, 30)
    assert running() == []


async def test_a_watch_of_an_otlp_run_says_it_sees_no_spans_but_keeps_the_traces(
    fake: FakeServer, tmp_path: Path
) -> None:
    """``--otlp`` and ``--watch`` together: the run's state file names its receiver, whose spans are not
    logged; the watch says so once, and its sessions carry the traces the calls' traceparent named."""
    plan = ProxyPlan(ProxyConfig(port=0, upstream=fake.url, otlp_port=0), sessions_dir=tmp_path / "sessions")
    started: list[Started] = []
    runner = ProxyRunner(plan, Listeners(on_start=started.append))
    run = asyncio.create_task(runner.run())
    while not started:
        await asyncio.sleep(0.01)
    target = choose(WatchPlan())
    endpoint = started[0].env["OTEL_EXPORTER_OTLP_ENDPOINT"]
    assert target.otlp_endpoint == endpoint and target.path is not None
    assert json.loads(target.path.read_text())["otlp_endpoint"] == endpoint
    trace = "4bf92f3577b34da6a3ce929d0e0e4736"
    client = openai.AsyncOpenAI(
        base_url=started[0].env["OPENAI_BASE_URL"],
        api_key=KEY,
        max_retries=0,
        timeout=30,
        default_headers={"traceparent": f"00-{trace}-00f067aa0ba902b7-01"},
    )
    async with client:
        await client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "one"}])
    problems: list[str] = []
    watcher = ProxyWatcher(target, WatchListeners(on_problem=problems.append), poll_s=0.05)
    watching = asyncio.create_task(watcher.run())
    await asyncio.sleep(0.2)
    runner.stop(signal.SIGTERM)
    result = await asyncio.wait_for(run, 30)
    watched = await asyncio.wait_for(watching, 10)
    assert watched.ended and len(watched.calls) == 1
    assert [s.trace_ids for s in watched.sessions] == [s.trace_ids for s in result.sessions] == [(trace,)]
    assert len(problems) == 1 and endpoint in problems[0] and "does not see" in problems[0]


def test_a_state_file_without_the_otlp_endpoint_still_reads(tmp_path: Path) -> None:
    """A state file of a ttft before ``--otlp``: no receiver, nothing to say."""
    folder = tmp_path / "proxies"
    state = publish(info(tmp_path, "20260101-000000-cccccc", 8787), folder)
    try:
        doc = json.loads(state.path.read_text())
        assert doc.pop("otlp_endpoint") == ""
        state.path.write_text(json.dumps(doc))  # rewritten in place: the lock is on the open file, still held
        found, held = read_state(state.path)
        assert found is not None and held and found.otlp_endpoint == ""
    finally:
        state.remove()
