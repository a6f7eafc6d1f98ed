"""The flat turn table: one fixed, typed row per turn, the same columns whatever the content.

The CSV export (and Parquet, through polars) writes these columns in this order for every
turn of every source: a session, a comparison, a bench run. A column's type never depends on
the data: a failed turn and a clean one have the same ``error.*`` columns (null when no error),
a bench turn and a chat turn the same ``extra.*`` columns, so files from different runs
concatenate. Lists and open-ended objects (chunks, the attempt log, the server's own figures)
are one JSON text column each (``json``). A field a record holds that is not listed here is
left out of the table (the JSONL export keeps everything): a new record field gets its column
here, or a JSON column for its whole object until its leaves settle (a test names any field
a real record holds that no column does).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from ..record import chunk_rows

ColumnType = Literal["str", "int", "float", "bool", "json"]
_INT64 = range(-(2**63), 2**63)  # what an int column holds (Parquet's and DuckDB's BIGINT)


@dataclass(frozen=True, slots=True)
class Column:
    name: str  # dotted path into the record: "metrics.itl_ms.p50"
    type: ColumnType
    doc: str = ""


def _cols(prefix: str, type_: ColumnType, names: str, doc: str = "") -> list[Column]:
    return [Column(f"{prefix}{n}", type_, doc) for n in names.split()]


COLUMNS: tuple[Column, ...] = (
    Column("schema", "str", "ttft.turn/2"),
    Column("session_id", "str"),
    Column("turn_index", "int", "0-based"),
    Column("started_at", "str", "ISO 8601 UTC"),
    Column("sent_at", "str", "ISO 8601 UTC to the microsecond: the wall clock of events_ms' origin, the first send"),
    *_cols("", "str", "provider api model base_url"),
    Column("source", "str", "proxy: a call another app sent, timed by ttft proxy; null for ttft's own turns"),
    Column("client", "str", "the proxied app's User-Agent product (claude-cli/2.0.14); null for ttft's own turns"),
    Column("settings.stream", "bool"),
    Column("settings.max_output_tokens", "int"),
    Column("settings.temperature", "float"),
    *_cols("settings.", "str", "reasoning_effort reasoning_summary"),
    Column("settings.thinking_budget", "int"),
    Column("settings.thinking_display", "str"),
    Column("settings.speculative", "json", "local speculative decoding asked for, or null"),
    Column("settings.max_retries", "int"),
    Column("settings.deadline_s", "float"),
    Column("settings.extra", "json", "provider-specific request settings"),
    Column("status", "str", "ok | error | cancelled"),
    *_cols("error.", "str", "type message", "null when the turn did not fail"),
    Column("error.status_code", "int"),
    Column("error.hint", "str"),
    Column("attempts", "int"),
    Column("attempt_log", "json", "[{attempt, sent_ms, headers_ms, status, retry_after_s}]"),
    *_cols("", "str", "prompt answer reasoning", "null with --redact"),
    Column("branch_of", "int", "an edited prompt's turn: the turn_index whose prompt it replaces (a new branch)"),
    Column("attachments", "json", "[{name, bytes, media_type, est_tokens}] of the files sent: never their contents"),
    Column("tool_calls", "json", "[{name, arguments}]"),
    Column("stop_reason", "str"),
    *_cols("agent.", "float", "time_in_model_ms time_in_tools_ms time_in_ttft_ms", "a tool-using turn's split"),
    *_cols("agent.", "int", "step_count model_steps tool_steps max_steps", "null for a turn without tools"),
    Column("agent.stopped", "str", "answer | max_steps | denied | error | cancelled"),
    Column("agent.time_in_approval_ms", "float", "the chat's waits for an answer before calls; null elsewhere"),
    Column("agent.approval_steps", "int", "how many calls the chat asked about; null elsewhere"),
    Column("agent.time_in_app_ms", "float", "a proxy session's: the app's own time between calls; null elsewhere"),
    Column("steps", "json", "[{kind: model|tool|approval, start_ms, end_ms, ...}] in order (docs/log-schema.md)"),
    *_cols("events_ms.", "float", "sent headers first_token first_visible last_token end", "ms since the first send"),
    *_cols("metrics.", "float", "ttft_ms ttfvt_ms reasoning_delay_ms"),
    Column("metrics.reasoning_delay_estimated", "bool"),
    Column("metrics.tpot_ms", "float"),
    *_cols("metrics.itl_ms.", "float", "p50 p90 p95 p99 max"),
    *_cols("metrics.", "float", "e2e_ms total_ms output_tokens_per_s decode_tokens_per_s retry_ms queue_ms"),
    *_cols("metrics.", "float", "load_ms own_delay_ms mcp_start_ms loop_lag_ms"),
    *_cols(
        "metrics.wait_ms.",
        "float",
        "retries pool dns connect tls send server first_token client_lag",
        "the wait, by phase",
    ),
    Column("metrics.expected_prefill_ms", "float", "from a saved probe (ttft probe)"),
    *_cols("metrics.", "float", "server_queue_ms server_ttft_ms server_rest_ms", "the wait by the server's account"),
    Column("metrics.server_timing_source", "str", "vllm | llama-server | probe: whose account"),
    *_cols("metrics.", "float", "server_reasoning_ttft_ms server_content_ttft_ms", "vLLM, from scheduling"),
    *_cols("metrics.phases_ms.", "float", "waiting reasoning streaming"),
    Column("metrics.speculative.source", "str", "null when nothing was drafted"),
    *_cols("metrics.speculative.", "int", "drafted accepted"),
    Column("metrics.speculative.acceptance_rate", "float"),
    Column("metrics.speculative.steps", "int"),
    Column("metrics.speculative.tokens_per_step", "float"),
    *_cols("tokens.", "int", "input cached_input output reasoning"),
    Column("tokens.cache_write_input", "int", "input written to the provider's prompt cache (part of input)"),
    Column("tokens.source", "str", "usage | estimated"),
    *_cols("cost.", "float", "input_usd output_usd total_usd", "USD; null when the turn was not priced"),
    Column("cost.priced_as", "str", "the price entry: the table's provider:model, or a config key"),
    Column("cost.source", "str", "genai-prices VERSION | config"),
    *_cols("http.", "str", "connection http_version request_id", "the final attempt's connection"),
    Column("http.server_processing_ms", "float", "openai-processing-ms"),
    *_cols("http.ratelimit.", "int", "remaining_requests remaining_tokens"),
    *_cols("http.ratelimit.", "str", "reset_requests reset_tokens"),
    Column("server", "json", "what the server or engine reported, under its own names"),
    Column("notices", "json", "{key: why} for anything sent other than asked"),
    Column("chunks", "json", "[{t_ms, kind, tokens}]"),
    Column("chunk_count", "int", "token-bearing chunks"),
    Column("diagnosis", "str"),
    *_cols("extra.bench.", "str", "run_id mode", "bench turns only"),
    Column("extra.bench.level", "float", "concurrency, requests/s or a trace's speedup"),
    Column("extra.bench.index", "int"),
    Column("extra.bench.warmup", "bool"),
    Column("extra.bench.worker", "int"),
    *_cols("extra.bench.", "float", "scheduled_at_ms sent_at_ms"),
    *_cols("extra.bench.", "int", "input_tokens output_tokens", "the lengths the workload drew"),
    *_cols("extra.bench.", "int", "conversation turn turns prefix user", "its conversation, shared prefix, user"),
    Column("extra.comparison_id", "str", "comparison turns only"),
    Column("extra.pane", "int"),
    Column("extra.pane_label", "str"),
    Column("extra.panes", "int"),
    Column("extra.mode", "str"),
    *_cols("extra.", "int", "trial prompt_index position"),
    Column("extra.kept", "bool"),
    Column("extra.other", "json", "any other front-end context, or null"),
)
HEADER: tuple[str, ...] = tuple(c.name for c in COLUMNS)
_TOP_EXTRA = frozenset(c.name.split(".")[1] for c in COLUMNS if c.name.startswith("extra.") and c.name != "extra.other")


_PATHS = tuple((c, tuple(c.name.split("."))) for c in COLUMNS)  # split once: row() runs per turn


def get(rec: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = rec
    for part in path:
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def cast(value: Any, type_: ColumnType) -> Any:
    """The value as its column's type; None when absent or of another type (never a mixed column)."""
    if value is None:
        return None
    if type_ == "json":
        if not value and value.__class__ in (dict, list):  # most such cells: no call to the encoder
            return "{}" if value.__class__ is dict else "[]"
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    if type_ == "bool":
        return value if isinstance(value, bool) else None
    if isinstance(value, bool):  # a bool is an int to Python, never to a column
        return None
    if type_ == "int":
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return value if isinstance(value, int) and value in _INT64 else None  # an odd log's 1e30 fits no column
    if type_ == "float":
        return float(value) if isinstance(value, int | float) else None
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False) if isinstance(value, dict | list) else str(value)


def _plan() -> tuple[tuple[tuple[int, str], ...], tuple[tuple[str, ColumnType, int, str], ...]]:
    """How :func:`row` reaches each column: the nested objects the columns lie in, each found once per
    row from its parent's slot (slot 0: the record), and each column's (name, type, slot, key); slot
    -1 for a column computed from the whole record."""
    slots: dict[tuple[str, ...], int] = {(): 0}
    objects: list[tuple[int, str]] = []
    columns: list[tuple[str, ColumnType, int, str]] = []
    for c, path in _PATHS:
        for depth in range(1, len(path)):
            if path[:depth] not in slots:
                slots[path[:depth]] = len(slots)
                objects.append((slots[path[: depth - 1]], path[depth - 1]))
        computed = c.name in ("chunks", "chunk_count", "extra.other")
        columns.append((c.name, c.type, -1 if computed else slots[path[:-1]], path[-1]))
    return tuple(objects), tuple(columns)


_OBJECTS, _PLAN = _plan()  # row() runs per turn: each nested object is looked up once, not per column


def row(rec: dict[str, Any]) -> dict[str, Any]:
    """One record as the table's row: every column, in order, each value of its column's type."""
    objs: list[Any] = [rec]
    for parent, key in _OBJECTS:  # as get() walks a path: None past anything that is not an object
        o = objs[parent]
        objs.append(o.get(key) if isinstance(o, dict) else None)
    out: dict[str, Any] = {}
    for name, type_, slot, key in _PLAN:
        if slot >= 0:
            o = objs[slot]
            value = o.get(key) if isinstance(o, dict) else None
        elif name == "chunks":
            value = chunk_rows(rec)
        elif name == "chunk_count":
            value = len(rec.get("chunks") or ())
        else:  # extra.other
            extra = rec.get("extra") or {}
            other = {k: v for k, v in extra.items() if k not in _TOP_EXTRA} if isinstance(extra, dict) else {}
            value = other or None
        # the common cells kept as they are without a call (cast's answer for them); the rest through cast
        cls = value.__class__
        if value is None or (cls is str and type_ == "str") or (cls is float and type_ == "float"):
            out[name] = value
        else:
            out[name] = cast(value, type_)
    return out


def rows(records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    return (row(r) for r in records)


def unlisted(rec: dict[str, Any]) -> list[str]:
    """Dotted fields of ``rec`` that no column holds (for the test that keeps the table complete)."""
    listed = set(HEADER)
    missing: list[str] = []

    def walk(d: dict[str, Any], prefix: str) -> None:
        for k, v in d.items():
            key = f"{prefix}{k}"
            if key in listed or (prefix == "extra." and k not in _TOP_EXTRA):
                continue  # a column, or other front-end context (extra.other)
            if (isinstance(v, dict) or v is None) and any(h.startswith(key + ".") for h in listed):
                if v:
                    walk(v, key + ".")
                continue  # an object whose leaves are columns (null when the object is)
            missing.append(key)

    walk(rec, "")
    return missing
