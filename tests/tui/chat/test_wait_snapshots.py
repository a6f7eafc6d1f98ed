"""Snapshots of the wait's split in the chat: the live line in the server phase, and two finished turns
(a new TLS connection, then a reused one) with the timeline's network and server parts and the after-turn lines.

Deterministic as tests/tui/chat/test_snapshots.py: fixed stamps, a frozen clock, frames drawn on demand.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.wire import HttpInfo, RateLimit
from ttft.tui.chat.app import ChatApp

from tests.support.tui_support import MS, T0, SequenceBackend, factory_for, finished, wait_until
from tests.tui.chat.test_snapshots import PARKED_FPS, SIZES, live_app, live_state, steady


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


def wired(t0: int, *, new: bool, server_ms: float, first_ms: float, words: int = 12) -> list[ev.Event]:
    """One traced turn from ``t0``: pool 0.3 ms, a new connection (12 ms TCP, 48 ms TLS) or none, send 1 ms."""
    t = t0
    out: list[ev.Event] = [ev.AttemptSent(t, 1), ev.WireStep(t, 1, "pool")]
    t += int(0.3 * MS)
    if new:
        out += [ev.WireStep(t, 1, "connect"), ev.WireStep(t + 12 * MS, 1, "tls")]
        t += 60 * MS
    out.append(ev.WireStep(t, 1, "send"))
    t += 1 * MS
    out.append(ev.WireStep(t, 1, "server"))
    t += int(server_ms * MS)
    limit = RateLimit(remaining_requests=499, remaining_tokens=29_000, reset_requests="120ms", reset_tokens="2ms")
    info = HttpInfo("new" if new else "reused", "HTTP/1.1", "req_8c2e41", server_ms - 2, limit)
    out += [ev.HttpResponse(t, 1, info), ev.HeadersReceived(t, 1, 200)]
    t += int(first_ms * MS)
    out += [ev.TextDelta(t + i * 15 * MS, f"word{i} ") for i in range(words)]
    return out


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_waiting_on_the_server(snap_compare, size) -> None:
    events = wired(T0, new=True, server_ms=5000, first_ms=100)
    events = events[: next(i for i, e in enumerate(events) if isinstance(e, ev.HttpResponse))]
    app = live_app(events, now_ms=61.3 + 1 + 1200)
    assert snap_compare(app, terminal_size=size, run_before=live_state("Why is the sky blue?", 0))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_done_with_the_wait_split(snap_compare, size) -> None:
    turns = [
        finished(wired(T0, new=True, server_ms=150, first_ms=80)),
        finished(wired(T0 + 2000 * MS, new=False, server_ms=1900, first_ms=30)),
    ]
    app = ChatApp(
        "fake:scripted-1",
        factory=factory_for(SequenceBackend(turns)),
        session_id="20260101-120000-snap",
        clock=lambda: T0 + 10_000 * MS,
        fps=PARKED_FPS,
    )

    async def run_before(pilot) -> None:
        steady(pilot.app)
        for i, prompt in enumerate(["Say hi", "Summarise this long report"]):
            pilot.app.query_one("#prompt").value = prompt
            await pilot.press("enter")
            await wait_until(
                pilot, lambda n=i: len(pilot.app.chat.session.records) == n + 1 and not pilot.app.chat.busy
            )
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
