"""Every turn as one bar, all drawn to one time scale, so turns compare at a glance.

The phases and marks come from ``telemetry.view.timeline``; this widget only maps ms to columns.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from rich.text import Text
from textual.geometry import Size
from textual.widget import Widget

from ...telemetry.duration import fmt_ms
from ...telemetry.view.timeline import Timeline

PHASE_STYLE = {
    "client": ("━", "cyan"),  # ttft's own delay: the user's submit -> the send
    "loading": ("▒", "blue"),
    "waiting": ("━", "yellow"),
    "network": ("━", "dark_orange"),  # dns + connect + tls + send (a wire-split wait)
    "server": ("━", "bright_yellow"),  # request written -> first token
    "reasoning": ("━", "magenta"),
    "streaming": ("━", "green"),
    "tool": ("━", "blue"),  # a tool call of a tool-using turn
    "approval": ("┅", "bright_black"),  # waiting for the person's answer before a call
    "ttft": ("━", "cyan"),  # ttft's own work between a tool-using turn's steps
    "app": ("━", "bright_cyan"),  # a proxied app's own time between its calls (ttft proxy's sessions)
}
MARK_STYLE = {"retry": ("↻", "bold red"), "stall": ("!", "bold red")}
END_MARK = {"error": ("✗", "bold red"), "cancelled": ("■", "bold yellow")}
LABEL_W = 4
AGENT_PHASES = ("tool", "approval", "ttft")  # a tool-using turn's; their legend's room only once one is drawn
APP_PHASES = ("app",)  # a proxied app's session's: room only once one is drawn (the chat's turns never have it)
# in the legend only when a turn has them
OPTIONAL_PHASES = ("client", "loading", "network", "server", *AGENT_PHASES, *APP_PHASES)
# (glyph, style, name, the gap after it when another entry follows on its line)
LEGEND: list[tuple[str, str, str, str]] = [
    *((ch * 2, style, name, "  ") for name, (ch, style) in PHASE_STYLE.items()),
    *((ch, style, name, " ") for name, (ch, style) in MARK_STYLE.items()),
]


class TimelineView(Widget):
    DEFAULT_CSS = """
    TimelineView { height: auto; }
    """

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.rows: list[tuple[str, Timeline]] = []
        self.max_rows = 12
        # Room kept for this many rows even before they exist: a live view whose rows appear one by
        # one keeps its height, so what is around it is not laid out again at each new row.
        self.reserve_rows = 0

    def set_rows(self, rows: Sequence[tuple[str, Timeline]]) -> None:
        rows = list(rows)[-self.max_rows :]
        before = self._height()
        self.rows = rows
        self.refresh(layout=self._height() != before)

    def _height(self, width: int | None = None) -> int:
        n = max(len(self.rows), min(self.reserve_rows, self.max_rows))
        if not n:
            return 1
        # Room for the whole legend, wrapped, whichever phases show: a phase seen for the first time
        # (network, client) then changes no height, so nothing around is laid out again mid-turn.
        drawn = {seg.phase for _, tl in self.rows for seg in tl.segments}
        hidden = set() if drawn & set(AGENT_PHASES) else set(AGENT_PHASES)
        hidden |= set() if drawn & set(APP_PHASES) else set(APP_PHASES)
        entries = [e for e in LEGEND if e[2] not in hidden]
        legend = _pack(entries, (self.size.width if width is None else width) - LABEL_W - 1)
        return n + 1 + len(legend)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return self._height(width)

    def render(self) -> Text:
        if not self.rows:
            return Text("no turns yet", style="dim")
        width = max(10, self.size.width - LABEL_W - 1)
        start = min(tl.start_ms for _, tl in self.rows)
        end = max(tl.end_ms for _, tl in self.rows)
        span = max(end - start, 1.0)

        def col(ms: float) -> int:
            return min(width - 1, max(0, int((ms - start) / span * width)))

        out = Text()
        for label, tl in self.rows:
            cells: list[tuple[str, str]] = [(" ", "")] * width
            for seg in tl.segments:
                ch, style = PHASE_STYLE.get(seg.phase, ("━", "white"))
                a, b = col(seg.start_ms), col(seg.end_ms)
                for i in range(a, max(a + 1, b)):
                    cells[i] = (ch, style)
            for m in tl.markers:
                cells[col(m.at_ms)] = MARK_STYLE.get(m.kind, ("?", "red"))
            if tl.status in END_MARK:
                cells[col(tl.end_ms)] = END_MARK[tl.status]
            out.append(f"{label:>{LABEL_W}} ", style="dim")
            for (ch, style), run in itertools.groupby(cells):  # one span per run, not per cell
                out.append(ch * len(list(run)), style=style)
            out.append("\n")
        out.append(" " * (LABEL_W + 1))
        left, right = fmt_ms(start if start < 0 else 0.0), fmt_ms(end)
        out.append(left + " " * max(1, width - len(left) - len(right)) + right + "\n", style="dim")
        seen = {seg.phase for _, tl in self.rows for seg in tl.segments}
        items = [e for e in LEGEND if e[2] not in OPTIONAL_PHASES or e[2] in seen]  # only the phases a turn has
        for n, line in enumerate(_pack(items, width)):
            out.append("\n" * (n > 0) + " " * (LABEL_W + 1))
            for k, (glyph, style, name, gap) in enumerate(line):
                out.append(glyph, style=style)
                out.append(f" {name}{gap if k < len(line) - 1 else ''}", style="dim")
        return out


def _pack(items: Sequence[tuple[str, str, str, str]], width: int) -> list[list[tuple[str, str, str, str]]]:
    """The legend's entries in lines of at most ``width`` cells (one entry a line at the least)."""
    lines: list[list[tuple[str, str, str, str]]] = [[]]
    used = 0
    for item in items:
        glyph, _, name, gap = item
        size = len(glyph) + 1 + len(name)
        if lines[-1] and used + size > width:
            lines.append([])
            used = 0
        lines[-1].append(item)
        used += size + len(gap)
    return lines
