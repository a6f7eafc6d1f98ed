"""Pasted text on its way into the prompt box: its line ends made one kind, and a long paste folded.

A terminal sends a paste's line breaks as CR (the Enter key's byte), a file copied from Windows as
CRLF: both become LF, the one line end the prompt sends. Every other character is kept as it is:
tabs, blank lines, non-ASCII text, and control characters (the screen shows those in a visible form;
the model gets them exact).

A paste longer than :data:`FOLD_LINES` lines or :data:`FOLD_CHARS` characters is shown folded, as one
marker in the box (``[pasted 212 lines, 9.1 KB: ctrl+e to expand]``), and sent whole: the
:class:`Folds` of a box map each marker to its text, and :meth:`Folds.expand` puts the texts back
where their markers stand. A paste that holds a character the box cannot hold as it is (a line or
paragraph separator, a form feed: its document splits lines on those) is always folded, and stays
so, so that it too reaches the model exact. So does a paste with a line longer than :data:`MAX_LINE`
characters: the box lays out and paints an edited line whole on every key (wrapped, a 5 MB line took
2.2 s per keystroke), so such a line is never put in it; the marker stands for it, as editable as any
(typed around, deleted whole, undone), and it is sent exact.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FOLD_LINES = 12  # more lines than this fill the box past a third of a 40-row terminal: fold them
FOLD_CHARS = 2000
# The longest line ctrl+e puts in the box: each key re-wraps and re-paints the line it edits, ~0.5 ms per
# 1,000 characters (tests/benchmarks/prompt_long_line.py); up to here a key costs what it does on a short line.
MAX_LINE = 20_000
# Line breaks Python's str.splitlines() knows besides \n: a TextArea document would make them \n.
_FOREIGN_BREAKS = re.compile("[\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")
_MARKER = re.compile(r"\[pasted (?:#\d+ )?\d+ lines?, [\d.]+ (?:bytes|KB|MB): ctrl\+e to expand\]")


def normalize(text: str) -> str:
    """A paste's text with CRLF and lone CR line ends as LF; nothing else changed."""
    return text.replace("\r\n", "\n").replace("\r", "\n") if "\r" in text else text


def fmt_bytes(n: int) -> str:
    """812 bytes, 9.1 KB, 1.2 MB (decimal units, one decimal place)."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:.1f} MB"
    return f"{n / 1000:.1f} KB" if n >= 1000 else f"{n} bytes"


def box_safe(text: str) -> bool:
    """Whether the prompt box holds ``text`` exactly (no line break other than LF inside)."""
    return "\r" not in text and not _FOREIGN_BREAKS.search(text)


def kept_folded(text: str) -> str | None:
    """Why ctrl+e leaves ``text`` folded (a clause: "it holds ..."), or None where the box can hold it."""
    if not box_safe(text):
        return "it holds characters the box cannot show as they are (a form feed, a line or paragraph separator)"
    longest = max(map(len, text.split("\n")))
    if longest > MAX_LINE:
        return f"it has a line of {longest:,} characters (the box edits lines of up to {MAX_LINE:,})"
    return None


def should_fold(text: str) -> bool:
    return text.count("\n") + 1 > FOLD_LINES or len(text) > FOLD_CHARS or not box_safe(text)


@dataclass
class Folds:
    """The folded pastes of one prompt box: marker -> the text it stands for."""

    texts: dict[str, str] = field(default_factory=dict)

    def fold(self, text: str) -> str:
        """The marker for ``text`` (a new one, unless this very text is folded already)."""
        for marker, folded in self.texts.items():
            if folded == text:
                return marker
        lines = text.count("\n") + (0 if text.endswith("\n") else 1)
        size = f"{lines} line{'s' if lines != 1 else ''}, {fmt_bytes(len(text.encode('utf-8', 'surrogatepass')))}"
        marker = f"[pasted {size}: ctrl+e to expand]"
        n = 1
        while marker in self.texts:
            n += 1
            marker = f"[pasted #{n} {size}: ctrl+e to expand]"
        self.texts[marker] = text
        return marker

    def spans(self, line: str) -> list[tuple[int, int]]:
        """Where this box's markers stand in one line of the box: (start, end) columns."""
        if not self.texts or "[pasted" not in line:
            return []
        return [m.span() for m in _MARKER.finditer(line) if m.group() in self.texts]

    def expand(self, text: str) -> str:
        """``text`` with every marker of this box replaced by the paste it stands for."""
        if not self.texts or "[pasted" not in text:
            return text
        return _MARKER.sub(lambda m: self.texts.get(m.group(), m.group()), text)

    def clear(self) -> None:
        self.texts.clear()
