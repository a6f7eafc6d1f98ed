"""The chat against the loopback fake servers, through the real provider factory and the real OpenAI SDK."""

from __future__ import annotations

from pathlib import Path

import pytest
from ttft.tui.chat.app import ChatApp
from ttft.tui.widgets.error_card import ErrorCard

from tests.fakes import FakeServer, Schedule
from tests.support.tui_support import wait_until


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path


@pytest.fixture
def server():
    with FakeServer(Schedule()) as srv:
        yield srv


def spy_pane(app: ChatApp) -> list[str]:
    shown: list[str] = []
    show_live = app.chat.pane.show_live

    def spy(snap, *a, **k):
        show_live(snap, *a, **k)
        shown.append(str(app.chat.pane.query_one("#live").content))

    app.chat.pane.show_live = spy  # type: ignore[method-assign]
    return shown


async def send(pilot, app: ChatApp, text: str) -> None:
    app.query_one("#prompt").value = text
    await pilot.press("enter")


async def test_phases_and_server_timings_over_the_wire(server: FakeServer) -> None:
    # 25 ms tokens: the reasoning lasts 300 ms, several frames even when a loaded machine paints late,
    # so the pane cannot skip the REASONING phase checked below
    server.schedule = Schedule(
        first_token_ms=250, token_ms=25, reasoning_tokens=12, visible_tokens=40, timings="llama", cached_tokens=4
    )
    app = ChatApp("compat:fake-model", base_url=server.openai_base_url)
    async with app.run_test(size=(140, 44)) as pilot:
        shown = spy_pane(app)
        await send(pilot, app, "explain")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=20)
        rec = app.chat.session.records[0]
        assert rec.status == "ok", rec.error
        phases = list(dict.fromkeys(s.split()[0] for s in shown))
        # STARTING: Enter -> the send (ttft's own delay), shown only while the request is not out yet;
        # OK: a live frame may catch the stream's end before the record's figures replace it, or not
        assert [p for p in phases if p not in ("STARTING", "OK")] == ["WAITING", "REASONING", "STREAMING"], phases
        assert any("waiting for the first token" in s for s in shown)
        assert any("thinking" in s and "tokens" in s for s in shown)
        assert any("tokens/s" in s for s in shown)
        # the record's figures, drawn once the turn has ended
        await wait_until(pilot, lambda: str(app.chat.pane.query_one("#live").content).split()[0] == "OK", timeout=5)
        pane = str(app.chat.pane.query_one("#live").content)
        # the engine's own split, next to the client's figures
        assert "prefill" in pane and "decode" in pane
        assert 200 <= rec.metrics.ttft_ms < 2000
        assert rec.tokens.source == "usage" and rec.tokens.output == 52
        assert server.wait_for(lambda r: r.completed) is not None  # the handler may finish after the client


async def test_retry_after_429_is_shown_while_waiting(server: FakeServer) -> None:
    server.schedule = Schedule(
        fail_status=429, fail_times=1, retry_after=0.3, first_token_ms=600, token_ms=5, visible_tokens=5
    )
    app = ChatApp("compat:fake-model", base_url=server.openai_base_url)
    async with app.run_test(size=(140, 44)) as pilot:
        shown = spy_pane(app)
        await send(pilot, app, "hi")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=20)
        rec = app.chat.session.records[0]
        assert rec.status == "ok" and len(rec.attempts) == 2
        assert any("attempt 2 after a 429, waited" in s for s in shown), shown[:5]
        tl = app.chat.pane.query_one("#timeline").render().plain
        assert "↻" in tl


async def test_http_error_becomes_an_error_card(server: FakeServer) -> None:
    server.schedule = Schedule(fail_status=401, fail_message="Incorrect API key provided")
    app = ChatApp("compat:fake-model", base_url=server.openai_base_url)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, app, "hi")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=20)
        text = str(app.query_one(ErrorCard).content)
        assert "HTTP 401" in text and "Incorrect API key" in text


async def test_cancel_closes_the_stream_at_the_server(server: FakeServer) -> None:
    server.schedule = Schedule(first_token_ms=20, token_ms=30, visible_tokens=300)
    app = ChatApp("compat:fake-model", base_url=server.openai_base_url)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, app, "long")
        await wait_until(
            pilot,
            lambda: app.chat.live is not None and app.chat.live.recorder.snapshot().visible_tokens >= 3,
            timeout=20,
        )
        await pilot.press("escape")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=20)
        rec = app.chat.session.records[0]
        assert rec.status == "cancelled" and rec.answer.startswith("w00 ")
        assert server.wait_for(lambda r: r.disconnected, timeout=5) is not None


async def test_mid_stream_error_keeps_partial_answer(server: FakeServer) -> None:
    server.schedule = Schedule(first_token_ms=20, token_ms=5, visible_tokens=30, error_after=6)
    app = ChatApp("compat:fake-model", base_url=server.openai_base_url)
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, app, "hi")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=20)
        rec = app.chat.session.records[0]
        assert rec.status == "error" and rec.answer.startswith("w00 w01")
        assert "partial answer above is kept" in str(app.query_one(ErrorCard).content)


async def test_a_bad_model_spec_is_an_error_card_with_a_hint() -> None:
    app = ChatApp("nope:some-model")
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, app, "hi")
        await wait_until(pilot, lambda: len(app.query(ErrorCard)) == 1, timeout=30)
        text = str(app.query_one(ErrorCard).content)
        assert "Unknown provider 'nope'" in text and "Try:" in text
        assert not app.chat.busy and app.chat.session.records == []
