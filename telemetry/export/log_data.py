"""The session log as a dataset, for Python: typed records, or a frame typed as the exports are.

:func:`read_log` finds a log as ``ttft export`` does (a session id, a file, or None for the newest
session: :func:`telemetry.log.sessions.resolve`), reads it with the CLI's own reader
(:func:`telemetry.log.turns.read_records`, one line at a time) and yields each turn as a
``TurnRecord``. A line that is not a usable record (torn by a crash, not UTF-8, a field of the wrong
type) is skipped, never fatal: the reader counts it (``skipped``, the first lines' numbers in
``skipped_lines``) and, once the log is read to its end, says so in one :class:`SkippedLinesWarning`,
which a notebook shows under the cell that read it.

:func:`log_frame` gives the turns as a pandas or polars DataFrame or a DuckDB relation, with the CSV
and Parquet exports' columns, order and types (:mod:`telemetry.export.table`), from the rows the
exports write (:func:`telemetry.export.formats.turn_rows`: base URLs and secrets masked). None of the
three needs pyarrow. An engine is imported only when asked for; one that is not installed is a
:class:`MissingEngine` naming the package to install.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path
from types import FrameType, ModuleType
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, overload

from ..errors import TtftError
from ..log.sessions import resolve
from ..log.turns import Skipped, read_records
from ..record import TurnRecord
from ..typed_read import RecordError
from . import table
from .formats import duckdb_types, polars_schema, turn_rows, turns_frame

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import polars as pl

Engine: TypeAlias = Literal["pandas", "polars", "duckdb"]
ENGINES: tuple[Engine, ...] = ("pandas", "polars", "duckdb")
Source: TypeAlias = "str | os.PathLike[str] | None"  # a session id, a log file, or None: the newest session


class LogReadError(TtftError, OSError):
    """No session or file by that name, or a log that could not be opened or read; the message says which."""


class MissingEngine(TtftError, ImportError):
    """The frame's engine (pandas, polars or duckdb) is not installed; the message names what to install."""


class SkippedLinesWarning(UserWarning):
    """A log held lines that are not usable records; they were skipped (the message counts them and
    gives their line numbers). ``warnings.simplefilter("ignore", SkippedLinesWarning)`` silences it."""


# warnings.warn should point at the reader's own line (a notebook cell), not at ttft's frames between
# it and the warning, however many of those an engine or a wrapper adds.
_OURS = (str(Path(__file__).parents[1]) + os.sep, str(Path(__file__).parents[2] / "backends") + os.sep)


def _caller_level() -> int:
    """``warn``'s stacklevel naming the first frame outside ttft, for the function that calls warn."""
    level = 2  # level 1 is the function that warns; 2 its caller
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.startswith(_OURS):
        level, frame = level + 1, frame.f_back
    return level


class LogRecords(Iterator[TurnRecord]):
    """A session log's turns as ``TurnRecord``s, read one line at a time as they are asked for.

    ``path``: the log read. ``skipped``: lines read so far that gave no record (unreadable lines, and
    well-formed lines whose fields still do not read as a record); ``skipped_lines``: the numbers
    (1-based) of the first unreadable ones; ``message``: all of it in one sentence, or None. Reading
    to the end warns once (:class:`SkippedLinesWarning`) when anything was skipped.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.left_out = 0  # well-formed lines whose fields did not read as a TurnRecord
        self._skipped = Skipped()
        self._lines = read_records(path, self._skipped)
        self._said = False

    @property
    def skipped(self) -> int:
        return sum(self._skipped.lines.values()) + self.left_out

    @property
    def skipped_lines(self) -> tuple[int, ...]:
        return tuple(self._skipped.numbers.get(self.path, ()))

    @property
    def message(self) -> str | None:
        parts = []
        if said := self._skipped.message():
            numbers = self.skipped_lines
            more = ", ..." if len(numbers) < sum(self._skipped.lines.values()) else ""
            if numbers:
                said += f" (line{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}{more})"
            parts.append(said)
        if self.left_out:
            n = self.left_out
            parts.append(f"left out {n} turn{'s' if n != 1 else ''} whose fields do not read as a ttft.turn record")
        return "; ".join(parts) or None

    def __iter__(self) -> LogRecords:
        return self

    def __next__(self) -> TurnRecord:
        while True:
            rec = self._next_dict()
            try:
                return TurnRecord.from_dict(rec)
            except RecordError:  # well formed, yet not a record's types (export keeps it: its row is typed)
                self.left_out += 1

    def dicts(self) -> Iterator[dict[str, Any]]:
        """The records as the log holds them (the rows ``ttft export`` writes are made from these)."""
        while True:
            try:
                yield self._next_dict()
            except StopIteration:
                return

    def _next_dict(self) -> dict[str, Any]:
        try:
            return next(self._lines)
        except StopIteration:
            self.say()
            raise
        except OSError as exc:  # the disk, mid-read: ttft's error naming the file, not a traceback from deep in
            raise LogReadError(f"could not read {self.path}: {exc.strerror or exc}") from None

    def say(self) -> None:
        """Warn once what was skipped, if anything (reading to the end does this)."""
        if not self._said and (text := self.message):
            self._said = True
            warnings.warn(text, SkippedLinesWarning, stacklevel=_caller_level())


def read_log(path_or_session: str | os.PathLike[str] | None = None) -> LogRecords:
    """The turns of a session log, typed, as a lazy iterator (:class:`LogRecords`): ``path_or_session``
    is a log file, a session id (as ``ttft export ID``), or None for the newest session. A skipped line
    is counted and warned of, never raised; LogReadError (a TtftError) when there is no such log or it
    cannot be opened."""
    name = None if path_or_session is None else os.fspath(path_or_session)
    try:
        path = resolve(name)
    except FileNotFoundError as exc:
        raise LogReadError(str(exc)) from None
    try:
        path.open("rb").close()  # now, not at the first record: the call that names the log is the one to fail
    except OSError as exc:
        raise LogReadError(f"could not read {path}: {exc.strerror or exc}") from None
    return LogRecords(path)


def _engine(engine: str) -> ModuleType:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    try:
        return importlib.import_module(engine)
    except ImportError:
        raise MissingEngine(
            f"log_frame(engine={engine!r}) needs {engine}, which is not installed (or does not import): "
            f"pip install {engine}",
            hint=f"pip install {engine}",
        ) from None


Records: TypeAlias = "Source | Iterable[TurnRecord | dict[str, Any]]"


@overload
def log_frame(source: Records = ..., *, engine: Literal["pandas"] = ...) -> pd.DataFrame: ...
@overload
def log_frame(source: Records = ..., *, engine: Literal["polars"]) -> pl.DataFrame: ...
@overload
def log_frame(source: Records = ..., *, engine: Literal["duckdb"]) -> duckdb.DuckDBPyRelation: ...
@overload
def log_frame(source: Records = ..., *, engine: str) -> Any: ...


def log_frame(source: Records = None, *, engine: str = "pandas") -> Any:
    """The turns as a table typed as the CSV and Parquet exports are: ``source`` is what
    :func:`read_log` takes (the log is read as ``ttft export`` reads it) or records already in hand
    (``TurnRecord``s or record dicts). ``engine``: ``"pandas"`` (a DataFrame of nullable dtypes),
    ``"polars"`` (a DataFrame) or ``"duckdb"`` (a relation over an in-memory table ``turns``).
    MissingEngine (a TtftError) when that engine is not installed; nothing is read then."""
    module = _engine(engine)  # before the log is read: a missing package costs no wait
    reader: LogRecords | None = None
    records: Iterable[Any]
    if source is None or isinstance(source, str | os.PathLike):
        reader = read_log(source)
        records = reader.dicts()  # the log's own records, as the export rows them
    else:
        records = source
    if engine == "pandas":
        frame: Any = turns_frame(records)
    elif engine == "polars":
        frame = module.from_dicts(list(turn_rows(records)), schema=polars_schema(table.COLUMNS))
    else:
        frame = _duckdb_relation(module, list(turn_rows(records)))
    if reader is not None:
        reader.say()
    return frame


def _duckdb_relation(duckdb: ModuleType, rows: list[dict[str, Any]]) -> Any:
    """The rows as a table in an in-memory DuckDB of their own, one list parameter per column unnested
    side by side: DuckDB reads a pandas or polars frame only through pyarrow, and row-by-row inserts
    of a year of turns would take minutes."""
    types = duckdb_types(table.COLUMNS)
    columns = [[r[name] for r in rows] for name in types]
    select = ", ".join(f'unnest(${i}::{t}[]) AS "{name}"' for i, (name, t) in enumerate(types.items(), 1))
    con = duckdb.connect()  # the relation keeps it open
    con.execute(f"CREATE TABLE turns AS SELECT {select}", columns)
    return con.table("turns")
