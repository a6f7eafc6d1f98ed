"""Export logged turns as JSONL, flat CSV (the fixed table of ``telemetry.export.table``), Parquet, or
OpenTelemetry GenAI traces or metrics (OTLP/JSON); or their steps, one row each (the table of
``telemetry.export.step_table``), as JSONL, CSV or Parquet. An output path of ``-`` is standard output."""

from __future__ import annotations

import csv
import errno
import io
import itertools
import json
import os
import re
import shutil
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..log.secrets import masked_record
from ..log.urls import redact_url
from ..record import TurnRecord
from ..typed_read import RecordError, convert, field_types
from . import genai, otlp_json, step_table, table

TEXT_FIELDS = ("prompt", "answer", "reasoning")
# A CSV cell a spreadsheet would run as a formula (OWASP's list: = + - @, tab, carriage return) ...
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# ... unless it is a plain number, which a spreadsheet reads as the number it is.
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


STDOUT = Path("-")  # an output path that means standard output


# On a terminal, the records' text (model output, server errors) must not drive it: every control
# character but newline and tab is written as its escape (a CSV cell is not escaped, nor is a C1
# byte such as the CSI 0x9b in JSON written with ensure_ascii=False), and so is every bidi
# embedding, override and isolate (U+202A-U+202E, U+2066-U+2069: they reorder what the reader sees).
# A pipe gets the exact data.
_TTY_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def _tty_safe(s: str) -> str:
    s = s.replace("\r\n", "\n")  # the CSV row end
    return _TTY_CONTROLS.sub(_escape, s) if _TTY_CONTROLS.search(s) else s


class _Stdout(io.TextIOBase):
    """Standard output as a file to write and close, without closing it (``-o -``)."""

    def __init__(self) -> None:
        super().__init__()
        self._tty = sys.stdout.isatty()

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        sys.stdout.write(_tty_safe(s) if self._tty else s)
        return len(s)

    def close(self) -> None:
        if not self.closed:
            sys.stdout.flush()
        super().close()


def open_private(path: Path, *, newline: str | None = None) -> TextIO:
    """``path`` opened for writing text, readable by the user alone (0600) like the session log:
    an export or a report holds the prompts and answers. An existing file is made 0600 too
    (``O_TRUNC`` keeps a file's old mode). ``-`` (:data:`STDOUT`) is standard output."""
    if path == STDOUT:
        return _Stdout()  # type: ignore[return-value]  # a TextIOBase that writes through
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        if hasattr(os, "fchmod") and stat.S_ISREG(os.fstat(fd).st_mode):  # not a pipe or /dev/stdout
            os.fchmod(fd, 0o600)
        return open(fd, "w", encoding="utf-8", newline=newline)  # the caller closes it
    except BaseException:
        os.close(fd)
        raise


def csv_cell(value: Any) -> Any:
    """A text cell that would start a formula gets a leading ``'`` (shown as text, never run)."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _NUMBER.fullmatch(value):
        return "'" + value
    return value


def _field(rec: dict[str, Any], name: str) -> Any:
    """One field of a record as ``TurnRecord`` types it (the record itself is written as it was
    logged, unknown fields and all); ``RecordError`` when it is not of that type."""
    return convert(field_types(TurnRecord)[name], rec.get(name), name)


def safe_urls(rec: dict[str, Any]) -> dict[str, Any]:
    """``base_url`` without credentials or query values, also for lines logged before ttft masked them;
    the error, notices and diagnosis masked (:func:`telemetry.log.secrets.masked_record`) the same way."""
    rec = masked_record(rec)
    try:
        url: str | None = _field(rec, "base_url")
    except RecordError:  # no URL, so no way to mask what it holds: none of it is written
        return {**rec, "base_url": None}
    if not url:
        return rec
    return {**rec, "base_url": redact_url(url)}


def redact(rec: dict[str, Any]) -> dict[str, Any]:
    """Drop the conversation text; keep every number."""
    out = dict(rec)
    for k in TEXT_FIELDS:
        if k in out:
            out[k] = None
    try:
        calls: tuple[dict[str, str], ...] = _field(rec, "tool_calls") if rec.get("tool_calls") is not None else ()
    except RecordError:  # not the list of calls a record holds: nothing of it is kept
        calls = ()
    out["tool_calls"] = [{"name": t.get("name"), "arguments": None} for t in calls]
    files = rec.get("attachments")
    if isinstance(files, list):  # a file's name can say what it holds: its size and type are the numbers
        out["attachments"] = [{**a, "name": None} if isinstance(a, dict) else None for a in files]
    return out


def flatten(rec: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts become dotted columns; lists (chunks, attempt log) become JSON text."""
    flat: dict[str, Any] = {}
    for k, v in rec.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            flat.update(flatten(v, key + "."))
        elif isinstance(v, list):
            flat[key] = json.dumps(v, separators=(",", ":"))
        else:
            flat[key] = v
    return flat


def write_jsonl(records: Iterable[dict[str, Any]], out: Path) -> int:
    n = 0
    with open_private(out) as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
            n += 1
    return n


def csv_value(value: Any) -> Any:
    """A table's cell as CSV writes it: a bool as a word, a formula's start neutralised (:func:`csv_cell`)."""
    if value is None:  # most cells: nothing to look at
        return None
    if isinstance(value, bool):
        return "true" if value else "false"  # what pandas, polars and DuckDB all read as booleans
    return csv_cell(value)


def write_csv(records: Sequence[dict[str, Any]], out: Path) -> int:
    """Any rows (a comparison's summary and verdicts) as CSV: nested dicts become dotted columns,
    the header is every key met, in order. Turns go through :func:`write_turns_csv` instead."""
    columns = list(dict.fromkeys(k for r in records for k in flatten(r)))
    with open_private(out, newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns)
        w.writeheader()
        for r in records:
            w.writerow({k: csv_cell(v) for k, v in flatten(r).items()})
    return len(records)


def _write_table_csv(header: Sequence[str], rows: Iterable[dict[str, Any]], out: Path) -> int:
    n = 0
    with open_private(out, newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        for row in rows:
            w.writerow([csv_value(v) for v in row.values()])
            n += 1
    return n


def write_turns_csv(records: Iterable[dict[str, Any]], out: Path) -> int:
    """One row per turn under the fixed header of ``telemetry.export.table`` (one pass, nothing held)."""
    return _write_table_csv(table.HEADER, (table.row(r) for r in records), out)


def write_steps_csv(records: Iterable[dict[str, Any]], out: Path) -> int:
    """One row per step under the fixed header of ``telemetry.export.step_table``; returns the rows."""
    return _write_table_csv(step_table.HEADER, step_table.all_rows(iter(records)), out)


def write_steps_jsonl(records: Iterable[dict[str, Any]], out: Path) -> int:
    """The step table as JSON lines: each row an object of the same typed columns (null where empty)."""
    n = 0
    with open_private(out) as f:
        for row in step_table.all_rows(iter(records)):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def write_parquet(records: Iterable[dict[str, Any]], out: Path) -> int:
    """The same table as Parquet, every column typed (also those all null), through polars.
    Raises ``ModuleNotFoundError`` when polars is not installed."""
    return _write_table_parquet(table.COLUMNS, (table.row(r) for r in records), out)


def write_steps_parquet(records: Iterable[dict[str, Any]], out: Path) -> int:
    """The step table as Parquet, typed as :func:`write_parquet` types the turn table; returns the rows."""
    return _write_table_parquet(step_table.COLUMNS, step_table.all_rows(iter(records)), out)


def polars_schema(columns: Sequence[table.Column]) -> dict[str, Any]:
    """A table's columns as polars types (``pl.read_csv(path, schema=...)`` reads an export back typed)."""
    import polars as pl

    types = {"str": pl.String, "json": pl.String, "int": pl.Int64, "float": pl.Float64, "bool": pl.Boolean}
    return {c.name: types[c.type] for c in columns}


def pandas_dtypes(columns: Sequence[table.Column]) -> dict[str, str]:
    """A table's columns as pandas dtypes (``pd.read_csv(path, dtype=...)``): nullable, so an empty
    cell stays missing in an int or bool column."""
    types = {"str": "string", "json": "string", "int": "Int64", "float": "Float64", "bool": "boolean"}
    return {c.name: types[c.type] for c in columns}


def duckdb_types(columns: Sequence[table.Column]) -> dict[str, str]:
    """A table's columns as DuckDB types (``read_csv(path, columns=...)``); a JSON column is its text."""
    types = {"str": "VARCHAR", "json": "VARCHAR", "int": "BIGINT", "float": "DOUBLE", "bool": "BOOLEAN"}
    return {c.name: types[c.type] for c in columns}


PARQUET_BATCH = 8192  # rows held at once: a year of turns is written in parts of this many, then joined


def write_parquet_part(columns: Sequence[table.Column], rows: Sequence[dict[str, Any]], part: Path) -> int:
    """Rows as one part of a Parquet export (lz4: written once, read back once by :func:`join_parquet`)."""
    import polars as pl

    frame = pl.from_dicts(rows, schema=polars_schema(columns))
    frame.write_parquet(part, compression="lz4")
    return frame.height


def join_parquet(columns: Sequence[table.Column], parts: Sequence[Path], out: Path) -> None:
    """The parts, in order, as one Parquet file (zstd), streamed: never the whole table in memory."""
    import polars as pl

    if out == STDOUT and sys.stdout.isatty():  # binary on a terminal: garbage at best, escape sequences at worst
        raise OSError(errno.EINVAL, "Parquet is binary: pipe it (-o - | ...) or give -o FILE")
    schema = polars_schema(columns)
    frame = pl.scan_parquet(list(parts), schema=schema) if parts else pl.LazyFrame(schema=schema)
    if out != STDOUT:
        open_private(out).close()  # created 0600 first; polars then writes the bytes into it
        frame.sink_parquet(out, compression="zstd")
        return
    with tempfile.TemporaryDirectory(prefix="ttft-parquet-") as tmp:  # a pipe cannot be sunk into: copied through
        whole = Path(tmp) / "out.parquet"
        frame.sink_parquet(whole, compression="zstd")
        sys.stdout.flush()
        with whole.open("rb") as f:
            shutil.copyfileobj(f, sys.stdout.buffer)
        sys.stdout.buffer.flush()


def _write_table_parquet(columns: Sequence[table.Column], rows: Iterable[dict[str, Any]], out: Path) -> int:
    import polars  # noqa: F401  (ModuleNotFoundError before anything is read or written)

    n = 0
    with tempfile.TemporaryDirectory(prefix="ttft-parquet-") as tmp:
        parts: list[Path] = []
        rows = iter(rows)
        while batch := list(itertools.islice(rows, PARQUET_BATCH)):
            parts.append(Path(tmp) / f"{len(parts):08d}.parquet")
            n += write_parquet_part(columns, batch, parts[-1])
        join_parquet(columns, parts, out)
    return n


# --- OpenTelemetry: the mapping is telemetry.export.genai's (shared with the live push) ------------
def _typed(records: Iterable[dict[str, Any]]) -> Iterator[TurnRecord]:
    """The records the OTel mapping reads, typed at this edge; a line that does not read as a turn
    record is left out of the document (the returned count, of turns written, says how many remain)."""
    for rec in records:
        try:
            yield TurnRecord.from_dict(rec)
        except RecordError:
            continue


def write_otel(records: Iterable[dict[str, Any]], out: Path) -> int:
    """OTLP/JSON traces (``ExportTraceServiceRequest``): a collector takes the file as it is
    (``curl --data-binary @FILE .../v1/traces``). Message text only when
    ``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true``, as live."""
    counted: list[int] = []
    doc = otlp_json.traces_document(_typed(records), capture_content=genai.capture_content(), counted=counted)
    with open_private(out) as f:
        f.write(json.dumps(doc, ensure_ascii=False))
    return counted[0]


def write_otel_metrics(records: Iterable[dict[str, Any]], out: Path) -> int:
    """OTLP/JSON metrics (``ExportMetricsServiceRequest``): the GenAI client histograms, cumulative."""
    counted: list[int] = []
    doc = otlp_json.metrics_document(_typed(records), counted=counted)
    with open_private(out) as f:
        f.write(json.dumps(doc, ensure_ascii=False))
    return counted[0]


WRITERS: dict[str, Callable[[Iterable[dict[str, Any]], Path], int]] = {
    "jsonl": write_jsonl,
    "csv": write_turns_csv,
    "parquet": write_parquet,
    "otel": write_otel,
    "otel-metrics": write_otel_metrics,
}
# ``--steps``: one row per step (telemetry.export.step_table) in the formats that hold a table.
STEP_WRITERS: dict[str, Callable[[Iterable[dict[str, Any]], Path], int]] = {
    "jsonl": write_steps_jsonl,
    "csv": write_steps_csv,
    "parquet": write_steps_parquet,
}


def export(
    records: Iterable[dict[str, Any]] | Callable[[], Iterable[dict[str, Any]]],
    fmt: str,
    out: Path,
    *,
    redact_text: bool = False,
    steps: bool = False,
) -> int:
    """Write ``records`` as ``fmt`` to ``out`` (``-``: standard output); returns the turns written, or
    with ``steps`` the step table's rows. Given a function that reads them afresh on each call (a log
    read line by line), the records stream through: none is kept past its own rows (Parquet holds the
    table's rows, not the records)."""
    writers = STEP_WRITERS if steps else WRITERS
    if fmt not in writers:
        raise ValueError(f"unknown format {fmt!r}{' for steps' if steps else ''}; choose from {', '.join(writers)}")
    if callable(records):
        source = records
    else:
        kept = list(records)  # several passes over what may be a one-shot iterator
        source = lambda: kept  # noqa: E731

    def prepared() -> Iterator[dict[str, Any]]:
        return (safe_urls(redact(r) if redact_text else r) for r in source())

    if out != STDOUT:
        out.parent.mkdir(parents=True, exist_ok=True)
    return writers[fmt](prepared(), out)


def turns_frame(records: Iterable[Any]) -> Any:
    """Turns (``TurnRecord`` s or record dicts) as a pandas DataFrame: the export's columns (``table``), in
    its order and with its types as nullable pandas dtypes, base URLs without credentials. Needs pandas."""
    import pandas as pd

    frame = pd.DataFrame.from_records(list(turn_rows(records)), columns=list(table.HEADER))
    return frame.astype(pandas_dtypes(table.COLUMNS))


def turn_rows(records: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Turns (``TurnRecord`` s or record dicts) as the turn table's rows, masked as an export masks them
    (:func:`safe_urls`): what every frame of turns is built from."""
    for r in records:
        yield table.row(safe_urls(r.to_dict() if hasattr(r, "to_dict") else r))
