"""The empty chat's greeting: which model, where it runs, how to switch; gone once a turn starts."""

from __future__ import annotations

from pathlib import Path

import pytest
from ttft.tui.chat.app import ChatApp
from ttft.tui.screens.settings import SettingsScreen
from ttft.tui.widgets.greeting import Greeting
from ttft.tui.widgets.transcript import UserMessage

from tests.support.tui_support import TimedBackend, factory_for, wait_until

LOCAL_SPEC = "local:/models/Example-Chat-1B-Instruct-Q4_K_M.gguf"


def local_backend(**kw) -> TimedBackend:
    """Named as the local backend names itself: provider local, the file's stem."""
    b = TimedBackend(model="Example-Chat-1B-Instruct-Q4_K_M", **kw)
    b.provider = "local"
    return b


@pytest.fixture(autouse=True)
def dirs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "config"))  # no user config in these tests
    return tmp_path


def greeting(app: ChatApp) -> Greeting | None:
    return app.chat.transcript.greeting


async def send(pilot, app: ChatApp, text: str) -> None:
    app.query_one("#prompt").value = text
    await pilot.press("enter")


async def test_the_empty_chat_says_which_model_and_how_to_switch() -> None:
    app = ChatApp(LOCAL_SPEC, factory=factory_for(local_backend(first_ms=5, token_ms=1, visible=3)))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        g = greeting(app)
        assert g is not None
        text = g.plain
        assert "local:Example-Chat-1B-Instruct-Q4_K_M" in text
        assert "runs on this machine" in text and "no API key" in text
        assert "F2 settings" in text and "ttft -m openai:" in text and "--base-url" in text
        assert "F1" in str(g.border_subtitle)
        # and nothing else in the transcript yet
        assert list(app.chat.transcript.children) == [g]


async def test_it_goes_when_the_first_turn_starts_and_is_back_on_new_chat() -> None:
    # The first token comes 3 s after the send: the check below must see the turn started and not yet
    # ended, and on a loaded 2-core CI machine the prompt's widget took more than the 0.4 s this once was.
    app = ChatApp(LOCAL_SPEC, factory=factory_for(local_backend(first_ms=3000, token_ms=5, visible=5)))
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert greeting(app) is not None
        await send(pilot, app, "hello")
        await wait_until(pilot, lambda: len(app.query(UserMessage)) == 1)
        assert greeting(app) is None and not app.chat.session.records  # gone as the turn starts, not when it ends
        await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == 1)
        assert greeting(app) is None
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: not app.query(UserMessage))
        g = greeting(app)
        assert g is not None and "Example-Chat-1B" in g.plain
        assert list(app.chat.transcript.children) == [g]


async def test_a_model_switch_before_the_first_prompt_updates_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-never-shown")
    app = ChatApp(LOCAL_SPEC, factory=factory_for(TimedBackend()))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen))
        app.screen.query_one("#model").value = "openai:gpt-x"
        await pilot.click("#apply")
        await wait_until(pilot, lambda: not isinstance(app.screen, SettingsScreen))
        await pilot.pause()
        text = greeting(app).plain  # type: ignore[union-attr]
        assert "openai:gpt-x" in text and "Example-Chat" not in text
        assert "OpenAI Chat Completions" in text and "key from $OPENAI_API_KEY" in text
        assert "ttft -m local" in text  # the way back to a model with no key
        screen = app.export_screenshot()
        assert "sk-test-never-shown" not in screen and "sk-test-never-shown" not in text


async def test_a_missing_key_is_said_before_the_first_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    app = ChatApp("anthropic:claude-x", factory=factory_for(TimedBackend()))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        text = greeting(app).plain  # type: ignore[union-attr]
        assert "ANTHROPIC_API_KEY is not set" in text


async def test_brackets_in_a_model_name_are_drawn_as_typed() -> None:
    app = ChatApp(
        "compat:[usage]-7b", base_url="http://127.0.0.1:9/v1", factory=factory_for(TimedBackend(model="[usage]-7b"))
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = app.export_screenshot().replace("&#160;", " ")
        assert "compat:[usage]-7b" in screen  # markup would have eaten "[usage]"
        assert "compat · [usage]-7b" in screen  # the header too


async def test_a_resumed_session_with_turns_has_no_greeting() -> None:
    app = ChatApp(LOCAL_SPEC, factory=factory_for(local_backend(first_ms=5, token_ms=1, visible=3)))
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, app, "first")
        await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == 1)
        path = app.chat.session.log.path
    app2 = ChatApp(LOCAL_SPEC, factory=factory_for(TimedBackend()), resume=path)
    async with app2.run_test(size=(100, 30)) as pilot:
        await wait_until(pilot, lambda: len(app2.query(UserMessage)) == 1)
        assert greeting(app2) is None


async def test_the_header_shortens_a_long_model_name_to_fit() -> None:
    long = "local:/models/" + "Very-Long-Model-Name-" * 4 + "Q4_K_M.gguf"
    app = ChatApp(long, factory=factory_for(TimedBackend()), session_id="20260101-120000-snap")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        header = str(app.query_one("#header").content)
        assert len(header) <= 80 - 2 and header.endswith("20260101-120000-snap")  # the session id still shows
        assert "local · Very-Long-Model-Name-" in header and "…" in header


async def test_the_greeting_names_the_address_openai_base_url_sends_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK follows ``OPENAI_BASE_URL``: the greeting says that address, never api.openai.com (issue 39,
    item 9), and masks its credentials as every base URL is masked."""
    monkeypatch.setenv("OPENAI_BASE_URL", "http://user:SECRETPW@127.0.0.1:9/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-real")
    backend = TimedBackend(model="gpt-x", first_ms=5, token_ms=1, visible=3)
    backend.provider = "openai"  # a backend that names no address: the resolved target's is shown
    app = ChatApp("openai:gpt-x", factory=factory_for(backend))
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.pause()
        g = greeting(app)
        assert g is not None
        text = g.plain
        assert "http://***@127.0.0.1:9/v1" in text and "api.openai.com" not in text, text
        assert "SECRETPW" not in text
