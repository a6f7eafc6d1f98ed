"""A large session log exported in slices, one worker process per core: JSONL, CSV or Parquet of a year of turns.

Reading a turn, masking it and writing its row costs ~150 us of Python; a 1 GB log holds ~350,000
turns. So a log past :data:`PARALLEL_FROM` is cut into slices of :data:`SLICE_BYTES` at line ends,
and worker processes (forked: nothing to import again) each read, mask and write their slices' rows;
the parent writes the pieces out in the log's order. The file is the one a single pass writes, byte
for byte for JSONL and CSV (the same writers run on the same records), row for row for Parquet (each
slice a part, joined streaming: never the whole table in memory). Unreadable lines are counted and
numbered as :func:`telemetry.log.turns.read_records` counts them. The log is read up to its size when
the export began: a turn appended meanwhile is the next export's.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import itertools
import json
import multiprocessing
import os
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..log import secrets
from ..log.turns import BAD_LINE, NUMBERED, Skipped, count_bad, parse_line
from ..typed_read import bulk_read
from . import formats, table

FORMATS = ("jsonl", "csv", "parquet")  # what is written in slices (the OTel documents are one object)
SLICE_BYTES = 8 * 1024 * 1024  # of the log per task: ~3,000 turns, ~50 MB of a worker's memory at most
PARALLEL_FROM = 64 * 1024 * 1024  # a smaller log is exported in one pass (starting workers costs more)


# The turn table's columns whose cells csv_value may change (text, JSON text, bools), by position.
_TEXT_CELLS = tuple(k for k, c in enumerate(table.COLUMNS) if c.type not in ("int", "float"))


@dataclass(frozen=True, slots=True)
class _Job:
    path: str
    start: int
    end: int
    fmt: str
    redact: bool
    part: str | None  # Parquet: the part file to write


@dataclass(frozen=True, slots=True)
class _Piece:
    text: str  # JSONL or CSV rows; empty for Parquet (written to its part)
    rows: int
    lines: int  # lines in the slice, to number the next slice's
    bad: int
    numbers: tuple[int, ...]  # 1-based within the slice: the first NUMBERED unreadable lines


def usable(fmt: str, size: int, steps: bool) -> bool:
    """Whether a log of ``size`` bytes is exported in slices as ``fmt``: large, a turn table, and
    worker processes to be had (two cores or more, and ``fork``)."""
    return (
        fmt in FORMATS
        and not steps
        and size >= PARALLEL_FROM
        and _workers() > 1
        and "fork" in multiprocessing.get_all_start_methods()
        # polars' threads, once started, do not survive a fork: a process that loaded it (a notebook)
        # writes Parquet in one pass (in parts too, its memory as bounded)
        and not (fmt == "parquet" and "polars" in sys.modules)
    )


def _workers() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS: no affinity
        return os.cpu_count() or 1


def slices(path: Path, size: int, step: int = SLICE_BYTES) -> list[tuple[int, int]]:
    """``[start, end)`` byte ranges covering the first ``size`` bytes, each starting at a line's start."""
    cuts = [0]
    with path.open("rb") as f:
        at = step
        while at < size:
            f.seek(at - 1)
            at = at - 1 + len(f.readline())  # past the end of the line that holds byte at - 1
            if at >= size:
                break
            cuts.append(at)
            at += step
    cuts.append(size)
    return list(itertools.pairwise(cuts))


def _lines(path: str, start: int, end: int) -> Iterator[bytes]:
    with open(path, "rb") as f:
        f.seek(start)
        pos = start
        for raw in f:
            pos += len(raw)
            if pos > end:
                return  # the slice's end, or a line still being written when the export began
            yield raw


def _records(job: _Job, counts: list[int], numbers: list[int]) -> Iterator[dict[str, Any]]:
    """The slice's records, masked (and redacted) as the export writes them; ``counts``: [lines, bad]."""
    for number, raw in enumerate(_lines(job.path, job.start, job.end), 1):
        counts[0] = number
        rec = parse_line(raw)
        if rec is BAD_LINE:
            counts[1] += 1
            if len(numbers) < NUMBERED:
                numbers.append(number)
        elif rec is not None:
            yield formats.safe_urls(formats.redact(rec) if job.redact else rec)


def _run(job: _Job) -> _Piece:
    """In a worker: one slice read, masked and written as its rows, one record at a time."""
    counts = [0, 0]
    numbers: list[int] = []
    rows = 0
    text = ""
    with bulk_read():  # records make no cycles: the collector's passes were a third of the time
        if job.fmt == "jsonl":
            out = []
            for r in _records(job, counts, numbers):
                out.append(json.dumps(r, ensure_ascii=False) + "\n")
            text, rows = "".join(out), len(out)
        elif job.fmt == "csv":
            buf = io.StringIO(newline="")
            w = csv.writer(buf)
            for r in _records(job, counts, numbers):
                cells = list(table.row(r).values())
                for k in _TEXT_CELLS:  # a number is written as it is: only text and bools are looked at
                    if cells[k] is not None:
                        cells[k] = formats.csv_value(cells[k])
                w.writerow(cells)
                rows += 1
            text = buf.getvalue()
        elif job.part is not None:
            table_rows = [table.row(r) for r in _records(job, counts, numbers)]
            rows = formats.write_parquet_part(table.COLUMNS, table_rows, Path(job.part))
    return _Piece(text, rows, counts[0], counts[1], tuple(numbers))


def _init() -> None:
    secrets.pin_environment()  # a worker's environment does not change: read once, not per record


def export(path: Path, fmt: str, out: Path, *, redact_text: bool, skipped: Skipped | None) -> int:
    """Write the turn table of the log at ``path`` as ``fmt`` (one of :data:`FORMATS`) to ``out``, in
    slices by worker processes; returns the turns written. Unreadable lines go into ``skipped``."""
    if fmt == "parquet" and importlib.util.find_spec("polars") is None:
        raise ModuleNotFoundError("No module named 'polars'", name="polars")
    size = path.stat().st_size
    bad = 0
    seen = 0  # lines before the slice in hand
    n = 0
    with tempfile.TemporaryDirectory(prefix="ttft-export-") as tmp:
        ranges = slices(path, size)
        parts = [Path(tmp) / f"{k:08d}.parquet" for k in range(len(ranges))] if fmt == "parquet" else []
        jobs = [
            _Job(str(path), a, b, fmt, redact_text, str(parts[k]) if parts else None) for k, (a, b) in enumerate(ranges)
        ]
        if out != formats.STDOUT:
            out.parent.mkdir(parents=True, exist_ok=True)
        sink = None if fmt == "parquet" else formats.open_private(out, newline="" if fmt == "csv" else None)
        try:
            if sink is not None and fmt == "csv":
                csv.writer(sink).writerow(table.HEADER)
            # fork: the workers start with this process's modules, nothing imported again (polars is
            # imported in the workers only: a fork after its threads started could hang)
            with multiprocessing.get_context("fork").Pool(_workers(), initializer=_init) as pool:
                for piece in pool.imap(_run, jobs):
                    if sink is not None:
                        sink.write(piece.text)
                    n += piece.rows
                    bad += piece.bad
                    if skipped is not None:
                        for k in piece.numbers:
                            skipped.number(path, seen + k)
                    seen += piece.lines
        finally:
            if sink is not None:
                sink.close()
        if fmt == "parquet":
            formats.join_parquet(table.COLUMNS, parts, out)
    count_bad(path, bad, skipped)
    sys.stdout.flush()
    return n
