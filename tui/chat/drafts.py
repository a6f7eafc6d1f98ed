"""The chat's draft: what the prompt box holds and the files attached, kept on disk for ``--resume``.

A draft is written :data:`DRAFT_SAVE_S` after the last keystroke, on a thread (masking the secrets of a
large paste takes a while, and typing goes on meanwhile), and once more as the chat closes, before it
returns. Drafts are numbered in the order taken from the box, and an older one is never written after
a newer. :meth:`ChatDrafts.restore` puts the draft left in a session (or in a chat quit before its
first turn) back in the box, its files attached again (:mod:`telemetry.log.drafts` keeps them).
"""

from __future__ import annotations

import contextlib
import shlex
import threading

from textual.timer import Timer
from textual.widget import Widget

from ...telemetry.log import drafts as store
from ...telemetry.log.secrets import MASK
from ..session import ChatSession
from .attach import Attachments
from .prompt import ChatPrompt

DRAFT_SAVE_S = 1.0  # a draft is written this long after the last keystroke (and when the chat closes)


class ChatDrafts:
    """The draft of the chat on ``screen``: its prompt ``box`` and the ``attachments`` for the next prompt."""

    def __init__(self, screen: Widget, box: ChatPrompt, session: ChatSession, attachments: Attachments) -> None:
        self.screen, self.box, self.session, self.attachments = screen, box, session, attachments
        self._timer: Timer | None = None
        self._lock = threading.Lock()  # drafts are written on a thread while typing, here on closing
        self._taken = self._written = 0  # which draft, in the order taken from the box

    def schedule(self) -> None:
        """The draft changed: written a moment after the last change."""
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.screen.set_timer(DRAFT_SAVE_S, self.save_aside)

    def save(self) -> None:
        """What the box holds (folded pastes whole) and the attached files' paths, kept for ``--resume``;
        written before this returns (the chat closing, its terminal gone)."""
        self._write(*self._take())

    def save_aside(self) -> None:
        """The same, written on a thread: masking the secrets of a large paste (every URL of a pasted
        access log) takes a while, and typing goes on meanwhile."""
        taken = self._take()
        self.screen.run_worker(lambda: self._write(*taken), thread=True, group="draft", exit_on_error=False)

    def _take(self) -> tuple[int, str, store.Draft]:
        self._taken += 1
        draft = store.Draft(self.box.text_to_send, tuple(p.path for p in self.attachments.pending))
        return self._taken, self.session.log.session_id, draft

    def _write(self, taken: int, session_id: str, draft: store.Draft) -> None:
        with self._lock:  # one at a time, and never an older one after a newer
            if taken < self._written:
                return
            self._written = taken
            with contextlib.suppress(OSError, ValueError):  # the chat goes on; the box still holds it
                store.save(session_id, draft)

    def drop(self) -> None:
        """The chat starts afresh: its draft goes, and no draft taken before now is written after."""
        with self._lock:  # after a draft being written, and no older one written after it
            self._taken += 1
            self._written = self._taken
            store.drop(self.session.log.session_id)  # the box's text goes with the new chat

    def restore(self) -> None:
        """The draft left in this session (or, newest, in a chat quit before its first turn) back in the box."""
        sid = self.session.log.session_id
        draft = store.load(sid)
        if draft is None:
            try:
                since = self.session.log.path.stat().st_mtime
            except OSError:
                since = 0.0
            found = store.orphan(since)
            if found is None:
                return
            old_sid, draft = found
            store.drop(old_sid)
        if draft.text and not self.box.value:
            self.box.load(draft.text)
        if draft.attachments:
            self.attachments.attach(" ".join(shlex.quote(p) for p in draft.attachments))
        masked = " Secrets in it were kept as *** (URL credentials, query values, keys): type them again." * (
            MASK in draft.text
        )
        self.screen.notify(f"Your unsent prompt is back in the box.{masked}")
