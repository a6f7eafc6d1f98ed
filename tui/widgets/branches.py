"""Two branches of the conversation side by side: the turns from an edited prompt on, as first sent
and as sent again, figure by figure (each turn's own, from its record: nothing is computed here)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from ...telemetry.cost import fmt_usd
from ...telemetry.duration import DASH, fmt_ms
from ...telemetry.record import TurnRecord
from ..format import fmt_num, turn_label, visible_controls

PROMPT_W = 26


def _prompt(rec: TurnRecord) -> str:
    first = next((ln for ln in rec.prompt.split("\n") if ln.strip()), "")
    shown = visible_controls(first)
    return shown if len(shown) <= PROMPT_W else shown[: PROMPT_W - 1] + "…"


def _cells(rec: TurnRecord | None) -> list[str]:
    if rec is None:
        return ["", "", "", "", "", "", ""]
    m, tok = rec.metrics, rec.tokens
    return [
        _prompt(rec),
        rec.status,
        fmt_ms(m.ttft_ms),
        fmt_ms(m.ttfvt_ms),
        fmt_ms(m.e2e_ms),
        DASH if tok.output is None else fmt_num(tok.output),
        fmt_usd(rec.cost.total_usd if rec.cost is not None else None),
    ]


ROWS = ("prompt", "status", "TTFT", "TTFVT", "E2E", "tokens out", "cost")


def branch_table(old: Sequence[TurnRecord], new: Sequence[TurnRecord]) -> Table:
    """A table of the two branches, one block of rows per step from the edit on."""
    t = Table.grid(padding=(0, 2))
    t.add_column(style="dim", no_wrap=True)
    t.add_column(no_wrap=True)
    t.add_column(no_wrap=True)
    for k in range(max(len(old), len(new))):
        a = old[k] if k < len(old) else None
        b = new[k] if k < len(new) else None
        heads = [Text(turn_label(r.turn_index, "turn "), style="bold") if r else Text("") for r in (a, b)]
        t.add_row(Text("was / now" if k == 0 else ""), *heads)
        for name, x, y in zip(ROWS, _cells(a), _cells(b), strict=True):
            t.add_row(name, Text(x), Text(y))
    return t


class BranchView(Static):
    """The pane's branches section: empty (and hidden) until the chat has an edited prompt to show."""

    DEFAULT_CSS = """
    BranchView { height: auto; }
    BranchView.-empty { display: none; }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("", id=id, classes="-empty")

    def show(self, old: Sequence[TurnRecord], new: Sequence[TurnRecord]) -> None:
        empty = not old or not new
        if empty and self.has_class("-empty"):
            return  # nothing shown, nothing to show: no update (each is a layout pass of the screen)
        self.set_class(empty, "-empty")
        self.update("" if empty else branch_table(old, new))
