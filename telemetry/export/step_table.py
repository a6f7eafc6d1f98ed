"""The flat step table: one fixed, typed row per step of a turn (``ttft export --steps``).

A tool-using turn's record lists its steps (``steps``: each model call and each tool call, in the
order they began, on the turn's clock); this table gives each its own row, keyed by the turn it
belongs to (session, turn index, provider, model, ...), so a step's figures can be filtered,
grouped and summed without unpacking the turn table's ``steps`` JSON column.

A turn without tools is one model call: it gives one ``model`` row from its own figures (its span
from the first send to its end, its TTFT, TPOT, wait split, tokens), so every turn of a session, a
comparison or a bench has its rows and the files of all of them concatenate. The columns and their
types never depend on the data, as in :mod:`telemetry.export.table` (whose ``cast`` types each
cell): a model row has empty tool columns and a tool row empty model columns.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .table import Column, ColumnType, cast, get

WAIT_PHASES = ("retries", "pool", "dns", "connect", "tls", "send", "server", "first_token", "client_lag")
TOKEN_FIELDS = ("input", "cached_input", "output", "reasoning", "cache_write_input")


def _cols(prefix: str, type_: ColumnType, names: str, doc: str = "") -> list[Column]:
    return [Column(f"{prefix}{n}", type_, doc) for n in names.split()]


# The turn's keys: the columns of the turn table that say which turn a step belongs to.
TURN_KEYS: tuple[Column, ...] = (
    Column("schema", "str", "ttft.turn/2: the turn's schema"),
    Column("session_id", "str"),
    Column("turn_index", "int", "0-based"),
    Column("started_at", "str", "ISO 8601 UTC"),
    Column("sent_at", "str", "ISO 8601 UTC to the microsecond: the wall clock of start_ms' origin"),
    *_cols("", "str", "provider api model base_url"),
    Column("turn_status", "str", "the turn's status: ok | error | cancelled"),
    Column("agent.stopped", "str", "how a tool-using turn's loop ended; null for a turn without tools"),
    Column("extra.bench.run_id", "str", "bench turns only"),
    Column("extra.bench.level", "float"),
    Column("extra.comparison_id", "str", "comparison turns only"),
    Column("extra.pane_label", "str"),
)

STEP_COLUMNS: tuple[Column, ...] = (
    Column("step_index", "int", "0-based, in the order the steps began"),
    Column("step_count", "int", "the turn's rows: its steps, approvals included (1 for a turn without tools)"),
    Column("kind", "str", "model | tool | approval (the chat's wait for the person's answer)"),
    *_cols("", "float", "start_ms end_ms", "ms since the turn's first send"),
    Column("duration_ms", "float", "end_ms - start_ms (a tool step: its own, to the ns)"),
    Column("status", "str", "model: ok | error | cancelled; tool: ok | error | denied | cancelled"),
    # a model step's own figures (from its own send)
    Column("stop_reason", "str"),
    Column("attempts", "int"),
    *_cols("", "float", "ttft_ms ttfvt_ms tpot_ms e2e_ms"),
    *[Column(f"wait_ms.{p}", "float", "the step's wait, by phase") for p in WAIT_PHASES],
    *_cols("", "float", "server_queue_ms server_ttft_ms server_rest_ms", "the wait by the server's account"),
    Column("server_timing_source", "str"),
    *[Column(f"tokens.{t}", "int") for t in TOKEN_FIELDS],
    Column("tokens.source", "str", "usage | estimated"),
    Column("tool_calls", "int", "the calls this model step asked for"),
    # a tool step's
    *_cols("", "str", "name server call_id", "a tool step's tool, its MCP server, the API's id for the call"),
    Column("result_bytes", "int", "the result's size before any cut"),
    Column("truncated", "bool", "the model got the result cut to the size cap"),
    Column("answer", "str", "an approval step's: once | always | deny | cancelled"),
)

COLUMNS: tuple[Column, ...] = (*TURN_KEYS, *STEP_COLUMNS)
HEADER: tuple[str, ...] = tuple(c.name for c in COLUMNS)
_KEY_PATHS = tuple((c, ("status",) if c.name == "turn_status" else tuple(c.name.split("."))) for c in TURN_KEYS)
_STEP_PATHS = tuple((c, tuple(c.name.split("."))) for c in STEP_COLUMNS)


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def plain_step(rec: dict[str, Any]) -> dict[str, Any]:
    """A turn without tools as the one model step it is, in the form the record's ``steps`` list
    (``telemetry.agent.steps.model_step``): its span is the turn's, its figures the turn's."""
    events, metrics = _dict(rec.get("events_ms")), _dict(rec.get("metrics"))
    start = events.get("sent") if events.get("sent") is not None else events.get("end")
    calls = rec.get("tool_calls")
    return {
        "kind": "model",
        "start_ms": start,
        "end_ms": events.get("end"),
        "status": rec.get("status"),
        "stop_reason": rec.get("stop_reason"),
        "attempts": rec.get("attempts"),
        **{k: metrics.get(k) for k in ("ttft_ms", "ttfvt_ms", "tpot_ms", "e2e_ms", "wait_ms")},
        **{k: metrics.get(k) for k in ("server_queue_ms", "server_ttft_ms", "server_rest_ms", "server_timing_source")},
        "tokens": rec.get("tokens"),
        "tool_calls": len(calls) if isinstance(calls, list) else 0,
    }


def _duration(step: dict[str, Any]) -> Any:
    if step.get("kind") in ("tool", "approval") and step.get("duration_ms") is not None:
        return step["duration_ms"]
    a, b = step.get("start_ms"), step.get("end_ms")
    ok = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (a, b))
    return round(b - a, 3) if ok else None  # type: ignore[operator]


def steps_of(rec: dict[str, Any]) -> list[dict[str, Any]]:
    """The steps a turn's rows come from: its ``steps``, or the one model step a turn without tools is."""
    steps = rec.get("steps")
    if isinstance(steps, list) and steps:
        return [s if isinstance(s, dict) else {} for s in steps]
    return [plain_step(rec)]


def rows(rec: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """One turn's rows: every column, in order, each value of its column's type."""
    keys = {c.name: cast(get(rec, path), c.type) for c, path in _KEY_PATHS}
    steps = steps_of(rec)
    for i, step in enumerate(steps):
        out = dict(keys)
        for c, path in _STEP_PATHS:
            match c.name:
                case "step_index":
                    value: Any = i
                case "step_count":
                    value = len(steps)
                case "duration_ms":
                    value = _duration(step)
                case _:
                    value = get(step, path)
            out[c.name] = cast(value, c.type)
        yield out


def all_rows(records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for rec in records:
        yield from rows(rec)
