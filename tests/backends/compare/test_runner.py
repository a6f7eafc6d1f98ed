"""backends.compare.runner: one prompt on N backends, parallel behind a barrier or sequential, each turn logged."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import pytest
from ttft.backends.base import ChatRequest
from ttft.backends.compare.runner import ComparePane, CompareRunner
from ttft.telemetry import events as ev
from ttft.telemetry.compare.stats import compare
from ttft.telemetry.log.turns import SessionLog

from tests.support.compare_fakes import ScheduledBackend


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


def panes() -> list[ComparePane]:
    return [
        ComparePane(ScheduledBackend("fast-start", ttft_s=0.02, gap_s=0.02, tokens=8), "A"),
        ComparePane(ScheduledBackend("fast-decode", ttft_s=0.15, gap_s=0.002, tokens=8), "B"),
        ComparePane(ScheduledBackend("broken", fail_status=503), "C"),
    ]


async def test_parallel_starts_together_and_logs_tags() -> None:
    ps = panes()
    log = SessionLog("s1")
    runner = CompareRunner(ps, log=log, comparison_id="cmp-x")
    res = await runner.run_prompt("hello", repeat=2)
    assert [len(r) for r in res.records] == [2, 2, 2]
    # Released in one event-loop step: the first sends are within a few ms (generous bound).
    assert all(s < 50 for s in res.start_skew_ms)
    logged = log.records()
    assert len(logged) == 6
    assert {(r["extra"]["pane"], r["extra"]["trial"]) for r in logged} == {(p, t) for p in range(3) for t in range(2)}
    assert all(r["extra"]["comparison_id"] == "cmp-x" and r["extra"]["mode"] == "parallel" for r in logged)
    assert len({r["turn_index"] for r in logged}) == 6
    # The failure stays in its own pane.
    statuses = [[r.status for r in recs] for recs in res.records]
    assert statuses == [["ok", "ok"], ["ok", "ok"], ["error", "error"]]
    assert res.records[2][0].error is not None and res.records[2][0].error.status_code == 503
    # Ranking follows the schedules: A first to the first token, B faster per token.
    c = compare({p.label: recs for p, recs in zip(ps, res.records, strict=True)})
    assert c.rankings["ttft"].winners == ("A",)
    assert c.rankings["tpot"].winners == ("B",)
    assert c.stats["C"].failed == 2 and c.stats["C"].ok == 0


async def test_parallel_overlaps_in_time() -> None:
    ps = [ComparePane(ScheduledBackend(f"m{i}", ttft_s=0.2, gap_s=0.001, tokens=3)) for i in range(4)]
    res = await CompareRunner(ps).run_prompt("x")
    recs = [r[0] for r in res.records]
    sent = [r.timestamps.sent for r in recs if r.timestamps.sent is not None]
    ends = [r.timestamps.end for r in recs if r.timestamps.end is not None]
    assert len(sent) == len(ends) == 4
    # Every pane was sent before any answered (each waits 0.2 s for its first token): in parallel,
    # told by the stamps rather than by a wall-clock total a loaded machine could stretch.
    assert max(sent) < min(ends)


async def test_sequential_runs_one_after_another_and_rotates() -> None:
    ps = [ComparePane(ScheduledBackend(f"m{i}", ttft_s=0.01, gap_s=0.001, tokens=3)) for i in range(3)]
    log = SessionLog("s2")
    res = await CompareRunner(ps, log=log, mode="sequential").run_prompt("x", repeat=2)
    assert res.mode == "sequential" and res.start_skew_ms == []
    for trial in range(2):
        recs = [res.records[i][trial] for i in range(3)]
        order = sorted(range(3), key=lambda i: recs[i].timestamps.sent)
        assert order == [(trial + k) % 3 for k in range(3)]
        # No overlap: each starts after the previous ended.
        for a, b in pairwise(order):
            assert recs[b].timestamps.sent >= recs[a].timestamps.end
    assert {r["extra"]["mode"] for r in log.records()} == {"sequential"}


async def test_each_pane_keeps_its_own_conversation() -> None:
    a = ScheduledBackend("a", ttft_s=0.001, gap_s=0.0, tokens=2, word="alpha")
    b = ScheduledBackend("b", ttft_s=0.001, gap_s=0.0, tokens=2, word="beta")
    broken = ScheduledBackend("c", fail_status=500)
    runner = CompareRunner([ComparePane(a), ComparePane(b), ComparePane(broken)], system="be brief")
    await runner.run_prompt("one", repeat=3)
    await runner.run_prompt("two")
    last_a = a.requests[-1].messages
    assert [m.role for m in last_a] == ["system", "user", "assistant", "user"]
    assert last_a[2].content == "alpha0 alpha1 "
    assert b.requests[-1].messages[2].content == "beta0 beta1 "
    # Every trial of a prompt saw the same context.
    assert a.requests[0].messages == a.requests[1].messages == a.requests[2].messages
    # A pane that failed does not get the failed exchange in its history.
    assert [m.role for m in broken.requests[-1].messages] == ["system", "user"]


async def test_exception_in_one_pane_does_not_stop_others() -> None:
    ok = ScheduledBackend("ok", ttft_s=0.01, gap_s=0.001, tokens=5)
    bad = ScheduledBackend(
        "bad", ttft_s=0.01, gap_s=0.001, tokens=5, raise_exc=RuntimeError("socket gone"), fail_after=2
    )
    res = await CompareRunner([ComparePane(ok), ComparePane(bad)]).run_prompt("x")
    assert res.records[0][0].status == "ok"
    r = res.records[1][0]
    assert r.status == "error" and r.error is not None and r.error.type == "RuntimeError"
    assert r.answer == "tok0 tok1 "  # the partial answer is kept


async def test_cancel_one_pane_keeps_the_others() -> None:
    slow = ScheduledBackend("slow", ttft_s=0.01, gap_s=0.05, tokens=100)
    fast = ScheduledBackend("fast", ttft_s=0.01, gap_s=0.001, tokens=20)
    log = SessionLog("s3")
    runner = CompareRunner([ComparePane(slow), ComparePane(fast)], log=log)
    started: list[int] = []

    def on_done(pane: int, trial: int, record: object) -> None:
        started.append(pane)

    task = asyncio.create_task(runner.run_prompt("x", on_done=on_done))
    await asyncio.sleep(0.15)
    runner.cancel(0)
    res = await task
    assert res.records[0][0].status == "cancelled" and res.records[0][0].answer.startswith("tok0")
    assert res.records[1][0].status == "ok"
    assert sorted(started) == [0, 1]
    assert sorted(r["status"] for r in log.records()) == ["cancelled", "ok"]


async def test_cancel_all_stops_the_trials() -> None:
    ps = [ComparePane(ScheduledBackend(f"m{i}", ttft_s=0.01, gap_s=0.05, tokens=100)) for i in range(2)]
    runner = CompareRunner(ps)
    task = asyncio.create_task(runner.run_prompt("x", repeat=5))
    await asyncio.sleep(0.1)
    runner.cancel()
    res = await task
    assert [len(r) for r in res.records] == [1, 1]
    assert {r[0].status for r in res.records} == {"cancelled"}


async def test_outer_cancellation_propagates_and_logs() -> None:
    ps = [ComparePane(ScheduledBackend(f"m{i}", ttft_s=0.01, gap_s=0.05, tokens=100)) for i in range(2)]
    log = SessionLog("s4")
    for mode in ("parallel", "sequential"):
        runner = CompareRunner(ps, log=log, mode=mode)  # type: ignore[arg-type]
        task = asyncio.create_task(runner.run_prompt("x"))
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert all(r["status"] == "cancelled" for r in log.records())
    assert len(log.records()) == 3  # 2 parallel + the 1 sequential pane that had started


async def test_keep_add_remove_keep_pane_ids_stable() -> None:
    a, b, c = (ScheduledBackend(m, ttft_s=0.001, gap_s=0.0, tokens=2, word=m) for m in "abc")
    log = SessionLog("s5")
    runner = CompareRunner([ComparePane(a, "A"), ComparePane(b, "B")], log=log)
    await runner.run_prompt("one")
    assert runner.add(ComparePane(c, "C")) == 2
    runner.remove(0)
    await runner.run_prompt("two")
    dropped = runner.keep(1)  # C
    assert [p.label for p in dropped] == ["B"]
    await runner.run_prompt("three")
    got = [(r["extra"]["prompt_index"], r["extra"]["pane"], r["extra"].get("kept", False)) for r in log.records()]
    assert got == [(0, 0, False), (0, 1, False), (1, 1, False), (1, 2, False), (2, 2, True)]
    # C joined at prompt two: its history starts there; B's carries on from prompt one.
    assert [m.content for m in c.requests[-1].messages if m.role == "user"] == ["two", "three"]
    assert [m.content for m in b.requests[-1].messages if m.role == "user"] == ["one", "two"]
    with pytest.raises(ValueError):
        runner.remove(0)


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_requests_wait_until_the_front_end_is_ready(mode: str) -> None:
    """``ready`` is awaited after the panes were shown their recorders and before any request goes out."""
    ps = [ComparePane(ScheduledBackend(f"m{i}", ttft_s=0.01, gap_s=0.001, tokens=3)) for i in range(3)]
    events: list[tuple[str, int]] = []
    resolved_ns: list[int] = []

    def on_start(pane: int, trial: int, recorder: object) -> None:
        events.append(("start", pane))

    async def ready() -> None:
        events.append(("ready", -1))
        await asyncio.sleep(0.05)  # a front end laying out its panes
        resolved_ns.append(ev.now_ns())

    res = await CompareRunner(ps, mode=mode).run_prompt("x", on_start=on_start, ready=ready)  # type: ignore[arg-type]
    assert all(r[0].status == "ok" for r in res.records)
    if mode == "parallel":  # every pane started, then one wait, then all released
        assert events == [("start", 0), ("start", 1), ("start", 2), ("ready", -1)]
        assert all(p.backend.sent_ns[0] >= resolved_ns[0] for p in ps)  # type: ignore[attr-defined]
    else:  # one wait per pane, each before that pane's request
        assert events == [("start", 0), ("ready", -1), ("start", 1), ("ready", -1), ("start", 2), ("ready", -1)]
        assert all(p.backend.sent_ns[0] >= t for p, t in zip(ps, resolved_ns, strict=True))  # type: ignore[attr-defined]


async def test_cancel_while_the_front_end_gets_ready_sends_nothing() -> None:
    ps = [ComparePane(ScheduledBackend(f"m{i}", ttft_s=0.01, gap_s=0.001, tokens=3)) for i in range(2)]
    log = SessionLog("s5")
    runner = CompareRunner(ps, log=log)
    done: list[int] = []

    async def ready() -> None:
        runner.cancel()  # Esc pressed while the panes were being laid out
        await asyncio.sleep(0.01)

    res = await runner.run_prompt("x", repeat=3, on_done=lambda i, t, r: done.append(i), ready=ready)
    assert all(not p.backend.requests for p in ps)  # type: ignore[attr-defined]
    assert [[r.status for r in recs] for recs in res.records] == [["cancelled"], ["cancelled"]]
    assert sorted(done) == [0, 1]  # the panes that showed the turn hear that it ended
    assert [r["status"] for r in log.records()] == ["cancelled", "cancelled"]


async def test_a_front_end_that_never_answers_delays_by_the_timeout_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("ttft.backends.compare.runner.READY_TIMEOUT_S", 0.05)
    ps = [ComparePane(ScheduledBackend("m", ttft_s=0.01, gap_s=0.001, tokens=3))]

    async def never() -> None:
        await asyncio.Event().wait()

    res = await asyncio.wait_for(CompareRunner(ps).run_prompt("x", ready=never), 5)
    assert res.records[0][0].status == "ok"


@dataclass
class ColdSdkBackend(ScheduledBackend):
    """Like the hosted backends: the first stream pays a CPU-bound warm-up (the SDK building its
    typed models) unless ``warm_up()`` paid it already."""

    warm_s: float = 0.4  # well above a loaded machine's scheduling noise, so the skew bound can be wide
    warmed: bool = False

    def _warm(self) -> None:
        if not self.warmed:
            self.warmed = True
            time.sleep(self.warm_s)  # CPU work: it blocks the event loop, as the SDK's does

    async def warm_up(self) -> None:
        self._warm()

    async def stream(self, request: ChatRequest):  # type: ignore[no-untyped-def]
        self._warm()
        async for e in super().stream(request):
            yield e


async def test_a_process_s_first_parallel_prompt_is_released_together() -> None:
    # The SDK's warm-up runs before the barrier: inside one pane's turn, after the other pane had
    # sent, it would set the first trial's sends a warm-up apart.
    panes = [ComparePane(ColdSdkBackend(f"m{i}", ttft_s=0.02, gap_s=0.002, tokens=3), chr(65 + i)) for i in range(2)]
    res = await CompareRunner(panes).run_prompt("hi", repeat=2)
    assert all(b.backend.warmed for b in panes)
    assert max(res.start_skew_ms) < 200, res.start_skew_ms  # a warm-up between the sends would add 400 ms
