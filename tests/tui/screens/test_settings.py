"""tui.screens.settings: the settings screen's labels stay beside their own fields."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import Label

from tests.support.tui_support import TimedBackend, factory_for, wait_until
from tui.chat.app import ChatApp
from tui.screens.settings import SettingsScreen

FIELDS = {
    "base URL": "#base_url",
    "reasoning effort": "#effort",
    "thinking budget": "#budget",
    "max output tokens": "#max_tokens",
    "temperature": "#temperature",
    "stream": "#stream",
}


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
