"""backends.load.spread: a burst of openings and endings is spread over passes of the event loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest
from ttft.backends.load.driver import LoadConfig, run_level
from ttft.backends.load.spread import PassSpreader
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.recorder import TurnRecorder

from tests.support.compare_fakes import ScheduledBackend
from tests.support.turns import recorder, stream


class PassCounter:
    """Counts passes of the running loop: a callback that re-schedules itself runs once per pass."""

    def __init__(self) -> None:
        self.n = 0
        self._on = True

    def start(self) -> None:
        loop = asyncio.get_running_loop()

        def tick() -> None:
            self.n += 1
            if self._on:
                loop.call_soon(tick)

        loop.call_soon(tick)

    def stop(self) -> None:
        self._on = False


def done_recorder(i: int) -> TurnRecorder:
    r = recorder(prompt=f"p{i}")
    for e in stream(visible=4):
        r.feed(e)
    return r


async def test_openings_go_at_most_n_per_pass_in_arrival_order() -> None:
    spreader = PassSpreader(opens_per_pass=3)
    passes = PassCounter()
    passes.start()
    went: list[tuple[int, int]] = []  # (who, pass)

    async def user(k: int) -> None:
        await spreader.admit()
        went.append((k, passes.n))

    await asyncio.gather(*(user(k) for k in range(10)))
    passes.stop()
    assert [k for k, _ in went] == list(range(10))  # first come, first out
    per_pass: dict[int, int] = {}
    for _, p in went:
        per_pass[p] = per_pass.get(p, 0) + 1
    assert max(per_pass.values()) <= 3
    assert len(per_pass) >= 4  # 10 openings at 3 a pass cannot share fewer passes


async def test_a_lone_opening_does_not_wait_for_a_pass() -> None:
    spreader = PassSpreader(opens_per_pass=2)
    passes = PassCounter()
    passes.start()
    before = passes.n
    await spreader.admit()
    assert passes.n == before
    passes.stop()


async def test_a_cancelled_waiter_gives_its_place_to_the_next() -> None:
    spreader = PassSpreader(opens_per_pass=1)
    order: list[int] = []

    async def user(k: int) -> None:
        await spreader.admit()
        order.append(k)

    tasks = [asyncio.ensure_future(user(k)) for k in range(3)]
    await asyncio.sleep(0)  # all three have asked: 0 went out, 1 and 2 wait for the next pass
    assert order == [0]
    tasks[1].cancel()
    await asyncio.wait_for(tasks[2], 1)
    assert order == [0, 2] and tasks[1].cancelled()


async def test_endings_are_batched_kept_out_of_passes_that_open_and_all_delivered() -> None:
    spreader = PassSpreader(opens_per_pass=1, finishes_per_pass=4)
    passes = PassCounter()
    passes.start()
    ended: list[tuple[str, int]] = []
    opened_in: list[int] = []

    def done_with(tag: str) -> Callable[[TurnRecord], None]:
        return lambda record: ended.append((record.prompt, passes.n))

    for i in range(10):
        spreader.end_later(done_recorder(i), done_with(str(i)))

    async def opener() -> None:
        for _ in range(3):
            await spreader.admit()
            opened_in.append(passes.n)

    await asyncio.gather(opener(), spreader.drain())
    passes.stop()
    assert sorted(p for p, _ in ended) == sorted(f"p{i}" for i in range(10))
    assert [p for p, _ in ended] == [f"p{i}" for i in range(10)]  # in the order their streams ended
    per_pass: dict[int, int] = {}
    for _, p in ended:
        per_pass[p] = per_pass.get(p, 0) + 1
    assert max(per_pass.values()) <= 4
    # each pass that let a request out ended no record (the opening's pass is the one before it resumes)
    assert not set(per_pass) & {p - 1 for p in opened_in[1:]}


async def test_endings_do_not_wait_for_openings_past_the_bound() -> None:
    spreader = PassSpreader(opens_per_pass=1, finishes_per_pass=2, max_ending=3)
    ended: list[str] = []
    for i in range(6):
        spreader.end_later(done_recorder(i), lambda r: ended.append(r.prompt))

    async def opener() -> None:
        while len(ended) < 3:  # openings every pass: endings go anyway while more than 3 wait
            await spreader.admit()

    await asyncio.wait_for(opener(), 2)
    await spreader.drain()
    assert len(ended) == 6


async def test_a_done_callback_that_raises_costs_no_other_record_and_drain_raises_it() -> None:
    spreader = PassSpreader(finishes_per_pass=8)
    ended: list[str] = []

    def done(record: TurnRecord) -> None:
        if record.prompt == "p1":
            raise ValueError("a progress printer's bug")
        ended.append(record.prompt)

    for i in range(4):
        spreader.end_later(done_recorder(i), done)
    with pytest.raises(ValueError, match="progress printer"):
        await spreader.drain()
    assert ended == ["p0", "p2", "p3"]


async def test_a_lone_record_waits_for_a_batch_at_most_the_wait_and_a_full_batch_goes_at_once() -> None:
    loop = asyncio.get_running_loop()
    spreader = PassSpreader(finishes_per_pass=8, ending_wait_s=0.05)
    ended: list[float] = []
    t0 = loop.time()
    spreader.end_later(done_recorder(0), lambda r: ended.append(loop.time()))
    await asyncio.sleep(0.01)
    assert not ended  # waiting for company: one numpy call for many records
    for _ in range(200):
        if ended:
            break
        await asyncio.sleep(0.01)
    assert ended and ended[0] - t0 >= 0.045

    ended.clear()
    for i in range(8):
        spreader.end_later(done_recorder(i), lambda r: ended.append(loop.time()))
    for _ in range(3):
        await asyncio.sleep(0)
    assert len(ended) == 8  # a full batch does not wait


async def test_end_now_ends_everything_queued_at_once() -> None:
    spreader = PassSpreader(finishes_per_pass=1)
    ended: list[str] = []
    for i in range(5):
        spreader.end_later(done_recorder(i), lambda r: ended.append(r.prompt))
    spreader.end_now()
    assert len(ended) == 5
    await spreader.drain()  # nothing left: returns at once


async def test_a_level_ending_together_loses_no_record_and_counts_each_once() -> None:
    # 40 users whose answers all end on the same pass: every record arrives, once, with its
    # progress, and the level's in-flight count is back to zero at the end.
    backend = ScheduledBackend(tokens=5, ttft_s=0.01, gap_s=0.002)
    cfg = LoadConfig(levels=(40,), requests=80, input_tokens=8, max_output_tokens=5, warmup=0)
    seen: list[int] = []
    res = await run_level(backend, cfg, 40, run_id="spread", on_progress=lambda p: seen.append(p.done))
    assert [r["extra"]["bench"]["index"] for r in res.records] == list(range(80))
    assert all(r["status"] == "ok" for r in res.records)
    assert seen == list(range(1, 81))


async def test_a_spread_level_records_what_an_unspread_one_does() -> None:
    backend = ScheduledBackend(tokens=4, ttft_s=0.005, gap_s=0.001)
    base = LoadConfig(levels=(16,), requests=32, input_tokens=8, max_output_tokens=4, warmup=0)
    spread = await run_level(backend, base, 16, run_id="a")
    plain = await run_level(backend, LoadConfig(**{**base.__dict__, "spread": False}), 16, run_id="a")

    def shape(records: list[dict]) -> list[tuple]:
        return [(r["extra"]["bench"]["index"], r["status"], r["answer"], len(r["chunks"])) for r in records]

    assert shape(spread.records) == shape(plain.records)
