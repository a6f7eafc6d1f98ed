"""The code blocks of the answers in the chat's transcript, numbered from 1 in the order drawn.

Each drawn answer adds its blocks with its turn (None: another log's, a compare pane's); the palette
and a block's header copy them by number, and a new branch cuts those of the turns it replaces.
"""

from __future__ import annotations

from ..widgets.code_blocks import CodeBlock, code_blocks


class DrawnBlocks:
    """Each drawn answer's turn and code blocks, in transcript order: they number them."""

    def __init__(self) -> None:
        self.drawn: list[tuple[int | None, tuple[CodeBlock, ...]]] = []

    def add(self, turn_index: int | None, answer: str) -> None:
        self.drawn.append((turn_index, code_blocks(answer)))

    def next_number(self) -> int:
        """The number the next drawn answer's first code block gets."""
        return 1 + sum(len(b) for _, b in self.drawn)

    def numbered(self) -> list[tuple[int, CodeBlock]]:
        """Every code block of the answers in the transcript, numbered from 1 in the order drawn."""
        return list(enumerate((b for _, blocks in self.drawn for b in blocks), start=1))

    def get(self, number: int) -> CodeBlock | None:
        return dict(self.numbered()).get(number)

    def titles(self) -> list[tuple[int, str]]:
        """Each block's number and what it holds (its language and size), for the palette."""
        return [(n, b.describe()) for n, b in self.numbered()]

    def cut_from(self, turn_index: int) -> None:
        """The blocks of turn ``turn_index`` and those drawn after it go (a new branch in their place)."""
        cut = next((k for k, (i, _) in enumerate(self.drawn) if i == turn_index), len(self.drawn))
        del self.drawn[cut:]

    def clear(self) -> None:
        self.drawn = []
