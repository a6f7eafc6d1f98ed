"""The catalogue of logged sessions: what ``ttft sessions`` and the sessions screen list.

Each log's summary (turns, models, medians of its ok turns) is kept in a small index file
beside it (``.index/``), keyed on the log's first bytes and size, so a listing reads only the
lines appended since (a replaced or shrunk file is read again). ``resolve`` turns a session
id, a file path or nothing (the newest session) into a log's path.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from telemetry import json_guard
from telemetry.log import private_files
from telemetry.log.quote import quoted
from telemetry.log.turns import BAD_LINE, Skipped, check_session_id, count_bad, parse_line, sessions_dir


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


# ``ttft sessions`` keeps what it learned of each log in ``.index/SESSION.json`` beside it: the byte
# offset read up to and the running tally. A log is then read only from there (what was appended
# since), not parsed whole on every listing; a log that was replaced or cut (its first bytes or its
# size no longer match) is read again from the start. Best effort: an index that cannot be written
# or read just means a full read.
INDEX_DIR = ".index"
_HEAD_BYTES = 256  # a log's first bytes, kept in its index to notice a replaced file
_TALLY_VERSION = 2  # 2: medians of ok turns only (an index of 1 is read again)


def _index_path(path: Path) -> Path:
    return path.parent / INDEX_DIR / f"{path.stem}.json"


def _new_tally(head: bytes) -> dict[str, Any]:
    return {
        "version": _TALLY_VERSION,
        "head": head.hex(),
        "offset": 0,
        "turns": 0,
        "errors": 0,
        "bad": 0,
        "started_at": None,
        "models": [],
        "ttft": [],
        "tpot": [],
    }


def _load_tally(path: Path, head: bytes, size: int) -> dict[str, Any]:
    try:
        tally = json_guard.loads(_index_path(path).read_bytes())
        ok = (
            isinstance(tally, dict)
            and tally.get("version") == _TALLY_VERSION
            and isinstance(tally.get("head"), str)
            and head.hex().startswith(tally["head"])
            and isinstance(tally.get("offset"), int)
            and 0 < tally["offset"] <= size
        )
    except (OSError, ValueError, RecursionError):
        ok = False
    return tally if ok else _new_tally(head)


def _save_tally(path: Path, tally: dict[str, Any]) -> None:
    target = _index_path(path)
    with contextlib.suppress(OSError):
        target.parent.mkdir(mode=0o700, exist_ok=True)
        # whole or not at all: a reader never sees half an index; not synced, as it is built again when lost
        private_files.replace(target, json.dumps(tally, separators=(",", ":")).encode(), sync=False)


def _add(tally: dict[str, Any], rec: dict[str, Any]) -> None:
    tally["turns"] += 1
    if tally["turns"] == 1:
        tally["started_at"] = rec.get("started_at")
    model = f"{rec.get('provider')}:{rec.get('model')}"
    if model not in tally["models"]:
        tally["models"].append(model)
    if rec.get("status") == "error":
        tally["errors"] += 1
    if rec.get("status") != "ok":  # as the report and the chat's summary: a cut turn's figures are not its speed
        return
    metrics = rec.get("metrics") or {}
    for key, name in (("ttft_ms", "ttft"), ("tpot_ms", "tpot")):
        if metrics.get(key) is not None:
            tally[name].append(metrics[key])


def summarize(path: Path, skipped: Skipped | None = None) -> SessionInfo:
    """Turn count, first start, models, medians and errors of one log, read one line at a time and,
    with its index, only from where the last listing stopped."""
    with path.open("rb") as f:
        head = f.read(_HEAD_BYTES)
        size = os.fstat(f.fileno()).st_size
        tally = _load_tally(path, head, size)
        start = tally["offset"]
        f.seek(start)
        pos = start
        torn: dict[str, Any] | None = None  # an unterminated last line: counted now, read again next time
        for raw in f:
            rec = parse_line(raw)
            if not raw.endswith(b"\n"):
                torn = rec
                break
            pos += len(raw)
            if rec is BAD_LINE:
                tally["bad"] += 1
            elif rec is not None:
                _add(tally, rec)
    if pos != start:
        tally["offset"] = pos
        tally["head"] = head[:pos].hex()  # what of the start was read: a short log's head grows with it
        _save_tally(path, tally)
    bad = tally["bad"]
    if torn is BAD_LINE:
        bad += 1
    elif torn is not None:
        tally = json.loads(json.dumps(tally))  # a copy: the saved tally stops before this line
        _add(tally, torn)
    count_bad(path, bad, skipped)

    def med(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    return SessionInfo(
        session_id=path.stem,
        path=path,
        turns=tally["turns"],
        started_at=tally["started_at"],
        models=tuple(tally["models"]),
        median_ttft_ms=med(tally["ttft"]),
        median_tpot_ms=med(tally["tpot"]),
        errors=tally["errors"],
    )


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def list_sessions(directory: Path | None = None, skipped: Skipped | None = None) -> list[SessionInfo]:
    """Sessions, newest first. A file that cannot be read at all is left out (and named in ``skipped``)."""
    d = directory or sessions_dir()
    try:
        paths = sorted(d.glob("*.jsonl"), key=_mtime, reverse=True)
    except OSError as exc:
        if skipped is not None and d.exists():
            skipped.files[d] = exc.strerror or str(exc)
        return []
    out = []
    for p in paths:
        try:
            out.append(summarize(p, skipped))
        except OSError as exc:
            if skipped is not None:
                skipped.files[p] = exc.strerror or str(exc)
    return out


def resolve(session_or_file: str | None, directory: Path | None = None) -> Path:
    """A session id, a file path, or None for the most recent session."""
    if session_or_file:
        p = Path(session_or_file)
        if p.exists():
            return p
        try:
            candidate = (directory or sessions_dir()) / f"{check_session_id(session_or_file)}.jsonl"
        except ValueError:
            raise FileNotFoundError(f"no file named {quoted(session_or_file)}, and it is not a session id") from None
        if candidate.exists():
            return candidate
        raise FileNotFoundError(f"no session or file named {quoted(session_or_file)}")
    sessions = list_sessions(directory)
    if not sessions:
        raise FileNotFoundError(f"no sessions logged yet in {directory or sessions_dir()}")
    return sessions[0].path
