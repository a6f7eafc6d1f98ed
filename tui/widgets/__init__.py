"""Reusable chat widgets: each takes data (snapshots, turn records, render-lag summaries), none computes a metric."""

from tui.widgets.error_card import ErrorCard
from tui.widgets.history import HistoryPanel
from tui.widgets.telemetry_pane import TelemetryPane
from tui.widgets.timeline import TimelineView
from tui.widgets.transcript import AssistantMessage, CompactTurn, NoteMessage, Transcript, UserMessage

__all__ = [
    "AssistantMessage",
    "CompactTurn",
    "ErrorCard",
    "HistoryPanel",
    "NoteMessage",
    "TelemetryPane",
    "TimelineView",
    "Transcript",
    "UserMessage",
]
