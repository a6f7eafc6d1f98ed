"""The chat's branches: a prompt edited and sent again, or the last answer regenerated, in its place.

Either way the conversation from that turn on becomes a new branch: the session's context goes back
to before it, the transcript makes room for it, and the old branch stays in the log and in the pane's
history. :class:`Branches` holds the edit in progress (which turn the box holds, the draft set aside
meanwhile) and the newest branch, which the telemetry pane shows beside the one it replaced. It
works on the chat's screen (:class:`BranchScreen`): the box, the transcript, the edit bar and the
pane; the screen drops its own rows for the turns cut (:meth:`BranchScreen.forget_from`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from rich.text import Text
from textual.widgets import Static

from ...backends.attachments import Attachment
from ...telemetry.log.branches import branch_pair, links
from ...telemetry.log.prompt_history import PromptHistory
from ...telemetry.record import TurnRecord
from ..format import turn_label, visible_controls
from ..session import ChatSession
from ..widgets.pastes import Folds
from ..widgets.telemetry_pane import TelemetryPane
from ..widgets.transcript import Transcript
from .attach import recheck
from .prompt import ChatPrompt

EDIT_TITLE_W = 60


class BranchScreen(Protocol):
    """What :class:`Branches` works on: the chat's screen."""

    session: ChatSession
    prompts: PromptHistory

    @property
    def prompt(self) -> ChatPrompt: ...
    @property
    def transcript(self) -> Transcript: ...
    @property
    def pane(self) -> TelemetryPane: ...
    @property
    def edit_bar(self) -> Static: ...
    def notify(self, message: str, *, severity: Any = ..., timeout: float | None = ..., markup: bool = ...) -> None: ...
    def call_after_refresh(self, callback: Callable[..., Any], *args: Any) -> bool: ...
    def attach_target(self) -> tuple[str, str] | None: ...
    def forget_from(self, turn_index: int, *, drawn: bool) -> None: ...


@dataclass(frozen=True, slots=True)
class Again:
    """A turn to send again in place of ``turn_index``: its prompt and the files it went with."""

    turn_index: int
    prompt: str
    files: tuple[Attachment, ...]


class Branches:
    """The edit in progress and the newest branch of the chat on ``screen``."""

    def __init__(self, screen: BranchScreen) -> None:
        self.screen = screen
        self.editing: int | None = None  # the turn whose prompt the box holds to send again (a new branch)
        self.stash: tuple[str, dict[str, str]] | None = None  # the draft set aside while editing
        self.newest: int | None = None  # the first turn of the newest branch, for the pane's side by side

    def editable_prompts(self) -> list[tuple[int, str]]:
        """(turn_index, first line) of each prompt on the chat's branch that can be edited and sent again."""
        out = []
        for r in self.screen.session.path:
            first = next((ln for ln in r.prompt.split("\n") if ln.strip()), "")
            out.append((r.turn_index, visible_controls(first[:EDIT_TITLE_W])))
        return out

    def edit(self, turn_index: int) -> None:
        """Put prompt ``turn_index`` in the box to change and send again: the conversation from there
        becomes a new branch. What the box held is set aside, and back once the edit is sent or dropped."""
        screen = self.screen
        rec = next((r for r in screen.session.path if r.turn_index == turn_index), None)
        if rec is None:
            screen.notify("That prompt is not on this branch of the chat any more.", severity="warning")
            return
        box = screen.prompt
        if self.editing is None:
            self.stash = (box.value, dict(box.folds.texts))
        self.editing = turn_index
        box.load(rec.prompt)
        box.focus()
        bar = screen.edit_bar
        label = turn_label(turn_index, "prompt ")
        bar.update(
            Text.assemble(
                (f"✎ editing {label}", "bold"),
                " · Enter sends it as a new branch from there (the old one stays in the log) · Esc stops editing",
            )
        )
        bar.remove_class("-empty")

    def stop_editing(self) -> None:
        """The edit dropped: the draft set aside comes back. An edit already changed stays in the box
        (never lost), and the draft goes to the prompt history (Up brings it back), as the user is told."""
        screen = self.screen
        turn, self.editing = self.editing, None
        screen.edit_bar.add_class("-empty")
        stash, self.stash = self.stash, None
        if stash is None or not (stash[0] or stash[1]):
            return
        box = screen.prompt
        before = next((r.prompt for r in screen.session.path if r.turn_index == turn), None)
        if box.text_to_send.strip() and box.text_to_send != before:
            screen.prompts.add(Folds(dict(stash[1])).expand(stash[0]))
            screen.notify("Your edit stays in the box; the draft you had is in the history (↑).")
            return
        box.folds.texts.update(stash[1])
        box.value = stash[0]

    def reset(self) -> None:
        """A new chat or another session: no edit, no branch to show."""
        self.newest = None
        if self.editing is not None:
            self.stop_editing()

    async def branch_from(self, turn_index: int) -> None:
        """The next turn replaces ``turn_index``: its context goes back to before it, and the transcript
        from there on makes room for the new branch (the old one stays in the log and the history)."""
        screen = self.screen
        sent_edit = self.editing is not None
        if screen.session.branch_at(turn_index) is None:
            return
        transcript = screen.transcript
        if await transcript.remove_from(turn_index):
            screen.forget_from(turn_index, drawn=True)
        else:  # older than the turns drawn: none of them stays on screen
            await transcript.remove_children()
            screen.forget_from(turn_index, drawn=False)
            label = turn_label(turn_index, "turn ")
            await transcript.add_note(f"a new branch from before {label}: the turns before it are in the log", "ok")
        if sent_edit:
            self.editing = None
            screen.edit_bar.add_class("-empty")
            screen.call_after_refresh(self._restore_stash)

    def _restore_stash(self) -> None:
        stash, self.stash = self.stash, None
        box = self.screen.prompt
        if stash is not None and (stash[0] or stash[1]) and not box.value:
            box.folds.texts.update(stash[1])
            box.value = stash[0]

    def again(self) -> Again | None:
        """The last turn, to regenerate: its prompt and files, checked against the model the next turn
        talks to; None when there is none or its files cannot go (the user is told)."""
        screen = self.screen
        last = screen.session.path[-1] if screen.session.path else None
        if last is None:
            screen.notify("Nothing to regenerate yet.")
            return None
        files = screen.session.files_sent_with(last.turn_index)
        refused = recheck(files, screen.attach_target())
        if refused is not None:  # the model changed since: say so, and change nothing
            screen.notify(visible_controls(f"Not regenerated: {refused}."), severity="error", markup=False)
            return None
        if len(files) < len(last.attachments):  # a resumed turn's, or one that failed: no contents to resend
            n = len(last.attachments)
            screen.notify(
                f"Regenerating without the {n} file{'s' if n != 1 else ''} the prompt was sent with (a log keeps "
                "no contents): /attach them and send the prompt to include them.",
                severity="warning",
                timeout=10,
            )
        return Again(last.turn_index, last.prompt, files)

    def finished(self, record: TurnRecord) -> None:
        """A turn's figures are shown: a branch's first turn becomes the newest branch; the pane shows it."""
        if record.branch_of is not None:
            self.newest = record.turn_index
        self.show()

    def show(self) -> None:
        """The newest edit's two branches side by side in the pane (hidden while there is none)."""
        records = self.screen.session.records
        nodes = links({"turn_index": r.turn_index, "branch_of": r.branch_of} for r in records)
        pair = branch_pair(nodes, self.newest) if self.newest is not None else None
        if pair is None:
            self.screen.pane.set_branches([], [])
            return
        by_index = {r.turn_index: r for r in records}
        old, new = ([by_index[i] for i in side if i in by_index] for side in pair)
        self.screen.pane.set_branches(old, new)


def is_after(label: str, turn_index: int) -> bool:
    """Whether a timeline row's label (``turn_label``) names turn ``turn_index`` or a later one."""
    digits = label.lstrip("#").strip()
    return digits.isdigit() and int(digits) - 1 >= turn_index
