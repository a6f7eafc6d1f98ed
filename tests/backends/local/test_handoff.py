"""The engine thread's hand-off: every event arrives once, in order, with its own stamp; the loop is woken per drain."""

from __future__ import annotations

import asyncio
import threading
import time

from ttft.backends.local.handoff import Handoff
from ttft.telemetry import events as ev


async def _drain(h: Handoff, n: int) -> tuple[list[ev.Event], int]:
    got: list[ev.Event] = []
    takes = 0
    while len(got) < n:
        got.extend(await h.take())
        takes += 1
    return got, takes


def test_every_event_arrives_once_in_order_with_the_stamp_it_was_given() -> None:
    async def run() -> tuple[list[ev.Event], list[int], int]:
        h = Handoff(asyncio.get_running_loop())
        stamps: list[int] = []

        def worker() -> None:
            for i in range(20_000):
                t = ev.now_ns()
                stamps.append(t)
                h.put(ev.TextDelta(t, str(i), 1))
                if i % 1000 == 0:
                    time.sleep(0.001)  # the loop catches up now and then: empty and full deques both happen

        th = threading.Thread(target=worker)
        th.start()
        got, takes = await _drain(h, 20_000)
        th.join()
        return got, stamps, takes

    got, stamps, takes = asyncio.run(run())
    assert [e.text for e in got if isinstance(e, ev.TextDelta)] == [str(i) for i in range(20_000)]
    assert [e.t_ns for e in got] == stamps  # stamped on the thread; the hand-off never restamps
    assert takes < 20_000  # while the loop was busy, tokens went over together


def test_a_put_after_the_loop_found_nothing_still_wakes_it() -> None:
    async def run() -> list[str]:
        h = Handoff(asyncio.get_running_loop())
        seen: list[str] = []
        for i in range(200):  # one event at a time: each take waits on an empty hand-off first
            threading.Timer(0.0005, h.put, [ev.TextDelta(ev.now_ns(), str(i), 1)]).start()
            batch = await asyncio.wait_for(h.take(), 30)
            seen.extend(e.text for e in batch if isinstance(e, ev.TextDelta))
        return seen

    assert asyncio.run(run()) == [str(i) for i in range(200)]


def test_a_put_after_the_loop_closed_is_dropped_quietly() -> None:
    loop = asyncio.new_event_loop()
    h = Handoff(loop)
    loop.close()
    h.put(ev.Cancelled(ev.now_ns()))  # no listener left: no RuntimeError reaches the engine thread


def test_held_events_wait_for_the_flush_and_leaving_delivers_the_rest() -> None:
    """A decode holds its events and wakes the loop once a step (see the module doc): a loop waiting on
    the hand-off is not woken by a held event, but by the worker's flush, and when the hold ends."""

    async def run() -> tuple[bool, list[str], list[str]]:
        h = Handoff(asyncio.get_running_loop())
        put, step = threading.Event(), threading.Event()

        def worker() -> None:
            with h.held():
                h.put(ev.TextDelta(ev.now_ns(), "a", 1))
                h.put(ev.TextDelta(ev.now_ns(), "b", 1))
                put.set()
                step.wait(30)
                h.flush()  # a decode step begins
                h.put(ev.TextDelta(ev.now_ns(), "c", 1))
            # the hold ends (the turn's end): "c" goes without a flush of the worker's own

        waiting = asyncio.ensure_future(h.take())  # the loop waits on an empty hand-off
        await asyncio.sleep(0.05)
        th = threading.Thread(target=worker)
        th.start()
        await asyncio.get_running_loop().run_in_executor(None, put.wait, 30)
        done, _ = await asyncio.wait({waiting}, timeout=0.2)
        woken_early = bool(done)
        step.set()
        first = [e.text for e in await asyncio.wait_for(waiting, 30) if isinstance(e, ev.TextDelta)]
        th.join()
        rest: list[str] = []
        while len(first) + len(rest) < 3:  # "c" came with the flush's batch, or with the hold's end
            rest += [e.text for e in await asyncio.wait_for(h.take(), 30) if isinstance(e, ev.TextDelta)]
        return woken_early, first, rest

    woken_early, first, rest = asyncio.run(run())
    assert not woken_early  # held: the loop slept through both puts
    assert first + rest == ["a", "b", "c"] and first[:2] == ["a", "b"]


def test_the_wake_up_pipe_is_closed_with_the_hand_off_and_puts_still_arrive() -> None:
    """On a loop that watches file descriptors, the worker wakes the loop through a pipe of the hand-off's own;
    closing it closes both ends, and a later put still reaches the loop (through its own wake-up)."""
    import os
    import sys

    async def run() -> tuple[tuple[int, int] | None, list[str]]:
        h = Handoff(asyncio.get_running_loop())
        pipe = h._pipe
        got: list[str] = []
        threading.Thread(target=h.put, args=(ev.TextDelta(ev.now_ns(), "a", 1),)).start()
        got += [e.text for e in await asyncio.wait_for(h.take(), 30) if isinstance(e, ev.TextDelta)]
        h.close()
        threading.Thread(target=h.put, args=(ev.TextDelta(ev.now_ns(), "b", 1),)).start()
        got += [e.text for e in await asyncio.wait_for(h.take(), 30) if isinstance(e, ev.TextDelta)]
        return pipe, got

    pipe, got = asyncio.run(run())
    assert got == ["a", "b"]
    if sys.platform != "win32":
        assert pipe is not None
        for fd in pipe:
            try:
                os.fstat(fd)
            except OSError:
                continue
            raise AssertionError(f"fd {fd} is still open")
