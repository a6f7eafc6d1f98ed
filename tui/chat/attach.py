"""The chat's ``/attach PATH`` and ``/detach [N]``: files for the next prompt, read and checked up front.

``/attach`` takes one or more paths (quoted as in a shell when they hold spaces; ``~`` is the home
folder), reads each with :func:`backends.attachments.read_attachment` and checks it against the model
the next turn talks to (:func:`backends.attachments.check_attachments`): a file that cannot go is
said at once, before anything is sent, and is not added. The files are listed above the prompt until
the prompt is sent (or ``/detach`` or a click removes them). Tab completes the path being typed.

:class:`Attachments` holds the files for the next prompt on the chat's screen, says what each command
did, and posts ``AttachmentsChanged`` whenever the list changes: the screen shows it above the prompt
and keeps it in the draft.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from textual.message import Message
from textual.widget import Widget

from ...backends.attachments import Attachment, Refused, check_attachments, read_attachment
from ...backends.providers.registry import target_api
from ..format import visible_controls

ATTACH = "/attach"
DETACH = "/detach"
MAX_SHOWN = 8  # completion candidates named in the notice


@dataclass(frozen=True, slots=True)
class Pending:
    """A file waiting for the next prompt: the path as typed (what a draft keeps) and the file read."""

    path: str
    file: Attachment


@dataclass
class Attached:
    """What one ``/attach`` did: the files added, and one sentence per file refused."""

    added: list[Pending] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


def paths_of(args: str) -> list[str]:
    """The paths in ``/attach``'s arguments: shell words, or the whole text when it does not split."""
    try:
        words = shlex.split(args)
    except ValueError:  # an unclosed quote: one path, as typed
        words = [args.strip()]
    return [w for w in words if w]


def target_of(spec: str, base_url: str | None, backend: object | None) -> tuple[str, str] | None:
    """The API and model the next turn talks to (the backend's own names once it exists), or None
    when the spec does not resolve (the turn will say why)."""
    api, model = getattr(backend, "api", None), getattr(backend, "model", None)
    if isinstance(api, str) and isinstance(model, str):
        return api, model
    try:
        return target_api(spec, base_url)
    except Exception:  # an unknown provider: the turn's own error says so
        return None


def attach(args: str, pending: Sequence[Pending], target: tuple[str, str] | None) -> Attached:
    """Read and check the files ``args`` names, along with those already ``pending`` (the API's
    limits are per request)."""
    out = Attached()
    paths = paths_of(args)
    if not paths:
        out.refused.append("give a file: /attach PATH (Tab completes it)")
        return out
    for path in paths:
        got = read_attachment(os.path.expanduser(path))
        if isinstance(got, Refused):
            out.refused.append(Refused(path, got.reason).sentence)
            continue
        if target is not None:
            files = [p.file for p in (*pending, *out.added)] + [got]
            refused = check_attachments(files, api=target[0], model=target[1])
            if refused is not None:
                out.refused.append(f"{path}: {refused.reason}")
                continue
        out.added.append(Pending(path, got))
    return out


def recheck(files: Sequence[Attachment], target: tuple[str, str] | None) -> str | None:
    """Whether files read earlier (attached, or sent with a prompt being regenerated) can go to ``target``
    (the model may have changed since): None, or the sentence that says why not."""
    if not files or target is None:
        return None
    refused = check_attachments(files, api=target[0], model=target[1])
    return None if refused is None else refused.sentence


def detach(args: str, pending: list[Pending]) -> str:
    """``/detach`` (all) or ``/detach N`` (1-based): removes them from ``pending``; what it did."""
    arg = args.strip()
    if not pending:
        return "No file is attached."
    if not arg:
        n = len(pending)
        pending.clear()
        return f"Removed {n} attached file{'s' if n != 1 else ''}."
    try:
        k = int(arg) - 1
        if not 0 <= k < len(pending):
            raise ValueError
    except ValueError:
        return f"/detach N takes a number from 1 to {len(pending)}."
    gone = pending.pop(k)
    return f"Removed {gone.file.name}."


def complete(text: str) -> tuple[str, list[str]] | None:
    """Tab on ``/attach PARTIAL``: the text with the path completed as far as it is unambiguous, and
    the candidates when several remain; None when the text is no ``/attach`` line."""
    if not text.startswith(ATTACH + " ") or "\n" in text:
        return None
    head, _, partial = text.rpartition(" ")
    if partial.startswith(("'", '"')):
        return text, []  # a quoted path: typed by hand
    expanded = os.path.expanduser(partial)
    folder, stem = os.path.split(expanded)
    try:
        with os.scandir(folder or ".") as it:
            names = sorted(
                e.name + ("/" if e.is_dir() else "")
                for e in it
                if e.name.startswith(stem) and not _hidden(e.name, stem)
            )
    except OSError:
        return text, []
    if not names:
        return text, []
    common = os.path.commonprefix(names)  # noqa: RUF071 - the names' common start, letter by letter
    shown_folder = partial[: len(partial) - len(stem)] if stem else partial
    completed = f"{head} {shown_folder}{common}"
    return completed, (names if len(names) > 1 else [])


def _hidden(name: str, stem: str) -> bool:
    return name.startswith(".") and not stem.startswith(".")


class AttachmentsChanged(Message):
    """The files for the next prompt changed: the tray above the prompt and the draft follow them."""


class Attachments:
    """The chat's files for the next prompt (``pending``), and those of the turn being started
    (``sending``: back in place if the turn cannot start). ``target``: the API and model the next
    turn talks to, read at each check (the model may change)."""

    def __init__(self, screen: Widget, target: Callable[[], tuple[str, str] | None]) -> None:
        self.screen = screen
        self.target = target
        self.pending: list[Pending] = []
        self.sending: list[Pending] = []

    def _changed(self) -> None:
        self.screen.post_message(AttachmentsChanged())

    def attach(self, args: str) -> None:
        """``/attach args``: each file read and checked; what was added and what refused, said."""
        done = attach(args, self.pending, self.target())
        self.pending += done.added
        for sentence in done.refused:
            self.screen.notify(visible_controls(f"/attach {sentence}"), severity="error", markup=False, timeout=10)
        if done.added:
            names = ", ".join(p.file.name for p in done.added)
            self.screen.notify(visible_controls(f"Attached {names}: it goes with the next prompt."), markup=False)
        self._changed()

    def detach(self, args: str) -> None:
        """``/detach args`` (or a click on the tray: its number as text)."""
        self.screen.notify(detach(args, self.pending))
        self._changed()

    def refused(self) -> str | None:
        """Why the files attached cannot go with the next turn (the model changed since), or None."""
        return recheck([p.file for p in self.pending], self.target())

    def take(self) -> tuple[Attachment, ...]:
        """The files leave the tray with the prompt; kept aside until the turn has started."""
        self.sending, self.pending = self.pending, []
        self._changed()
        return tuple(p.file for p in self.sending)

    def started(self) -> None:
        self.sending = []

    def put_back(self) -> None:
        """The turn could not start: its files back in the tray, unless others were attached meanwhile."""
        files, self.sending = self.sending, []
        if files and not self.pending:
            self.pending = files
            self._changed()

    def names(self) -> list[str]:
        return [p.file.name for p in self.pending]
