"""The bench's event loop (backends.load.event_loop): uvloop when installed, asyncio's otherwise, named in
summary.json; the lean reader on uvloop records what the SDK path records."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from ttft.backends.load import event_loop

from tests.backends.providers.test_lean_equivalence import LEAN_EXTRA, SCHEDULES, _both, _error_words, _same
from tests.fakes.batching_server import BatchingServer


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))


def _bench(out: Path, *extra: str) -> dict[str, object]:
    from ttft.tui.cli import main

    with BatchingServer(slots=4, token_ms=10, alpha=0, prefill_ms=10) as srv:
        rc = main(
            ["bench", "-m", "compat:batching-fake", "--base-url", srv.base_url, "--concurrency", "2",
             "--requests", "4", "--warmup", "1", "--max-output-tokens", "4", "--out", str(out), "--quiet", *extra]
        )  # fmt: skip
    assert rc == 0
    turns = [json.loads(line) for line in (out / "turns.jsonl").read_text().splitlines()]
    assert len(turns) == 5 and all(t["status"] == "ok" and t["tokens"]["output"] == 4 for t in turns)
    summary: dict[str, object] = json.loads((out / "summary.json").read_text())
    return summary


def test_bench_runs_on_uvloop_when_installed_and_says_so(tmp_path: Path) -> None:
    pytest.importorskip("uvloop")
    assert str(_bench(tmp_path / "run")["event_loop"]).startswith("uvloop ")


@pytest.mark.parametrize("how", ["env", "not_installed"])
def test_bench_falls_back_to_asyncio(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    if how == "env":
        monkeypatch.setenv(event_loop.ENV, "asyncio")
    else:
        monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop raises ImportError
    assert event_loop.loop_factory() is None
    assert _bench(tmp_path / "run")["event_loop"] == "asyncio"


def test_the_lag_monitor_is_finer_than_uvloops_millisecond_clock() -> None:
    pytest.importorskip("uvloop")
    from ttft.backends.load.watch import ClientWatch

    async def watch() -> list[float]:
        w = ClientWatch()
        w.start()
        import asyncio

        await asyncio.sleep(0.3)
        await w.stop()
        return w.lags_ms

    lags = event_loop.run(watch(), event_loop.loop_factory())
    assert lags and any(x % 1.0 for x in lags)  # not whole milliseconds


@pytest.mark.parametrize("name", [*SCHEDULES, *LEAN_EXTRA])
def test_lean_reader_on_uvloop_records_what_the_sdk_path_records(name: str) -> None:
    pytest.importorskip("uvloop")
    schedule, settings = (SCHEDULES[name], {}) if name in SCHEDULES else LEAN_EXTRA[name]
    settings = {"stream": True, "max_retries": 0 if name in SCHEDULES else 2, **settings}
    sdk, lean = event_loop.run(_both(schedule, client="aiohttp", **settings), event_loop.loop_factory())
    assert _same(lean) == _same(sdk)
    assert len(lean["chunks"]) == len(sdk["chunks"])
    assert _error_words(lean) == _error_words(sdk)


@pytest.mark.parametrize(
    ("then", "status", "requests", "connections"),
    [
        ("close_idle", "ok", 2, 2),
        ("reset_unread", "ok", 2, 2),
        ("read_then_drop", "error", 2, 1),
        ("answer", "ok", 2, 1),
    ],
)
def test_the_resend_rule_holds_on_uvloop(then: str, status: str, requests: int, connections: int) -> None:
    pytest.importorskip("uvloop")
    from tests.backends.transport.test_resend import two_turns

    srv, first, second = event_loop.run(two_turns(then), event_loop.loop_factory())
    assert first["status"] == "ok" and second["status"] == status and second["attempts"] == 1
    assert (srv.requests, srv.connections) == (requests, connections)  # nothing read twice
