"""Streams that never end: keepalives do not keep a turn alive, and a deadline cuts any turn.

Every API through its real reader (the SDKs, and ttft's own lean Chat Completions reader)
against a loopback server that sends ``: ping`` and no tokens, or a few tokens then only pings,
or a slow but steady answer. Times are generous sanity bounds; the point is that the turn ends.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ttft.backends.base import Backend
from ttft.backends.providers.lean.chat import LeanChatBackend

from tests.fakes import FakeServer, Schedule
from tests.support.backend_util import backend_for, make_request, one_turn
from tests.support.paths import ROOT

APIS = ("chat", "lean", "responses", "messages", "lean-responses", "lean-messages")
PINGS_ONLY = Schedule(first_token_ms=10, token_ms=5, visible_tokens=6, stall_after=0, stall_s=30, keepalive_s=0.2)
THREE_THEN_PINGS = Schedule(first_token_ms=10, token_ms=5, visible_tokens=6, stall_after=3, stall_s=30, keepalive_s=0.2)
SLOW_STEADY = Schedule(first_token_ms=10, token_ms=150, visible_tokens=60, keepalive_s=0.05)


@pytest.fixture
def srv():
    with FakeServer() as s:
        yield s


def _backend(api: str, srv: FakeServer, **kw: Any) -> Backend:
    if api == "lean":
        return LeanChatBackend("fake-model", base_url=srv.openai_base_url, api_key="sk-test", **kw)
    return backend_for(api, srv, **kw)


async def _turn(api: str, srv: FakeServer, schedule: Schedule, **settings: Any) -> tuple[dict[str, Any], float]:
    srv.schedule = schedule
    backend = _backend(api, srv, timeout_s=settings.pop("timeout_s", 60.0))
    t0 = time.monotonic()
    try:
        d = await one_turn(backend, max_retries=0, **settings)
    finally:
        await backend.aclose()
    return d, time.monotonic() - t0


@pytest.mark.parametrize("api", APIS)
async def test_pings_and_no_tokens_end_as_a_timeout(api: str, srv: FakeServer) -> None:
    d, took = await _turn(api, srv, PINGS_ONLY, timeout_s=1.0)
    assert d["status"] == "error" and d["error"]["type"] == "timeout", d["error"]
    assert "before the first token" in d["error"]["message"]
    assert 0.9 < took < 5, took  # the pings kept the connection busy; they did not keep the turn alive
    assert d["answer"] == ""


@pytest.mark.parametrize("api", APIS)
async def test_tokens_then_only_pings_keep_the_partial_answer(api: str, srv: FakeServer) -> None:
    d, took = await _turn(api, srv, THREE_THEN_PINGS, timeout_s=1.0)
    assert d["status"] == "error" and d["error"]["type"] == "timeout", d["error"]
    assert "in the middle of the answer" in d["error"]["message"]
    assert d["answer"] == "w00 w01 w02 "
    assert took < 5, took


@pytest.mark.parametrize("api", APIS)
async def test_the_deadline_cuts_a_slow_but_steady_stream(api: str, srv: FakeServer) -> None:
    d, took = await _turn(api, srv, SLOW_STEADY, timeout_s=1.0, deadline_s=1.0)
    assert d["status"] == "error" and d["error"]["type"] == "deadline", d["error"]
    assert d["settings"]["deadline_s"] == 1.0
    assert d["answer"].startswith("w00 w01 ") and len(d["answer"]) < 60 * 4  # kept, and cut
    assert took < 5, took


async def test_the_deadline_covers_the_wait_for_the_headers(srv: FakeServer) -> None:
    d, took = await _turn("lean", srv, Schedule(headers_ms=20_000), deadline_s=0.5)
    assert d["status"] == "error" and d["error"]["type"] == "deadline", d["error"]
    assert took < 5, took


async def test_a_steady_stream_within_its_clocks_is_ok(srv: FakeServer) -> None:
    d, _ = await _turn("lean", srv, Schedule(token_ms=20, visible_tokens=10, keepalive_s=0.01), timeout_s=1.0)
    assert d["status"] == "ok" and d["answer"] == "".join(f"w{i:02d} " for i in range(10))


def _ask(srv: FakeServer, tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {
        **os.environ,
        "TTFT_DATA_DIR": str(tmp_path / "data"),
        "TTFT_CONFIG_DIR": str(tmp_path / "conf"),
        "PYTHONPATH": str(ROOT),
    }
    for k in ("OPENAI_API_KEY", "TTFT_MODEL"):
        env.pop(k, None)
    cmd = [sys.executable, "-m", "ttft.tui.cli", "ask", "-m", "compat:fake-model", "--base-url", srv.openai_base_url]
    t0 = time.monotonic()
    p = subprocess.run([*cmd, *args, "hi"], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT)
    return p, time.monotonic() - t0


def test_ask_with_pings_and_timeout_1_ends_in_about_a_second_without_an_e2e(srv: FakeServer, tmp_path: Path) -> None:
    srv.schedule = PINGS_ONLY
    p, took = _ask(srv, tmp_path, "--timeout", "1", "--max-retries", "0")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "No new token for 1 s" in p.stderr
    assert "E2E" not in p.stderr and "no tokens" in p.stderr  # no timing of an answer that never came
    assert took < 15, took  # a process start included


def test_ask_deadline_keeps_the_partial_answer(srv: FakeServer, tmp_path: Path) -> None:
    srv.schedule = SLOW_STEADY
    p, took = _ask(srv, tmp_path, "--deadline", "1", "--json")
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    d = json.loads(p.stdout[: p.stdout.rindex("}") + 1])
    assert d["error"]["type"] == "deadline" and d["answer"].startswith("w00 ")
    assert took < 15, took


@pytest.mark.parametrize("value", ["0", "-1", "abc", "inf"])
def test_ask_rejects_a_deadline_that_is_not_a_positive_number(value: str, srv: FakeServer, tmp_path: Path) -> None:
    p, _ = _ask(srv, tmp_path, "--deadline", value)
    assert p.returncode == 2 and "Traceback" not in p.stderr and "--deadline" in p.stderr, p.stderr


async def test_a_clock_never_cancels_the_consumer_between_events(srv: FakeServer) -> None:
    """The idle clock runs out while the consumer is busy (the generator waits at a yield): the consumer's
    own await is not cancelled; the turn ends as a timeout at its next read."""
    srv.schedule = Schedule(first_token_ms=10, token_ms=50, visible_tokens=20)
    backend = _backend("lean", srv, timeout_s=0.3)
    events = []
    try:
        async for e in backend.stream(make_request(max_retries=0)):
            events.append(e)
            if sum(type(x).__name__ == "TextDelta" for x in events) == 1 and type(e).__name__ == "TextDelta":
                await asyncio.sleep(0.6)  # raises CancelledError here if the clock cancelled the task
    finally:
        await backend.aclose()
    assert type(events[-1]).__name__ == "Failed" and events[-1].error_type == "timeout"
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]


def test_chat_takes_a_deadline_for_its_turns() -> None:
    from ttft.tui.cli import build_parser
    from ttft.tui.commands.args import chat_args

    assert chat_args(build_parser().parse_args(["chat", "--deadline", "2.5"])).settings.deadline_s == 2.5
    assert chat_args(build_parser().parse_args(["chat"])).settings.deadline_s is None
