"""The catalogue of logged sessions: what ``ttft sessions`` and the sessions screen list.

Each log's summary (turns, models, medians of its ok turns) is kept in an index beside it
(``.index/``, :mod:`telemetry.log.log_index`) that the writer keeps up to date, so a listing reads
only the lines no index counted yet (a replaced or shrunk file is read again). ``resolve`` turns a session
id, a file path or nothing (the newest session) into a log's path.
"""

from __future__ import annotations

import contextlib
import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..typed_read import bulk_read
from . import log_index
from .quote import quoted
from .turns import BAD_LINE, Skipped, check_session_id, count_bad, line_index, parse_line, sessions_dir


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


def _count(f: Any, tally: log_index.Tally) -> dict[str, Any] | None:
    """Count the lines from ``f``'s position on into ``tally``; an unterminated last line is not
    counted there but returned (parsed), to be shown this once."""
    for raw in f:
        rec = parse_line(raw)
        if not raw.endswith(b"\n"):
            return rec
        if rec is BAD_LINE:
            tally.bad += 1
        elif rec is not None:
            tally.add(rec)
        tally.take(line_index(raw))
        tally.moved_past(raw)
    return None


def summarize(path: Path, skipped: Skipped | None = None) -> SessionInfo:
    """Turn count, first start, models, medians and errors of one log, from its index
    (:mod:`telemetry.log.log_index`, kept by the writer) and the lines past it, read one at a time."""
    with path.open("rb") as f:
        fd = f.fileno()
        tally = log_index.load(path, fd)
        based_on = tally.offset if tally is not None else None
        if tally is None:
            tally = log_index.new(fd)
        start = tally.offset
        f.seek(start)
        torn: dict[str, Any] | None = None  # an unterminated last line: counted now, read again next time
        with bulk_read():  # no cycles among the records: the collector's passes only cost time
            torn = _count(f, tally)
    if tally.offset != start or based_on is None:
        log_index.save(path, tally, based_on)
    bad = tally.bad
    if torn is BAD_LINE:
        bad += 1
    elif torn is not None:  # counted in this answer only: the saved tally stops before this line
        tally = copy.deepcopy(tally)
        tally.add(torn)
    count_bad(path, bad, skipped)
    ttft, tpot = tally.medians()
    return SessionInfo(
        session_id=path.stem,
        path=path,
        turns=tally.turns,
        started_at=tally.started_at,
        models=tuple(tally.models),
        median_ttft_ms=ttft,
        median_tpot_ms=tpot,
        errors=tally.errors,
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
    # The newest log that can be opened, as the listing would put first: found without counting any.
    d = directory or sessions_dir()
    with contextlib.suppress(OSError):
        for p in sorted(d.glob("*.jsonl"), key=_mtime, reverse=True):
            try:
                p.open("rb").close()
            except OSError:
                continue  # left out of the listing too
            return p
    raise FileNotFoundError(f"no sessions logged yet in {d}")
