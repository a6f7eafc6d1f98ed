"""Snapshots of the chat's main states at 80x24 and 160x48.

Deterministic: the backends replay events with fixed stamps, the app's clock is frozen,
and frames are drawn only when the test asks (the frame timer is parked), once every
event of the state has been recorded.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from ttft.telemetry import events as ev
from ttft.tui.chat.app import ChatApp

from tests.support.tui_support import (
    MS,
    T0,
    ScriptedBackend,
    SequenceBackend,
    factory_for,
    finished,
    script,
    wait_until,
)

SIZES = [(80, 24), (160, 48)]
ANSWER_WORDS = 60
PARKED_FPS = 1e-4  # the frame timer never fires during a test: frames come from _tick() below


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


def steady(app: ChatApp) -> None:
    """No blinking cursor: a snapshot must not depend on when it is taken."""
    app.query_one("#prompt").cursor_blink = False


def live_app(events: list[ev.Event], now_ms: float) -> ChatApp:
    return ChatApp(
        "fake:scripted-1",
        factory=factory_for(ScriptedBackend(events)),
        session_id="20260101-120000-snap",
        clock=lambda: T0 + int(now_ms * MS),
        fps=PARKED_FPS,
    )


def live_state(prompt: str, n_chunks: int):
    async def run_before(pilot) -> None:
        app: ChatApp = pilot.app
        steady(app)
        app.query_one("#prompt").value = prompt
        await pilot.press("enter")
        await wait_until(
            pilot,
            lambda: (
                app.chat.live is not None
                and len(app.chat.live.recorder.chunks) == n_chunks
                and app.chat.live.recorder.attempts
            ),
        )
        app.chat.frame(force=True)
        await pilot.pause(0.1)
        app.chat.frame(force=True)  # the pane now shows the render lag of the first paint
        await pilot.pause(0.1)

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_waiting(snap_compare, size) -> None:
    app = live_app([ev.RequestQueued(T0 - 3 * MS), ev.AttemptSent(T0, 1)], now_ms=1800)
    assert snap_compare(app, terminal_size=size, run_before=live_state("Why is the sky blue?", 0))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_reasoning(snap_compare, size) -> None:
    events = script(reasoning=24, first_ms=412)
    app = live_app(events, now_ms=412 + 24 * 12.5 + 4)
    assert snap_compare(app, terminal_size=size, run_before=live_state("Why is the sky blue?", 24))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_streaming(snap_compare, size) -> None:
    events = script(reasoning=16, visible=ANSWER_WORDS, first_ms=412)
    app = live_app(events, now_ms=412 + (16 + ANSWER_WORDS) * 12.5 + 6)
    assert snap_compare(app, terminal_size=size, run_before=live_state("Why is the sky blue?", 16 + ANSWER_WORDS))


def done_turns() -> list[list[ev.Event]]:
    fast = script(visible=30, first_ms=180, token_ms=8)
    thinking = script(reasoning=40, visible=40, first_ms=350, token_ms=15)
    # a stall mid-answer: 30 tokens, 1.2 s of silence, 20 more
    stalled = script(visible=30, first_ms=220, token_ms=10)
    t = stalled[-1].t_ns + 1200 * MS
    stalled += [ev.TextDelta(t + i * 10 * MS, f"more{i} ") for i in range(20)]
    return [finished(fast), finished(thinking, reasoning=40), finished(stalled)]


def done_app() -> ChatApp:
    return ChatApp(
        "fake:scripted-1",
        factory=factory_for(SequenceBackend(done_turns())),
        session_id="20260101-120000-snap",
        clock=lambda: T0 + 10_000 * MS,
        fps=PARKED_FPS,
    )


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_done_with_timeline(snap_compare, size) -> None:
    async def run_before(pilot) -> None:
        app: ChatApp = pilot.app
        steady(app)
        for i, prompt in enumerate(["Say hi", "Think about primes", "Tell a long story"]):
            app.query_one("#prompt").value = prompt
            await pilot.press("enter")
            await wait_until(pilot, lambda n=i: len(app.chat.session.records) == n + 1 and not app.chat.busy)
        await pilot.pause(0.2)

    assert snap_compare(done_app(), terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_error(snap_compare, size) -> None:
    events = [
        *script(visible=12, first_ms=300),
        ev.Failed(
            T0 + 600 * MS,
            "APIError",
            "The server had an error while processing your request.",
            None,
            "The provider failed mid-answer; regenerate (F5) to try again.",
        ),
    ]
    failing = [ev.AttemptSent(T0, 1), ev.HeadersReceived(T0 + 90 * MS, 1, 429, 1.0)]
    failing.append(ev.Failed(T0 + 91 * MS, "RateLimitError", "Rate limit reached for gpt-x on requests per min.", 429))
    app = ChatApp(
        "fake:scripted-1",
        factory=factory_for(SequenceBackend([events, failing])),
        session_id="20260101-120000-snap",
        clock=lambda: T0 + 10_000 * MS,
        fps=PARKED_FPS,
    )

    async def run_before(pilot) -> None:
        steady(app)
        for i, prompt in enumerate(["Write a haiku", "And another"]):
            app.query_one("#prompt").value = prompt
            await pilot.press("enter")
            await wait_until(pilot, lambda n=i: len(app.chat.session.records) == n + 1 and not app.chat.busy)
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


def test_empty_chat_greets(snap_compare, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the first prompt: which model, where it runs, how to switch (80x24: the tightest fit)."""
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "no-config"))  # a user's config must not show here
    app = ChatApp(
        "local:/models/Example-Chat-1B-Instruct-Q4_K_M.gguf",
        factory=factory_for(ScriptedBackend([])),
        session_id="20260101-120000-snap",
        clock=lambda: T0,
        fps=PARKED_FPS,
    )

    async def run_before(pilot) -> None:
        steady(pilot.app)
        await pilot.pause(0.1)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
