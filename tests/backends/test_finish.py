"""The one finish-and-log path: every front end's turns reach the log and every sink, once each."""

from __future__ import annotations

import asyncio
from pathlib import Path

from ttft.backends.ask.core import TurnCore
from ttft.backends.compare.runner import ComparePane, CompareRunner
from ttft.backends.finish import add_sink, finish_turn
from ttft.backends.load.driver import LoadConfig, run_level
from ttft.backends.turn import new_recorder, run_turn
from ttft.telemetry import events as ev
from ttft.telemetry.log.turns import SessionLog, read_records
from ttft.telemetry.record import TurnRecord
from ttft.tui.runner import LoopThread, start

from tests.support.backend_util import make_request
from tests.support.compare_fakes import ScheduledBackend


def test_a_turn_is_logged_then_sunk_once(tmp_path: Path, sunk: list[TurnRecord]) -> None:
    log = SessionLog("s1", directory=tmp_path)
    lines_when_sunk: list[int] = []

    def check(_: TurnRecord) -> None:  # the line is on disk before any sink runs
        lines_when_sunk.append(len(list(read_records(log.path))))

    remove = add_sink(check)
    backend = ScheduledBackend(tokens=3, ttft_s=0.0, gap_s=0.0)
    request = make_request()
    recorder = new_recorder(backend, request, session_id="s1", turn_index=0)
    try:
        record = asyncio.run(run_turn(backend, request, recorder, log=log))
    finally:
        remove()
    assert finish_turn(recorder, log) is record  # ending again changes nothing
    assert [r.answer for r in sunk] == ["tok0 tok1 tok2 "]
    assert sunk[0] is record
    assert lines_when_sunk == [1]
    assert len(list(read_records(log.path))) == 1


def test_a_failing_sink_or_log_loses_no_turn(tmp_path: Path, sunk: list[TurnRecord]) -> None:
    def broken(_: TurnRecord) -> None:
        raise RuntimeError("sink bug")

    remove = add_sink(broken)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    log = SessionLog("s2", directory=blocker)  # a "directory" that is a file: the write fails
    backend = ScheduledBackend(tokens=2, ttft_s=0.0, gap_s=0.0)
    request = make_request()
    recorder = new_recorder(backend, request, session_id="s2", turn_index=0)
    try:
        record = asyncio.run(run_turn(backend, request, recorder, log=log))
    finally:
        remove()
    assert record.status == "ok"
    assert recorder.log_error and log.write_errors
    assert sunk == [record]  # the sink after the broken one still saw it


def test_chat_runner_turns_reach_the_sinks(tmp_path: Path, sunk: list[TurnRecord]) -> None:
    log = SessionLog("s3", directory=tmp_path)
    runner = LoopThread()
    try:
        backend = ScheduledBackend(tokens=2, ttft_s=0.0, gap_s=0.0)
        request = make_request()
        first = new_recorder(backend, request, session_id="s3", turn_index=0)
        live = start(runner, TurnCore(backend, request, first, log=log))
        record = live.future.result(5)
    finally:
        runner.close()
    assert sunk == [record]
    assert live.log_error is None
    assert [r["turn_index"] for r in read_records(log.path)] == [0]


def test_compare_turns_reach_the_sinks_once_even_when_cancelled(tmp_path: Path, sunk: list[TurnRecord]) -> None:
    log = SessionLog("s4", directory=tmp_path)
    fast = ScheduledBackend(model="a", tokens=2, ttft_s=0.0, gap_s=0.0)
    slow = ScheduledBackend(model="b", tokens=50, ttft_s=0.0, gap_s=0.05)
    runner = CompareRunner([ComparePane(fast), ComparePane(slow)], log=log)

    async def go() -> None:
        task = asyncio.create_task(runner.run_prompt("hi"))
        await asyncio.sleep(0.2)
        runner.cancel(1)
        await task

    asyncio.run(go())
    assert sorted((r.model, r.status) for r in sunk) == [("a", "ok"), ("b", "cancelled")]
    assert len(list(read_records(log.path))) == 2


def test_bench_turns_reach_the_sinks(sunk: list[TurnRecord]) -> None:
    backend = ScheduledBackend(tokens=2, ttft_s=0.0, gap_s=0.0)
    cfg = LoadConfig(levels=(2,), requests=4)
    result = asyncio.run(run_level(backend, cfg, 2, run_id="bench-1"))
    assert len(sunk) == 4 == len(result.records)
    assert sorted(r.extra["bench"]["index"] for r in sunk) == [0, 1, 2, 3]


def test_a_turn_never_sent_is_still_sunk(sunk: list[TurnRecord]) -> None:
    backend = ScheduledBackend()
    recorder = new_recorder(backend, make_request(), session_id="s5", turn_index=0)
    recorder.feed(ev.Cancelled(ev.now_ns()))
    record = finish_turn(recorder)
    assert sunk == [record] and record.status == "cancelled"
