"""The durable turn log: one ``ttft.turn/1`` JSON line per turn, fsynced as each turn ends.

Logs live in the user data directory (``platformdirs``), one file per session;
``TTFT_DATA_DIR`` overrides the place (tests, CI, portable setups).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import statistics
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import platformdirs

from telemetry.record import SCHEMA, TurnRecord


def data_dir() -> Path:
    override = os.environ.get("TTFT_DATA_DIR")
    return Path(override) if override else Path(platformdirs.user_data_dir("ttft", appauthor=False))


def sessions_dir() -> Path:
    return data_dir() / "sessions"


def new_session_id() -> str:
    return datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(2)


# A session id names one file in the sessions folder, so ``--session ../../x`` or an absolute path
# cannot write elsewhere: no separator (nor a drive's ":"), no leading "." (".", "..", hidden files),
# no control character. Spaces and the like stay allowed: a file someone renamed still resumes.
_BAD_ID = re.compile(r"[/\\:\x00-\x1f\x7f-\x9f]|^\.")


def check_session_id(session_id: str) -> str:
    """``session_id`` itself when it is a valid id, else ValueError with a message fit to print."""
    if not session_id or len(session_id) > 200 or _BAD_ID.search(session_id):
        raise ValueError(
            f"{session_id!r} is not a session id: it names a file in the sessions folder, so it may not "
            "hold '/', '\\', ':' or control characters, start with '.', or pass 200 characters "
            "(e.g. 20260101-090000-a1b2)"
        )
    return session_id


class SessionLog:
    """Append-only; each append is flushed and fsynced, so a crash loses at most the turn in flight."""

    def __init__(self, session_id: str | None = None, directory: Path | None = None) -> None:
        self.session_id = check_session_id(session_id) if session_id else new_session_id()
        self.path = (directory or sessions_dir()) / f"{self.session_id}.jsonl"

    def append(self, record: TurnRecord | dict[str, Any]) -> None:
        data = record.to_dict() if isinstance(record, TurnRecord) else record
        line = json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    def records(self) -> list[dict[str, Any]]:
        return list(read_records(self.path)) if self.path.exists() else []

    def next_turn_index(self) -> int:
        recs = self.records()
        return max((r.get("turn_index", -1) for r in recs), default=-1) + 1


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Every valid ``ttft.turn/1`` line; a torn last line from a crash is skipped, not fatal."""
    with path.open(encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict) and rec.get("schema") == SCHEMA:
                yield rec


@dataclass(frozen=True, slots=True)
class SessionInfo:
    session_id: str
    path: Path
    turns: int
    started_at: str | None
    models: tuple[str, ...]
    median_ttft_ms: float | None
    median_tpot_ms: float | None
    errors: int


def summarize(path: Path) -> SessionInfo:
    recs = list(read_records(path))

    def med(key: str) -> float | None:
        vals = [r["metrics"][key] for r in recs if r.get("metrics", {}).get(key) is not None]
        return statistics.median(vals) if vals else None

    models = tuple(dict.fromkeys(f"{r.get('provider')}:{r.get('model')}" for r in recs))
    return SessionInfo(
        session_id=path.stem,
        path=path,
        turns=len(recs),
        started_at=recs[0].get("started_at") if recs else None,
        models=models,
        median_ttft_ms=med("ttft_ms"),
        median_tpot_ms=med("tpot_ms"),
        errors=sum(1 for r in recs if r.get("status") == "error"),
    )


def list_sessions(directory: Path | None = None) -> list[SessionInfo]:
    """Sessions, newest first."""
    d = directory or sessions_dir()
    if not d.exists():
        return []
    paths = sorted(d.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
    return [summarize(p) for p in paths]


def resolve(session_or_file: str | None, directory: Path | None = None) -> Path:
    """A session id, a file path, or None for the most recent session."""
    if session_or_file:
        p = Path(session_or_file)
        if p.exists():
            return p
        try:
            candidate = (directory or sessions_dir()) / f"{check_session_id(session_or_file)}.jsonl"
        except ValueError:
            raise FileNotFoundError(f"no file named {session_or_file!r}, and it is not a session id") from None
        if candidate.exists():
            return candidate
        raise FileNotFoundError(f"no session or file named {session_or_file!r}")
    sessions = list_sessions(directory)
    if not sessions:
        raise FileNotFoundError(f"no sessions logged yet in {directory or sessions_dir()}")
    return sessions[0].path
