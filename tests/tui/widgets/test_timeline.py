"""tui.widgets.timeline: the legend wraps in a narrow pane instead of losing its last entries."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult
from ttft.telemetry.view.timeline import Segment, Timeline
from ttft.tui.widgets.timeline import TimelineView


def _turn(phases: tuple[str, ...]) -> Timeline:
    segs = tuple(Segment(p, i * 10.0 - 10.0, i * 10.0) for i, p in enumerate(phases))
    return Timeline(segs, (), -10.0, 10.0 * len(phases), "ok")


class _One(App[None]):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.width = width

    def compose(self) -> ComposeResult:
        view = TimelineView(id="t")
        view.styles.width = self.width
        yield view


@pytest.mark.parametrize("width", [40, 62, 160])
async def test_legend_keeps_every_entry_within_the_width(width: int) -> None:
    # At the chat pane's 62 columns the legend needs a second line; cut instead after "server ━━",
    # it would leave reasoning, streaming, retry and stall, and so the bars' colours, unexplained.
    app = _One(width)
    async with app.run_test(size=(170, 30)) as pilot:
        view = app.query_one(TimelineView)
        view.set_rows([("#1", _turn(("client", "network", "server", "reasoning", "streaming")))])
        await pilot.pause()
        lines = [line.rstrip() for line in view.render().plain.splitlines()]
        legend = " ".join(lines[2:])
        for name in ("client", "network", "server", "reasoning", "streaming", "retry", "stall"):
            assert f" {name}" in legend, (width, lines)
        assert "loading" not in legend  # no turn had a load: left out
        assert all(len(line) <= width for line in lines), lines
        assert view.region.height >= len(lines), (view.region, lines)  # every legend line has room


async def test_a_proxied_apps_own_time_is_drawn_and_named_apart_from_ttfts() -> None:
    # A session ttft proxy rebuilt: its gaps between calls are the app's (``app``), never ttft's own.
    app = _One(80)
    async with app.run_test(size=(170, 30)) as pilot:
        view = app.query_one(TimelineView)
        view.set_rows([("s1", _turn(("server", "streaming", "tool", "app", "server", "streaming")))])
        await pilot.pause()
        text = view.render()
        legend = " ".join(line.rstrip() for line in text.plain.splitlines()[2:])
        assert " app" in legend and " tool" in legend and " ttft" not in legend
        bar = [span for span in text.spans if span.style == "bright_cyan"]
        assert bar, "the app's time has its own colour"
        view.set_rows([("#1", _turn(("server", "streaming", "tool", "ttft", "streaming")))])
        await pilot.pause()
        chat = " ".join(line.rstrip() for line in view.render().plain.splitlines()[2:])
        assert " ttft" in chat and " app" not in chat  # the chat's tool turn: ttft's own time, no app
