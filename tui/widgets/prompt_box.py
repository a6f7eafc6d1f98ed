"""The multi-line prompt box of the chat and of compare: where a person types, pastes and recalls.

Enter sends (``PromptBox.Submitted``, stamped as it is handled: what the user waits for starts
there). ctrl+j and alt+enter insert a line break, and so does shift+enter where the terminal reports
it apart from Enter (terminals speaking the kitty keyboard protocol: kitty, WezTerm, foot, Ghostty,
iTerm2 with CSI u; not tmux, nor xterm by default). The box grows with its text to a third of the
screen, then scrolls.

A bracketed paste keeps every character (:mod:`tui.widgets.pastes`: CRLF and CR become LF); a long
one shows as one marker and is sent whole; ctrl+e unfolds it (elsewhere ctrl+e is the end of the
line, as in a shell), unless the box cannot hold it as it is or a line of it is too long to edit
(:func:`tui.widgets.pastes.kept_folded`). A marker is one piece: an edit that reaches into it takes
it whole (undo, ctrl+z, brings it back). A paste is only ever text, escapes included: the terminal's
bytes are read so (:mod:`tui.driver`). Up on the box's first line and Down on its last walk the prompt history
(:class:`telemetry.log.prompt_history.PromptHistory`), newest first; what was being typed comes
back past the newest. Nothing here clears the box but :meth:`PromptBox.take` (the screen, once it
sends the prompt): a prompt that cannot go now (a turn in flight) stays.

Tab completes when the owner gives a ``completer`` that has a completion for the text (the chat's
``/attach`` paths); otherwise it moves the focus, as in any form.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import ClassVar

from textual import _ansi_sequences, events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import TextArea
from textual.widgets.text_area import EditResult, Location

from ...telemetry.log.prompt_history import PromptHistory
from .pastes import Folds, kept_folded, normalize, should_fold

NEWLINE_KEYS = "ctrl+j,alt+enter,shift+enter"
NEWLINES = frozenset(NEWLINE_KEYS.split(","))


class _AltEnter(enum.Enum):
    KEY = "alt+enter"


# A terminal without the kitty protocol (xterm, tmux, most others) sends alt+enter as ESC CR, and
# Textual reads that as a plain Enter (its alt prefix only names printable keys): the box would send
# the prompt where the user asked for a new line. Read ESC CR as alt+enter (once, for the process).
_ansi_sequences.ANSI_SEQUENCES_KEYS.setdefault("\x1b\r", (_AltEnter.KEY,))  # type: ignore[attr-defined]
Completer = Callable[[str], str | None]  # the box's text -> the text completed, or None


def _text_area_keys() -> list[BindingType]:
    """TextArea's editing keys, less those the screens around a prompt box bind: the function keys it
    takes for selections (F6 a line, F7 all: compare's F6/F7) and ctrl+y for redo (the chat's copy)."""
    keep: list[BindingType] = []
    for b in TextArea.BINDINGS:
        binding = b if isinstance(b, Binding) else Binding(*b)
        keys = [k for k in binding.key.split(",") if k not in ("f6", "f7", "ctrl+y")]
        if keys:
            keep.append(dataclasses.replace(binding, key=",".join(keys)))
    return keep


class PromptBox(TextArea, inherit_bindings=False):
    """The prompt: several lines, folded pastes, history. ``value`` is what the box shows;
    :attr:`text_to_send` is that with every folded paste whole."""

    DEFAULT_CSS = """
    PromptBox {
        height: auto;
        min-height: 3;
        max-height: 33vh;
        border: tall $border-blurred;
        padding: 0 1;
        &:focus { border: tall $border; }
    }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        *_text_area_keys(),
        Binding("enter", "submit", "Send"),
        Binding(NEWLINE_KEYS, "newline", "Newline", key_display="ctrl+j"),
    ]

    class Submitted(Message):
        """Enter, with the box's text (folded pastes whole). The text stays in the box until the owner
        takes it (:meth:`PromptBox.take`)."""

        def __init__(self, box: PromptBox, text: str, submitted_ns: int) -> None:
            super().__init__()
            self.box = box
            self.text = text
            self.submitted_ns = submitted_ns  # Enter, on the events' clock

        @property
        def control(self) -> PromptBox:
            return self.box

    def __init__(
        self,
        clock: Callable[[], int],
        *,
        placeholder: str = "",
        prompts: PromptHistory | None = None,
        id: str | None = None,
    ) -> None:
        super().__init__(placeholder=placeholder, id=id, soft_wrap=True, show_line_numbers=False)
        self.clock = clock
        self.prompts = prompts
        self.folds = Folds()
        self.completer: Completer | None = None
        self._recall: list[str] | None = None  # the history as walked (newest first), while walking it
        self._recall_at = -1  # the entry shown, -1: the draft
        self._stash = ""  # what was being typed before the walk began
        self._shown = ""  # the text as the box itself last set it: a Changed with other text is the user's edit

    # --- the text --------------------------------------------------------------------
    @property
    def value(self) -> str:
        """The box's text as shown (a folded paste as its marker)."""
        return self.text

    @value.setter
    def value(self, text: str) -> None:
        self._set(normalize(text))

    @property
    def text_to_send(self) -> str:
        return self.folds.expand(self.text)

    def _set(self, text: str, *, undoable: bool = True) -> None:
        """Replace the whole text; as an edit (ctrl+z brings the old text back) unless not ``undoable``."""
        self._shown = text
        if undoable and self.is_mounted:
            self.replace(text, (0, 0), self.document.end, maintain_selection_offset=False)
        else:
            self.load_text(text)
        self.move_cursor(self.document.end)

    def insert_pasted(self, text: str) -> None:
        """Text pasted (or dropped in by the owner: a draft, a recalled prompt): folded when long."""
        text = normalize(text)
        if should_fold(text):
            text = self.folds.fold(text)
        start, end = self.selection
        if result := self._replace_via_keyboard(text, start, end):
            self.move_cursor(result.end_location)

    def load(self, text: str) -> None:
        """Put ``text`` in the box in place of what is there (undoable), a long text folded."""
        text = normalize(text)
        self._set(self.folds.fold(text) if should_fold(text) else text)

    def take(self) -> str:
        """The text to send, now taken out of the box (and kept in the history)."""
        text = self.text_to_send
        self._shown = ""
        self.load_text("")
        self.folds.clear()
        self._end_recall()
        if self.prompts is not None:
            self.prompts.add(text)
        return text

    def expand_folds(self) -> list[str]:
        """Unfold every folded paste the box can hold; why each of the others stays folded."""
        text, kept = self.text, []
        for marker, folded in self.folds.texts.items():
            if marker in text:
                if why := kept_folded(folded):
                    kept.append(why)
                else:
                    text = text.replace(marker, folded)
        if text != self.text:
            self._set(text)
        return kept

    # --- keys ------------------------------------------------------------------------
    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        handled = False
        # Handled here, as the key arrives, not by the bindings (which only show them in the footer): a
        # binding runs once the key has bubbled up to the app, after the keys typed behind it.
        if key == "enter":
            handled = True
            self.action_submit()
        elif key in NEWLINES:
            handled = True
            self.action_newline()
        elif key == "up" and self.selection.is_empty and self.cursor_location[0] == 0:
            handled = self._walk(+1)
        elif key == "down" and self.selection.is_empty and self.cursor_location[0] == self.document.line_count - 1:
            handled = self._walk(-1)
        elif key == "ctrl+e" and any(m in self.text for m in self.folds.texts):
            handled = True
            if kept := self.expand_folds():
                said = "; ".join(dict.fromkeys(kept))
                self.notify(f"A paste stays folded, and is sent exactly as pasted: {said}.", severity="warning")
        elif key == "tab" and self.completer is not None:
            done = self.completer(self.text)
            if done is not None:
                handled = True
                if done != self.text:
                    self._set(done)
        if handled:
            event.stop()
            event.prevent_default()  # not TextArea's own handling of the key

    async def _on_paste(self, event: events.Paste) -> None:
        event.prevent_default()  # TextArea's own paste would split lines on more than LF
        event.stop()
        if self.read_only:
            return
        self.insert_pasted(event.text)
        self.focus()

    def action_submit(self) -> None:
        submitted = self.clock()  # first: the stamp is the Enter, not what handling it cost
        text = self.text_to_send
        if text.strip():
            self.post_message(self.Submitted(self, text, submitted))

    def action_newline(self) -> None:
        start, end = self.selection
        if result := self._replace_via_keyboard("\n", start, end):
            self.move_cursor(result.end_location)

    # --- history ---------------------------------------------------------------------
    def _walk(self, step: int) -> bool:
        """One step back (+1) or forward (-1) in the history; False when there is nowhere to go."""
        if self.prompts is None:
            return False
        if self._recall is None:
            if step < 0:
                return False  # Down while not walking: the cursor just stays on the last line
            self.prompts.refresh()  # another chat's prompts too
            self._recall, self._recall_at, self._stash = self.prompts.recent(), -1, self.text
        at = self._recall_at + step
        if at >= len(self._recall) or at < -1:
            return False
        self._recall_at = at
        text = self._stash if at == -1 else self._recall[at]
        if at != -1 and should_fold(text):
            text = self.folds.fold(text)
        self._set(text)
        if step > 0:  # walking back: on the first line, so that Up goes on
            self.move_cursor((0, len(self.document[0])))
        if at == -1:
            self._end_recall()
        return True

    def _end_recall(self) -> None:
        self._recall, self._recall_at = None, -1

    def recall(self, text: str) -> None:
        """Put a prompt from the history (ctrl+r's pick) in the box, in place of the draft (undoable)."""
        self._end_recall()
        self.load(text)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if self.text != self._shown:
            self._end_recall()  # an edit makes the recalled prompt the draft

    # --- a folded paste is one piece ------------------------------------------------------
    def _marker_at(self, loc: Location) -> tuple[Location, Location] | None:
        row, col = loc
        if row >= self.document.line_count:
            return None
        for s, e in self.folds.spans(self.document[row]):
            if s < col < e:
                return (row, s), (row, e)
        return None

    def _whole(self, start: Location, end: Location) -> tuple[Location, Location]:
        start, end = sorted((start, end))
        if m := self._marker_at(start):
            start = m[0]
        if m := self._marker_at(end):
            end = m[1]
        return start, end

    def _replace_via_keyboard(self, insert: str, start: Location, end: Location) -> EditResult | None:
        if self.folds.texts:
            if start == end and (m := self._marker_at(start)):
                start = end = m[1]  # typing inside a marker: after it
            else:
                start, end = self._whole(start, end)
        return super()._replace_via_keyboard(insert, start, end)

    def _delete_via_keyboard(self, start: Location, end: Location) -> EditResult | None:
        if self.folds.texts:
            start, end = self._whole(start, end)
        return super()._delete_via_keyboard(start, end)
