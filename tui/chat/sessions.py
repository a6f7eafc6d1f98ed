"""The chat's session on disk: exporting its log (JSONL + CSV), and reopening a logged session in the chat."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from telemetry.export.formats import export
from telemetry.log.turns import Skipped, data_dir
from tui.runner import collect_between_turns

if TYPE_CHECKING:
    from tui.chat.app import ChatApp

RESUME_DRAWN = 20  # turns a resumed session draws in the transcript


def exports_dir() -> Path:
    return data_dir() / "exports"


async def export_session(app: ChatApp) -> list[Path]:
    """Write the session's log as JSONL and CSV under ``exports_dir()``; the paths, or [] (the user told why)."""
    log = app.session.log
    try:
        records = log.records()
    except OSError as exc:
        app.notify(f"Export failed: could not read the session log: {exc}", severity="error")
        return []
    if not records:
        app.notify("Nothing to export yet: no turn has finished.")
        return []
    out_dir = exports_dir()
    paths = [out_dir / f"{log.session_id}.jsonl", out_dir / f"{log.session_id}.csv"]
    try:
        export(records, "jsonl", paths[0])
        export(records, "csv", paths[1])
    except OSError as exc:
        app.notify(f"Export failed: {exc}", severity="error")
        return []
    app.last_export = paths
    await app.transcript.add_note(f"exported {len(records)} turns: {paths[0]}  {paths[1]}", "ok")
    app.notify(f"Exported {len(records)} turns to {out_dir}")
    return paths


async def load_session(app: ChatApp, path: Path) -> None:
    """Reopen a logged session: transcript, timelines, history; new turns append to the same log."""
    if app.live is not None:
        app.notify("Cancel the turn in flight first (Esc).", severity="warning")
        return
    skipped = Skipped()
    try:
        records = app.session.resume(path, skipped)
    except (OSError, ValueError) as exc:  # ValueError: a file name that is no session id
        app.notify(f"Could not open {path}: {exc}", severity="error")
        return
    transcript = app.transcript
    await transcript.remove_children()
    # The last few turns drawn (each is widgets to mount); the history and timelines get all read.
    for rec in records[-RESUME_DRAWN:]:
        await transcript.add_logged(rec, app.clock)
    await transcript.compact()
    app.turns.show_logged(records)
    app.pane.set_history(records)
    if records:
        app.pane.show_record(records[-1])
    else:  # an empty session: the chat starts as a new one would
        await transcript.show_greeting(app.target())
    # the turn count from the last index: the earlier turns are not read up front
    turns = max((r.get("turn_index", -1) for r in records), default=-1) + 1
    shown = f", the last {RESUME_DRAWN} shown" if len(records) > RESUME_DRAWN else ""
    await transcript.add_note(f"resumed session {app.session.log.session_id}: {turns} turns{shown}", "ok")
    if skipped:  # a torn or damaged line: said once, the rest of the session is there
        await transcript.add_note(str(skipped.message()), "error")
    app.update_header()
    app.call_after_refresh(collect_between_turns)
