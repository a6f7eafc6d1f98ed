"""Code blocks in an answer, each with a header that copies it: a click, or the palette's "Copy code block N".

:func:`code_blocks` finds an answer's fenced (and indented) code blocks with markdown-it, the parser
Textual's Markdown widget uses, so the N-th block found is the N-th block drawn. :class:`CodeMarkdown`
draws an answer with a header line above each block (``▌ python · 12 lines · code 3 · click to
copy``); a click on it puts the block's code on the clipboard through Textual's
``copy_to_clipboard`` (OSC 52: the terminal's clipboard, over SSH too). The code copied is the
model's text exactly as it came (the screen shows control characters in a visible form; the
clipboard gets what the model wrote).

Blocks are numbered through the chat's transcript: the screen gives each answer the number of its
first block.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from markdown_it import MarkdownIt
from markdown_it.token import Token
from rich.text import Text
from textual.app import ComposeResult
from textual.events import Click
from textual.message import Message
from textual.widgets import Label, Markdown
from textual.widgets._markdown import MarkdownBlock, MarkdownFence

from ..format import visible_controls


@dataclass(frozen=True, slots=True)
class CodeBlock:
    language: str  # the fence's info word ("" when none)
    code: str  # the block's text, its last line break dropped

    @property
    def lines(self) -> int:
        return self.code.count("\n") + 1 if self.code else 0

    def describe(self) -> str:
        """``python, 12 lines``: what the palette and the notice say of the block."""
        n = self.lines
        return f"{self.language or 'text'}, {n} line{'s' if n != 1 else ''}"


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    return MarkdownIt("gfm-like")  # Textual's Markdown widget's default parser


def _block(token: Token) -> CodeBlock:
    code = token.content[:-1] if token.content.endswith("\n") else token.content
    return CodeBlock((token.info or "").strip().split(" ")[0], code)


@lru_cache(maxsize=256)
def code_blocks(markdown: str) -> tuple[CodeBlock, ...]:
    """The code blocks of ``markdown``, in order (the answers of a long chat are parsed once each)."""
    if "```" not in markdown and "~~~" not in markdown and "    " not in markdown and "\t" not in markdown:
        return ()
    return tuple(_block(t) for t in _parser().parse(markdown) if t.type in ("fence", "code_block"))


class CodeFence(MarkdownFence):
    """A code block with a header line that copies it."""

    DEFAULT_CSS = """
    CodeFence > .code-header {
        width: 1fr;
        padding: 0 2;
        color: $text-muted;
        background: $boost;
    }
    CodeFence > .code-header:hover { color: $text; text-style: bold; }
    """

    class CopyAsked(Message):
        """A click on a block's header: the screen copies block ``number``."""

        def __init__(self, number: int | None, block: CodeBlock) -> None:
            super().__init__()
            self.number = number
            self.block = block

    def __init__(self, markdown: Markdown, token: Token, code: str) -> None:
        super().__init__(markdown, token, code)
        self.block = _block(token)
        self.number: int | None = None
        self.header = Label(self._title(), classes="code-header")

    def _title(self) -> Text:
        number = f" · code {self.number}" if self.number is not None else ""
        return Text(f"▌ {visible_controls(self.block.describe())}{number} · click to copy")

    def set_number(self, number: int) -> None:
        self.number = number
        self.header.update(self._title())

    def compose(self) -> ComposeResult:
        yield self.header
        yield from super().compose()

    def on_click(self, event: Click) -> None:
        if event.widget is self.header:
            event.stop()
            self.post_message(self.CopyAsked(self.number, self.block))


class CodeMarkdown(Markdown):
    """Markdown whose code blocks have copy headers (:class:`CodeFence`), numbered from ``first``."""

    BLOCKS: dict[str, type[MarkdownBlock]] = {  # noqa: RUF012 - Textual declares it an instance attribute
        **Markdown.BLOCKS,
        "fence": CodeFence,
        "code_block": CodeFence,
    }

    def number_blocks(self, first: int) -> int:
        """Number the blocks drawn from ``first``; the number after the last one."""
        n = first
        for fence in self.query(CodeFence):
            fence.set_number(n)
            n += 1
        return n
