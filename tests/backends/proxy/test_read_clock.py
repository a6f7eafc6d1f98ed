"""The proxy's read timeout without a timer per read (backends.proxy.upstream.ReadClock): a read that waits
``timeout_s`` is cut with ``TimeoutError``; time spent writing to the client (a slow client) is not the
upstream's silence; a read that begins late gets its whole timeout; a closed clock cuts nothing."""

from __future__ import annotations

import asyncio

import pytest
from ttft.backends.proxy.upstream import ReadClock

TIMEOUT_S = 0.2


async def test_a_read_that_waits_past_the_timeout_is_cut() -> None:
    loop = asyncio.get_running_loop()
    never: asyncio.Future[bytes] = loop.create_future()
    t0 = loop.time()
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(None) as deadline:
            clock = ReadClock(deadline, TIMEOUT_S)
            try:
                clock.reading_since = loop.time()
                await never
            finally:
                clock.close()
    assert never.cancelled()  # the read itself was cancelled, as asyncio.timeout cancels it
    assert loop.time() - t0 >= TIMEOUT_S - 0.002


async def test_writing_to_a_slow_client_is_not_the_upstreams_silence() -> None:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(None) as deadline:
        clock = ReadClock(deadline, TIMEOUT_S)
        try:
            clock.reading_since = None  # the client's write: three timeouts long
            await asyncio.sleep(3 * TIMEOUT_S)
            for _ in range(4):  # then reads that each come back within the timeout
                clock.reading_since = loop.time()
                await asyncio.sleep(TIMEOUT_S / 2)
                clock.reading_since = None
        finally:
            clock.close()
    assert not deadline.expired()


async def test_a_read_begun_late_gets_its_whole_timeout() -> None:
    """The clock's timer was armed at the answer's start; a read that began just before it fires is not cut
    then, but a whole timeout after it began."""
    loop = asyncio.get_running_loop()
    never: asyncio.Future[bytes] = loop.create_future()
    async with asyncio.timeout(None) as deadline:
        clock = ReadClock(deadline, TIMEOUT_S)
        await asyncio.sleep(TIMEOUT_S * 0.75)
        began = loop.time()
        clock.reading_since = began
        with pytest.raises(asyncio.CancelledError):  # inside the block: the cancel is not yet TimeoutError
            await never
        cut = loop.time()
        clock.close()
    assert deadline.expired()
    assert cut - began >= TIMEOUT_S - 0.002


async def test_a_closed_clock_cuts_nothing() -> None:
    loop = asyncio.get_running_loop()
    async with asyncio.timeout(None) as deadline:
        clock = ReadClock(deadline, TIMEOUT_S)
        clock.reading_since = loop.time()
        clock.close()
        await asyncio.sleep(2 * TIMEOUT_S)
    assert not deadline.expired()
