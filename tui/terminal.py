"""What reaches the terminal from the chat and compare screens: text, never control sequences.

Two layers (see :func:`tui.format.visible_controls` for why and what is shown):

- every widget that shows outside text (answers, reasoning, prompts, error cards, the
  greeting, the pane, the history) makes its control characters visible as it builds its
  content, so they take their room in the layout like any other character;
- :class:`DropControls`, a line filter on the whole app, drops any control character (and any
  bidi embedding, override or isolate) still in a line as it is painted: a place that was missed
  (a notification, a list of model names from a server, a Textual widget's own text) may show
  less, but never drives the terminal. Control characters take no cells, so dropping them
  leaves every line's layout as it was.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rich.segment import Segment
from rich.text import Span, Text
from textual.color import Color
from textual.filter import LineFilter

from .format import visible_controls

# newline and tab too (in a painted line they move the cursor), and the bidi controls (they take no cell)
_ANY_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible_text(text: Text) -> Text:
    """A Rich ``Text`` with :func:`visible_controls` applied, its styles kept on the same characters.

    Rich has already dropped BEL, BS, VT, FF and CR from any ``Text`` it built (not sent, but not
    shown either); where those should show too, build the ``Text`` from ``visible_controls(str)``.
    """
    plain = text.plain
    shown = visible_controls(plain)
    if shown is plain:
        return text
    # where each old offset lands once the characters before it are shown (C1 takes 6 characters)
    at = [0] * (len(plain) + 1)
    for i, ch in enumerate(plain):
        at[i + 1] = at[i] + len(visible_controls(ch))
    out = Text(shown, style=text.style, justify=text.justify, overflow=text.overflow, no_wrap=text.no_wrap)
    out.end, out.tab_size = text.end, text.tab_size
    out.spans = [Span(at[s.start], at[min(s.end, len(plain))], s.style) for s in text.spans]
    return out


class DropControls(LineFilter):
    """Removes control characters from every painted segment (cursor-moving ``control`` segments
    are Textual's own and kept). Strips cache their filtered copy, so a line is filtered once."""

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        if not any(s.control is None and _ANY_CONTROL.search(s.text) for s in segments):
            return segments
        out: list[Segment] = []
        for s in segments:
            if s.control is None:
                s = Segment(_ANY_CONTROL.sub("", s.text), s.style)
                if not s.text:  # an empty segment is invalid in a strip
                    continue
            out.append(s)
        return out


DROP_CONTROLS = DropControls()


def with_drop_controls(filters: Sequence[LineFilter]) -> list[LineFilter]:
    """An app's line filters with :data:`DROP_CONTROLS` last (for ``App.get_line_filters``)."""
    return [*filters, DROP_CONTROLS]
