"""tui.screens.settings: the settings screen's labels stay beside their own fields."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Label
from ttft.tui.chat.app import ChatApp
from ttft.tui.screens.settings import SettingsScreen

from tests.support.tui_support import TimedBackend, factory_for, wait_until

FIELDS = {
    "base URL": "#base_url",
    "reasoning effort": "#effort",
    "thinking budget": "#budget",
    "max output tokens": "#max_tokens",
    "temperature": "#temperature",
    "stream": "#stream",
    "local engine": "#gpu_layers",
}
LOCAL_ROW = ("#gpu_layers", "#threads", "#flash_attn")  # one row, beside that label


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


async def test_every_label_is_left_of_its_field_on_the_same_row() -> None:
    # The model list is hidden until asked for; it keeps its grid cell, or "base URL" would move into
    # the widgets' column and each later field would sit under the previous label.
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=5, token_ms=1, reasoning=0, visible=3)))
    async with app.run_test(size=(140, 48)) as pilot:
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen))
        await pilot.pause()
        screen = app.screen
        labels = {str(lab.content): lab for lab in screen.query(Label)}
        model_input = screen.query_one("#model").region
        for name, selector in FIELDS.items():
            label, field = labels[name].region, screen.query_one(selector).region
            assert label.x < model_input.x <= field.x, (name, label, field)
            assert field.y <= label.y < field.y + field.height, (name, label, field)
        row = [screen.query_one(sel).region for sel in LOCAL_ROW]
        assert len({r.y for r in row}) == 1 and row[0].x < row[1].x < row[2].x, row


async def test_the_local_engines_knobs_are_set_here_and_a_change_loads_the_model_again() -> None:
    """F2's GPU layers, threads and flash attention become the settings' extra (what the engine loads
    with, recorded with each turn), other extra keys kept; a change warms the backend up again at once,
    which for a local model is its load where it is now asked to run."""
    from textual.widgets import Input, Select
    from ttft.telemetry.settings import TurnSettings

    backend = TimedBackend(first_ms=5, token_ms=1, reasoning=0, visible=3)
    warmed: list[dict | None] = []

    async def warm_up(extra: dict | None = None) -> None:
        warmed.append(extra)

    backend.warm_up = warm_up  # type: ignore[attr-defined]
    settings = TurnSettings(extra={"top_k": 5, "n_threads": 1})
    app = ChatApp("fake:timed", settings=settings, factory=factory_for(backend), warm_up=True)
    async with app.run_test(size=(140, 48)) as pilot:
        await wait_until(pilot, lambda: len(warmed) == 1)
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen))
        screen = app.screen
        assert screen.query_one("#threads", Input).value == "1"
        screen.query_one("#gpu_layers", Input).value = "0"
        screen.query_one("#threads", Input).value = "2"
        screen.query_one("#flash_attn", Select).value = "off"
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not isinstance(app.screen, SettingsScreen))
        extra = {"top_k": 5, "n_gpu_layers": 0, "n_threads": 2, "flash_attn": "off"}
        assert app.chat.session.settings.extra == extra
        await wait_until(pilot, lambda: len(warmed) == 2)
        assert warmed[1] == extra  # the load follows the new settings
        # a bad value is said on the screen and applies nothing
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen))
        app.screen.query_one("#gpu_layers", Input).value = "-5"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, SettingsScreen)
        assert "GPU layers must be 0 or more, or -1" in str(app.screen.query_one("#settings-error").render())
        await pilot.press("escape")
        # the same knobs again: no reload
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen))
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: not isinstance(app.screen, SettingsScreen))
        await pilot.pause(0.2)
        assert len(warmed) == 2
