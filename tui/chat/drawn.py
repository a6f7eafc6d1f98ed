"""What the chat keeps of the turns it drew: the answer being drawn, render lags and timelines.

The turn's painters write it (:class:`tui.chat.paint.TurnPainter`, and :class:`tui.chat.tools.ToolSteps`
for a tool turn's answer per model step), given it at construction; the screen only reads it, and asks it
to forget on a new branch or a new chat. They are never handed the screen's own attributes to write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...telemetry.record import TurnRecord
from ...telemetry.view.render import RenderLag
from ...telemetry.view.timeline import Timeline, turn_timeline
from ..format import turn_label
from ..widgets.transcript import AssistantMessage
from .branches import is_after


@dataclass
class DrawnTurns:
    """The drawn turns' state (see the module doc)."""

    answer: AssistantMessage | None = None  # the answer of the turn on screen, while it is drawn
    lag: RenderLag = field(default_factory=RenderLag)  # the turn on screen's render lag
    lag_by_turn: dict[int, dict[str, Any]] = field(default_factory=dict)  # each finished turn's lag summary
    timelines: list[tuple[str, Timeline]] = field(default_factory=list)  # each finished turn's, for the pane

    def cut_from(self, turn_index: int) -> None:
        """A new branch replaces ``turn_index``: its timeline row and those after it go."""
        self.timelines = [(label, t) for label, t in self.timelines if not is_after(label, turn_index)]

    def reset(self, records: Iterable[TurnRecord] = ()) -> None:
        """A new chat (no turns), or a session reopened (its turns' timelines, none of them drawn live)."""
        self.timelines = [(turn_label(r.turn_index), turn_timeline(r)) for r in records]
        self.lag_by_turn = {}
