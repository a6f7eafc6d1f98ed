"""The live view's calls table: the newest :data:`MAX_ROWS` calls that pass the filter, one row each.

An app watched for hours makes tens of thousands of calls; a table of them all would cost more to
paint and to move in with every call. So the table keeps at most ``max_rows`` rows, the newest calls
the filter passes, and drops the oldest from its top as new ones come: one at a time while few (each
removal costs ~1 ms at 2,000 rows), else (a burst) it is filled again from the newest (~26 ms). :attr:`CallRows.hidden`
says how many older rows are off the table, for the view to say so. The app keeps every call: its
header's count, the sessions, the export and the summary still cover them all.

The filter is one text: a call passes when its client or its model holds it, whatever the case. A
call's cells are made once (masking its outside text costs ~25 µs a cell) and kept, so a new filter
fills the table with no text made again.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

from textual.widgets import DataTable
from textual.widgets.data_table import RowDoesNotExist

from ...backends.proxy.server import ProxiedCall
from .cells import client_of, model_of, row_cells

MAX_ROWS = 2_000  # named in docs/proxy.md
TRIM_ONE_BY_ONE = 24  # rows past the cap dropped one at a time; more (a burst) and the table is filled again

Shown = tuple[ProxiedCall, str]  # a call and the time it ended, as the table shows it


def filter_key(call: ProxiedCall) -> str:
    """What the filter looks in: the call's client and model, case folded (once a call, as it comes)."""
    return f"{client_of(call)}\n{model_of(call)}".casefold()


class CallRows:
    """The calls table's rows (see the module doc). ``calls`` and ``keys`` are the app's lists of every
    call and its :func:`filter_key`; a row's key is the call's place in them."""

    def __init__(self, table: DataTable[str], max_rows: int = MAX_ROWS) -> None:
        self.table = table
        self.max_rows = max_rows
        self.needle = ""  # the filter, case folded ("" passes every call)
        self.offered = 0  # calls[:offered] have been offered to the table
        self.passing = 0  # ... and this many of them pass the filter
        self.follow = True  # the cursor stays on the newest row until the person moves it up
        self._cells: dict[int, tuple[str, ...]] = {}  # each call's row, once made

    @property
    def hidden(self) -> int:
        """Calls the filter passes that are off the table: older than its newest ``max_rows``."""
        return self.passing - self.table.row_count

    def passes(self, key: str) -> bool:
        return self.needle in key

    def offer(self, calls: Sequence[Shown], keys: Sequence[str], upto: int | None = None) -> None:
        """The calls not yet offered (up to ``upto``) that the filter passes, as rows; the oldest rows
        past the cap dropped (one repaint)."""
        end = len(calls) if upto is None else upto
        new = [i for i in range(self.offered, end) if self.passes(keys[i])]
        self.offered = end
        self.passing += len(new)
        if not new:
            return
        keep = self._cursor_key()
        for i in new[-self.max_rows :]:
            self.table.add_row(*self._row(calls, i), key=str(i))
        over = self.table.row_count - self.max_rows
        if over > TRIM_ONE_BY_ONE:
            self._fill(calls, keys)
        elif over > 0:
            for key in list(islice(self.table.rows, over)):
                self.table.remove_row(key)
        self._place_cursor(keep)

    def refilter(self, calls: Sequence[Shown], keys: Sequence[str], text: str) -> None:
        """The table again for a new filter ``text``: the calls offered so far, none of those that wait."""
        self.needle = text.strip().casefold()
        self.passing = sum(1 for k in keys[: self.offered] if self.passes(k))
        self.follow = True
        self._fill(calls, keys)
        self._place_cursor(None)

    def _fill(self, calls: Sequence[Shown], keys: Sequence[str]) -> None:
        """The newest ``max_rows`` offered calls the filter passes, in a table cleared first."""
        rows: list[int] = []
        for i in range(self.offered - 1, -1, -1):
            if self.passes(keys[i]):
                rows.append(i)
                if len(rows) == self.max_rows:
                    break
        self.table.clear()
        for i in reversed(rows):
            self.table.add_row(*self._row(calls, i), key=str(i))

    def _row(self, calls: Sequence[Shown], i: int) -> tuple[str, ...]:
        cells = self._cells.get(i)
        if cells is None:
            cells = self._cells[i] = row_cells(*calls[i])
        return cells

    def _cursor_key(self) -> str | None:
        if self.follow or not self.table.row_count:
            return None
        try:
            return self.table.coordinate_to_cell_key(self.table.cursor_coordinate).row_key.value
        except RowDoesNotExist:
            return None

    def _place_cursor(self, keep: str | None) -> None:
        """The cursor on the newest row while it follows; else on the row it was on (the top one, when
        that row was dropped)."""
        if not self.table.row_count:
            return
        if self.follow or keep is None:
            if self.follow:
                self.table.move_cursor(row=self.table.row_count - 1, animate=False)
            return
        try:
            row = self.table.get_row_index(keep)
        except RowDoesNotExist:
            row = 0
        if row != self.table.cursor_row:
            self.table.move_cursor(row=row, animate=False)
