"""Past sessions, newest first; Enter reopens one."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DataTable, Static

from ...telemetry.duration import fmt_ms
from ...telemetry.log.sessions import SessionInfo, list_sessions
from ...telemetry.log.turns import Skipped, sessions_dir
from ..format import short_model, short_spec_str, visible_controls

MODELS_W = 50  # the models column
MODEL_W = 24  # each model in it


class SessionsScreen(ModalScreen[Path | None]):
    BINDINGS: ClassVar[list[BindingType]] = [("escape", "close", "Close"), ("enter", "open", "Open")]
    DEFAULT_CSS = """
    SessionsScreen { align: center middle; }
    SessionsScreen > Vertical {
        width: 95%; max-width: 130; height: 85%;
        border: round $primary; background: $surface; padding: 0 1;
    }
    SessionsScreen DataTable { height: 1fr; }
    """

    def __init__(self, current: str | None = None) -> None:
        super().__init__()
        self.current = current
        self.sessions: list[SessionInfo] = []

    def compose(self) -> ComposeResult:
        with Vertical():
            title = Text.assemble(("Sessions", "bold"), f" in {sessions_dir()} · Enter reopens · Esc closes")
            yield Static(title, id="sessions-title")  # Text: a path with [brackets] is not markup
            table: DataTable[Any] = DataTable(cursor_type="row", zebra_stripes=True)
            table.add_columns("session", "started", "turns", "errors", "TTFT p50", "TPOT p50", "models")
            yield table

    def on_mount(self) -> None:
        skipped = Skipped()
        self.sessions = list_sessions(skipped=skipped)
        if skipped:  # the other sessions are listed as usual; what could not be read is said once
            self.notify(str(skipped.message()), severity="warning", timeout=10)
        table = self.query_one(DataTable)
        for s in self.sessions:  # ids and model names come from files: their control characters are shown
            models = [visible_controls(m) for m in s.models]
            table.add_row(
                visible_controls(s.session_id) + (" (this)" if s.session_id == self.current else ""),
                (s.started_at or "")[:16].replace("T", " "),
                str(s.turns),
                str(s.errors),
                fmt_ms(s.median_ttft_ms),
                fmt_ms(s.median_tpot_ms, digits=1),
                short_model(", ".join(short_spec_str(m, MODEL_W) for m in models), MODELS_W),
                key=str(s.path),
            )
        if not self.sessions:
            self.query_one("#sessions-title", Static).update(
                Text(f"No sessions logged yet in {sessions_dir()}. Esc closes.")
            )
        table.focus()

    def action_open(self) -> None:
        table = self.query_one(DataTable)
        if not self.sessions:
            return
        row_key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key
        self.dismiss(Path(str(row_key.value)))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        self.dismiss(Path(str(event.row_key.value)))

    def action_close(self) -> None:
        self.dismiss(None)
