"""Standard error as every command writes it: each write masked (:func:`telemetry.log.secrets.mask`).

Commands say many things on stderr, in many places (an error line, a warning, a notice, a crash's
one line, argparse's usage, a library's warning). Masking each where it is worded would miss the one
nobody foresaw, so the stream itself masks: ``tui.cli.main`` puts :class:`MaskedStream` in front of
``sys.stderr`` for the whole command. The chat's screen is not written through it (Textual draws on
its own handle of the terminal); its notices and error cards mask what they show.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from ..telemetry.log.secrets import mask


class MaskedStream:
    """A text stream whose writes are masked before they reach ``inner``; everything else is ``inner``'s."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        self.inner.write(mask(text) if isinstance(text, str) else text)
        return len(text)  # what the caller gave: print() and logging only check that it was taken

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, flush, encoding, buffer...
        return getattr(self.inner, name)


@contextlib.contextmanager
def masked_stderr() -> Iterator[None]:
    """``sys.stderr`` masked for the block, then as it was (a test's captured stream included)."""
    inner = sys.stderr
    if inner is None or isinstance(inner, MaskedStream):
        yield
        return
    wrapped = MaskedStream(inner)
    sys.stderr = wrapped
    try:
        yield
    finally:
        if sys.stderr is wrapped:  # a block that replaced it itself keeps its own
            sys.stderr = inner
