"""The chat's session on disk: exporting its log (JSONL + CSV), and reopening a logged session.

Both take the chat's ``ChatSession`` and return what happened, for the screen to draw and say.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...telemetry.export.formats import export
from ...telemetry.log.turns import Skipped, data_dir
from ...telemetry.record import TurnRecord
from ..session import ChatSession

RESUME_DRAWN = 20  # turns a resumed session draws in the transcript


def exports_dir() -> Path:
    return data_dir() / "exports"


@dataclass(frozen=True, slots=True)
class Exported:
    """An export: the files written (the JSONL, then the CSV) and the turns in them; no files when
    there was nothing to export yet, or (``error``, the sentence for the user) when the disk said no."""

    paths: tuple[Path, ...] = ()
    turns: int = 0
    error: str | None = None


def export_session(session: ChatSession) -> Exported:
    """Write the session's log as JSONL and CSV under ``exports_dir()``."""
    log = session.log
    try:
        records = log.records()
    except OSError as exc:
        return Exported(error=f"Export failed: could not read the session log: {exc}")
    if not records:
        return Exported()
    out_dir = exports_dir()
    paths = (out_dir / f"{log.session_id}.jsonl", out_dir / f"{log.session_id}.csv")
    try:
        export(records, "jsonl", paths[0])
        export(records, "csv", paths[1])
    except OSError as exc:
        return Exported(error=f"Export failed: {exc}")
    return Exported(paths, len(records))


@dataclass(frozen=True, slots=True)
class Reopened:
    """A logged session the chat now continues: its last turns read (typed, oldest first), its turn
    count, and one sentence for the lines that could not be read; or only ``error``, when the file
    could not be opened (then the chat is unchanged)."""

    records: tuple[TurnRecord, ...] = ()
    turns: int = 0
    skipped: str | None = None
    error: str | None = None

    @property
    def drawn(self) -> tuple[TurnRecord, ...]:
        """The turns the transcript draws (each is widgets to mount); the history and timelines get all."""
        return self.records[-RESUME_DRAWN:]

    @property
    def note(self) -> str:
        shown = f", the last {RESUME_DRAWN} shown" if len(self.records) > RESUME_DRAWN else ""
        return f"{self.turns} turns{shown}"


def reopen(session: ChatSession, path: Path) -> Reopened:
    """Continue the session logged at ``path`` in ``session``: new turns append to the same log."""
    skipped = Skipped()
    try:
        records = session.resume(path, skipped)
    except (OSError, ValueError) as exc:  # ValueError: a file name that is no session id
        return Reopened(error=f"Could not open {path}: {exc}")
    # the turn count from the last index: the earlier turns are not read up front
    return Reopened(tuple(records), session.turn_index, skipped.message() if skipped else None)
