"""A chat's unsent prompt, kept on disk so that quitting (or a crash) never loses what was typed.

One JSON file per session, ``drafts/<session id>.json`` beside the logs, mode 0600
(:mod:`telemetry.log.private_files`): ``{"text": the prompt box's text, with any folded paste
whole, "attachments": [paths], "at": ISO 8601 UTC}``. The text is kept with its secrets masked, as
the prompt history keeps it (:func:`telemetry.log.secrets.mask`: a URL's credentials and query
values, a known key), even while half typed. Only the paths of files attached to the
draft are kept, never their contents: they are read again when the draft comes back. The chat
writes it while the user types and when it quits, and removes it once the box is empty;
``ttft chat --resume`` puts it back in the box.

A draft may be left in a chat that never sent a turn, so its session has no log to resume: the
newest such draft (:func:`orphan`) comes back in the session ``--resume`` opens. Reading is reading
untrusted data: a file larger than :data:`MAX_BYTES`, not JSON, or of another shape reads as no draft.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .. import json_guard
from . import private_files
from .json_line import encode_line
from .secrets import mask
from .surrogates import scrub
from .turns import check_session_id, data_dir, sessions_dir

MAX_BYTES = 16 * 1024 * 1024  # a pasted log file or two; past that, it is not a draft this reads


def drafts_dir() -> Path:
    return data_dir() / "drafts"


@dataclass(frozen=True, slots=True)
class Draft:
    text: str
    attachments: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.text.strip() or self.attachments)


def _path(session_id: str) -> Path:
    return drafts_dir() / f"{check_session_id(session_id)}.json"


def save(session_id: str, draft: Draft) -> None:
    """Keep ``draft`` for the session (an empty one removes the file). Raises OSError."""
    path = _path(session_id)
    if not draft:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        return
    data = {
        "at": datetime.now(UTC).isoformat(timespec="seconds"),
        "text": mask(draft.text),
        "attachments": list(draft.attachments),
    }
    private_files.replace(path, encode_line(data))


def load(session_id: str) -> Draft | None:
    """The session's draft, or None (none kept, or a file that does not read as one)."""
    try:
        return _read(_path(session_id))
    except ValueError:  # not a session id
        return None


def _read(path: Path) -> Draft | None:
    try:
        data = private_files.read_tail(path, MAX_BYTES + 1)
    except OSError:
        return None
    if not data or len(data) > MAX_BYTES:
        return None
    try:
        obj = json_guard.loads(data)
    except ValueError:
        return None
    if not isinstance(obj, dict) or not isinstance(obj.get("text"), str):
        return None
    paths = obj.get("attachments") or []
    if not isinstance(paths, list):
        paths = []
    draft = Draft(scrub(obj["text"]), tuple(scrub(p) for p in paths if isinstance(p, str)))
    return draft or None


def orphan(newer_than: float = 0.0) -> tuple[str, Draft] | None:
    """The newest draft, written after ``newer_than`` (a time stamp), of a session that has no log:
    a chat quit before its first turn. Its session id and the draft, or None."""
    try:
        entries = [(e.stat().st_mtime, e) for e in os.scandir(drafts_dir()) if e.name.endswith(".json")]
    except OSError:
        return None
    for mtime, entry in sorted(entries, key=lambda x: x[0], reverse=True):
        if mtime <= newer_than:
            return None
        sid = entry.name.removesuffix(".json")
        if (sessions_dir() / f"{sid}.jsonl").exists():
            continue
        draft = _read(Path(entry.path))
        if draft is not None:
            return sid, draft
    return None


def drop(session_id: str) -> None:
    with contextlib.suppress(OSError, ValueError):
        _path(session_id).unlink()
