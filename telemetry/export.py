"""Export logged turns as JSONL, flat CSV (the fixed table of ``telemetry.table``), Parquet, or
OpenTelemetry GenAI metrics (OTLP JSON). An output path of ``-`` is standard output."""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import urlsplit

from telemetry import table
from telemetry.urls import redact_url

TEXT_FIELDS = ("prompt", "answer", "reasoning")
# A CSV cell a spreadsheet would run as a formula (OWASP's list: = + - @, tab, carriage return) ...
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
# ... unless it is a plain number, which a spreadsheet reads as the number it is.
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")


STDOUT = Path("-")  # an output path that means standard output


class _Stdout(io.TextIOBase):
    """Standard output as a file to write and close, without closing it (``-o -``)."""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        return sys.stdout.write(s)

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


def safe_urls(rec: dict[str, Any]) -> dict[str, Any]:
    """``base_url`` without credentials or query values, also for lines logged before ttft masked them."""
    if not rec.get("base_url"):
        return rec
    return {**rec, "base_url": redact_url(rec["base_url"])}


def redact(rec: dict[str, Any]) -> dict[str, Any]:
    """Drop the conversation text; keep every number."""
    out = dict(rec)
    for k in TEXT_FIELDS:
        if k in out:
            out[k] = None
    out["tool_calls"] = [{"name": t.get("name"), "arguments": None} for t in rec.get("tool_calls") or []]
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


def _csv_value(value: Any) -> Any:
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


def write_turns_csv(records: Iterable[dict[str, Any]], out: Path) -> int:
    """One row per turn under the fixed header of ``telemetry.table`` (one pass, nothing held)."""
    n = 0
    with open_private(out, newline="") as f:
        w = csv.writer(f)
        w.writerow(table.HEADER)
        for r in records:
            w.writerow([_csv_value(v) for v in table.row(r).values()])
            n += 1
    return n


def write_parquet(records: Iterable[dict[str, Any]], out: Path) -> int:
    """The same table as Parquet, every column typed (also those all null), through polars.
    Raises ``ModuleNotFoundError`` when polars is not installed."""
    import polars as pl

    types = {"str": pl.String, "json": pl.String, "int": pl.Int64, "float": pl.Float64, "bool": pl.Boolean}
    schema = {c.name: types[c.type] for c in table.COLUMNS}
    frame = pl.from_dicts([table.row(r) for r in records], schema=schema)
    if out == STDOUT:
        sys.stdout.flush()
        frame.write_parquet(sys.stdout.buffer)
    else:
        open_private(out).close()  # created 0600 first; polars then writes the bytes into it
        frame.write_parquet(out)
    return frame.height


# --- OpenTelemetry GenAI semantic conventions -------------------------------------
# Histogram metric name -> (unit, how to read it from a turn record).
def _sec(v: float | None) -> float | None:
    return None if v is None else v / 1000


OTEL_HISTOGRAMS: dict[str, tuple[str, Any]] = {
    "gen_ai.client.operation.duration": ("s", lambda r: _sec(r["metrics"].get("total_ms"))),
    "gen_ai.client.operation.time_to_first_chunk": ("s", lambda r: _sec(r["metrics"].get("ttft_ms"))),
    "gen_ai.client.operation.time_per_output_chunk": ("s", lambda r: _sec(r["metrics"]["itl_ms"].get("p50"))),
    "gen_ai.server.time_to_first_token": ("s", lambda r: _sec(r["metrics"].get("ttft_ms"))),
    "gen_ai.server.time_per_output_token": ("s", lambda r: _sec(r["metrics"].get("tpot_ms"))),
}
# Default explicit bounds from the semantic conventions' advice for durations (s).
DURATION_BOUNDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
TOKEN_BOUNDS: list[float] = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]


def otel_attributes(rec: dict[str, Any]) -> dict[str, Any]:
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": rec.get("provider"),
        "gen_ai.request.model": rec.get("model"),
        "gen_ai.response.model": rec.get("model"),
    }
    if rec.get("base_url"):
        parts = urlsplit(rec["base_url"])
        attrs["server.address"] = parts.hostname
        attrs["server.port"] = parts.port or (443 if parts.scheme == "https" else 80)
    if rec.get("error"):
        attrs["error.type"] = rec["error"].get("type")
    tok = rec.get("tokens") or {}
    for key, name in (
        ("input", "gen_ai.usage.input_tokens"),
        ("output", "gen_ai.usage.output_tokens"),
        ("reasoning", "gen_ai.usage.reasoning.output_tokens"),
        ("cached_input", "gen_ai.usage.cache_read.input_tokens"),
    ):
        if tok.get(key) is not None:
            attrs[name] = tok[key]
    return {k: v for k, v in attrs.items() if v is not None}


def _otlp_value(v: Any) -> dict[str, Any]:
    if isinstance(v, bool):
        return {"boolValue": v}
    if isinstance(v, int):
        return {"intValue": str(v)}
    if isinstance(v, float):
        return {"doubleValue": v}
    return {"stringValue": str(v)}


def _point(value: float, attrs: dict[str, Any], t_unix_nano: int, bounds: list[float]) -> dict[str, Any]:
    counts = [0] * (len(bounds) + 1)
    counts[next((i for i, b in enumerate(bounds) if value <= b), len(bounds))] = 1
    return {
        "attributes": [{"key": k, "value": _otlp_value(v)} for k, v in attrs.items()],
        "timeUnixNano": str(t_unix_nano),
        "count": "1",
        "sum": value,
        "min": value,
        "max": value,
        "bucketCounts": [str(c) for c in counts],
        "explicitBounds": bounds,
    }


def otel_document(records: Iterable[dict[str, Any]], counted: list[int] | None = None) -> dict[str, Any]:
    """OTLP/JSON ``ExportMetricsServiceRequest``: one histogram data point per turn and metric.
    The records are read once, one at a time; ``counted`` gets how many there were."""
    metrics: dict[str, dict[str, Any]] = {}
    n = 0
    for rec in records:
        n += 1
        t = int(datetime.fromisoformat(rec["started_at"]).timestamp() * 1e9) if rec.get("started_at") else 0
        attrs = otel_attributes(rec)
        for name, (unit, read) in OTEL_HISTOGRAMS.items():
            v = read(rec)
            if v is None:
                continue
            m = metrics.setdefault(name, {"name": name, "unit": unit, "histogram": {"dataPoints": []}})
            m["histogram"]["dataPoints"].append(_point(v, attrs, t, DURATION_BOUNDS))
        tok = rec.get("tokens") or {}
        for ttype in ("input", "output"):
            if tok.get(ttype) is None:
                continue
            m = metrics.setdefault(
                "gen_ai.client.token.usage",
                {"name": "gen_ai.client.token.usage", "unit": "{token}", "histogram": {"dataPoints": []}},
            )
            m["histogram"]["dataPoints"].append(
                _point(float(tok[ttype]), {**attrs, "gen_ai.token.type": ttype}, t, TOKEN_BOUNDS)
            )
    if counted is not None:
        counted.append(n)
    for m in metrics.values():
        m["histogram"]["aggregationTemporality"] = 1  # DELTA: each point is one turn
    return {
        "resourceMetrics": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "ttft"}}]},
                "scopeMetrics": [{"scope": {"name": "ttft"}, "metrics": list(metrics.values())}],
            }
        ]
    }


def write_otel(records: Iterable[dict[str, Any]], out: Path) -> int:
    counted: list[int] = []
    doc = otel_document(records, counted)
    with open_private(out) as f:
        f.write(json.dumps(doc, indent=1))
    return counted[0]


WRITERS: dict[str, Callable[[Iterable[dict[str, Any]], Path], int]] = {
    "jsonl": write_jsonl,
    "csv": write_turns_csv,
    "parquet": write_parquet,
    "otel": write_otel,
}


def export(
    records: Iterable[dict[str, Any]] | Callable[[], Iterable[dict[str, Any]]],
    fmt: str,
    out: Path,
    *,
    redact_text: bool = False,
) -> int:
    """Write ``records`` as ``fmt`` to ``out`` (``-``: standard output). Given a function that reads
    them afresh on each call (a log read line by line), the records stream through: none is kept
    past its own row (Parquet holds the table's rows, not the records)."""
    if fmt not in WRITERS:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(WRITERS)}")
    if callable(records):
        source = records
    else:
        kept = list(records)  # several passes over what may be a one-shot iterator
        source = lambda: kept  # noqa: E731

    def prepared() -> Iterator[dict[str, Any]]:
        return (safe_urls(redact(r) if redact_text else r) for r in source())

    if out != STDOUT:
        out.parent.mkdir(parents=True, exist_ok=True)
    return WRITERS[fmt](prepared(), out)
