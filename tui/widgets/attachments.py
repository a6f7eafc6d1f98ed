"""The files attached to the next prompt, listed above the prompt box until it is sent.

One line per file: its number, name, size and type, and a ✕; a click on the line removes the file
(``/detach N`` does the same). The list takes no room when nothing is attached.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.containers import Vertical
from textual.events import Click
from textual.message import Message
from textual.widgets import Static

from ...backends.attachments import fmt_size
from ..format import short_model, visible_controls

NAME_W = 40


class AttachedFile(Static):
    """One pending file's line."""

    def __init__(self, index: int, name: str, size: int, media_type: str) -> None:
        t = Text()
        t.append("✕ ", style="bold red")
        t.append(f"{index + 1} ", style="bold")
        t.append(visible_controls(short_model(name, NAME_W)))  # a file's name is outside text
        t.append(f"  {fmt_size(size)} · {media_type}", style="dim")
        super().__init__(t, classes="attached-file")
        self.index = index

    def on_click(self, event: Click) -> None:
        event.stop()
        self.post_message(AttachmentTray.Removed(self.index))


class AttachmentTray(Vertical):
    """``(name, bytes, media type)`` of each pending file, one line each."""

    DEFAULT_CSS = """
    AttachmentTray { height: auto; padding: 0 1; layout: vertical; }
    AttachmentTray.-empty { display: none; }
    AttachmentTray .attached-file { height: 1; color: $text-muted; }
    AttachmentTray .attached-file:hover { color: $text; }
    AttachmentTray .attach-help { height: 1; color: $text-muted; text-style: italic; }
    """

    class Removed(Message):
        """A click on a file's line: remove pending file ``index`` (0-based)."""

        def __init__(self, index: int) -> None:
            super().__init__()
            self.index = index

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="-empty")
        self.files: tuple[tuple[str, int, str], ...] = ()

    async def show(self, files: Sequence[tuple[str, int, str]]) -> None:
        files = tuple(files)
        if files == self.files:
            return
        self.files = files
        await self.remove_children()
        if files:
            n = len(files)
            help_line = Static(
                f"{n} file{'s' if n != 1 else ''} go with the next prompt · a click or /detach N removes one",
                classes="attach-help",
            )
            await self.mount_all([*(AttachedFile(k, *f) for k, f in enumerate(files)), help_line])
        self.set_class(not files, "-empty")
