"""Request traces a bench replays: Mooncake JSONL, and ttft's own session logs read as traces.

A trace says when each request came (ms from the start), how long its prompt and answer were, and
which of its prompt's blocks it shared with other requests. The Mooncake format (what AIPerf,
GuideLLM and the Mooncake paper's traces use) is one JSON object a line::

    {"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": [0, 1, 2, ...]}

``hash_ids`` names the prompt's blocks of :data:`BLOCK_TOKENS` tokens: equal ids are equal text, so
two requests whose ids start alike share a prefix, and the bench reproduces that sharing (a
server's prefix cache then sees what it saw in production). ``input_length`` may end inside the
last block.

A ttft session log (``ttft.turn`` lines, read by :mod:`telemetry.log.turns`: old lines upgraded,
bad ones skipped and counted) is a trace too: each turn's send time, input tokens (the whole
context the chat sent) and output tokens. A chat resends its history, so each conversation's turns
are given one chain of block ids that grows with its context: turn k shares turn k-1's text up to
the shorter of the two, as the real chat's prompts did.

Every file here is untrusted (someone else's trace, an old log, a damaged disk): a line that does
not read is counted with the first reason, never a traceback; values are bounded.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ... import json_guard
from ...errors import TtftError
from ...json_guard import JsonRefused
from ...log.turns import Skipped, read_records
from ...tokens import tokens_for_chars
from .lengths import MAX_TOKENS

BLOCK_TOKENS = 512  # Mooncake's block: one hash id per 512 prompt tokens
MAX_LINES = 1_000_000  # requests read from one trace; past this the rest are left out, and said so
MAX_OFFSET_MS = 7 * 24 * 3600 * 1000.0  # a week: a later timestamp is not a trace's offset


@dataclass(frozen=True, slots=True)
class TraceRequest:
    """One request of a trace."""

    at_ms: float  # when it was sent, ms after the trace's first request
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()  # one per BLOCK_TOKENS of the prompt; equal ids are equal text


@dataclass
class Trace:
    """A trace's requests in send order, what kind of file it was, and what did not read."""

    source: str
    kind: str  # "mooncake" | "ttft-session"
    requests: list[TraceRequest] = field(default_factory=list)
    skipped: int = 0
    first_problem: str = ""
    cut: int = 0  # lines past MAX_LINES, left out

    def problem(self, why: str) -> None:
        self.skipped += 1
        self.first_problem = self.first_problem or why

    def notes(self) -> list[str]:
        """Sentences for what was left out (none when every line read)."""
        out = []
        if self.skipped:
            s = "s" if self.skipped != 1 else ""
            out.append(f"skipped {self.skipped} line{s} of {self.source} that could not be read ({self.first_problem})")
        if self.cut:
            out.append(f"read the first {MAX_LINES:,} requests of {self.source}; left out {self.cut:,} more")
        return out

    @property
    def duration_ms(self) -> float:
        return self.requests[-1].at_ms if self.requests else 0.0

    def summary(self) -> dict[str, Any]:
        """What summary.json says about the trace replayed."""
        shared = _shared_blocks(self.requests)
        return {
            "source": self.source,
            "kind": self.kind,
            "requests": len(self.requests),
            "duration_s": self.duration_ms / 1000,
            "skipped_lines": self.skipped,
            "blocks": sum(len(r.hash_ids) for r in self.requests),
            "blocks_seen_before": shared,  # blocks a prefix cache could have served
        }


def _shared_blocks(requests: Iterable[TraceRequest]) -> int:
    """Blocks of the trace's prompts that an earlier prompt began with the same way (prefix hits)."""
    seen: set[int] = set()
    hits = 0
    for r in requests:
        key, missed = 0, False
        for h in r.hash_ids:
            key = hash((key, h))  # the block and every block before it
            if not missed and key in seen:
                hits += 1
            else:
                missed = True
                seen.add(key)
    return hits


class TraceError(TtftError, ValueError):
    """A trace that cannot be replayed at all (unreadable file, no request in it): says why."""


def read_trace(path: Path) -> Trace:
    """The trace in ``path``: a ttft session log when its first line is a ``ttft.turn`` record, else Mooncake."""
    try:
        with path.open("rb") as f:
            first = b""
            for raw in f:
                if raw.strip():
                    first = raw
                    break
    except OSError as exc:
        raise TraceError(f"cannot read the trace {path}: {exc.strerror or exc}") from None
    if not first:
        raise TraceError(f"the trace {path} is empty")
    trace = read_session_trace(path) if _is_turn_line(first) else read_mooncake(path)
    if not trace.requests:
        why = f" ({trace.first_problem})" if trace.first_problem else ""
        raise TraceError(f"no request in the trace {path} could be read{why}")
    return trace


def _is_turn_line(raw: bytes) -> bool:
    try:
        obj = json_guard.loads(raw)
    except ValueError:
        return False
    return isinstance(obj, dict) and str(obj.get("schema", "")).startswith("ttft.turn/")


def _whole(v: object, lo: int, hi: int) -> int | None:
    """An integer in [lo, hi] (a float with no fraction too: some writers emit 512.0), else None."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        return None
    if isinstance(v, float) and not (math.isfinite(v) and v.is_integer()):
        return None
    n = int(v)
    return n if lo <= n <= hi else None


def _lines(path: Path, trace: Trace) -> Iterator[tuple[int, object]]:
    with path.open("rb") as f:
        for number, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                yield number, json_guard.loads(raw, f"line {number}")
            except JsonRefused as exc:
                trace.problem(f"line {number} is not JSON" if exc.reason == "not_json" else str(exc))


def parse_mooncake(obj: object, where: str) -> TraceRequest:
    """One Mooncake line as a request; ValueError naming the field that does not read."""
    if not isinstance(obj, dict):
        raise ValueError(f"{where} is not an object")
    ts = obj.get("timestamp")
    if isinstance(ts, bool) or not isinstance(ts, int | float) or not math.isfinite(ts) or not 0 <= ts <= MAX_OFFSET_MS:
        raise ValueError(f"{where}: timestamp is not a time in ms from the start")
    n_in = _whole(obj.get("input_length"), 1, MAX_TOKENS)
    if n_in is None:
        raise ValueError(f"{where}: input_length is not a token count")
    n_out = _whole(obj.get("output_length"), 0, MAX_TOKENS)
    if n_out is None:
        raise ValueError(f"{where}: output_length is not a token count")
    ids = obj.get("hash_ids", [])
    if not isinstance(ids, list) or any(_whole(h, -(2**63), 2**63 - 1) is None for h in ids):
        raise ValueError(f"{where}: hash_ids is not a list of integers")
    blocks = -(-n_in // BLOCK_TOKENS)
    return TraceRequest(float(ts), n_in, max(1, n_out), tuple(int(h) for h in ids[:blocks]))


def read_mooncake(path: Path) -> Trace:
    """A Mooncake JSONL trace, sorted by timestamp, offsets from its first request."""
    trace = Trace(str(path), "mooncake")
    rows: list[TraceRequest] = []
    try:
        for number, obj in _lines(path, trace):
            if len(rows) >= MAX_LINES:
                trace.cut += 1
                continue
            try:
                rows.append(parse_mooncake(obj, f"line {number}"))
            except ValueError as exc:
                trace.problem(str(exc))
    except OSError as exc:
        raise TraceError(f"cannot read the trace {path}: {exc.strerror or exc}") from None
    trace.requests = _from_start(rows)
    return trace


def _from_start(rows: list[TraceRequest]) -> list[TraceRequest]:
    rows.sort(key=lambda r: r.at_ms)  # stable: equal stamps keep the file's order
    t0 = rows[0].at_ms if rows else 0.0
    return [TraceRequest(r.at_ms - t0, r.input_tokens, r.output_tokens, r.hash_ids) for r in rows]


def _iso_ms(text: object) -> float | None:
    """An ISO 8601 time with its zone in ms since the epoch, or None (a bare time is no clock to order by)."""
    if not isinstance(text, str):
        return None
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when.timestamp() * 1000 if when.tzinfo is not None else None


def _wall_ms(rec: dict[str, Any]) -> float | None:
    """When a logged turn was sent, in ms since the epoch: its ``sent_at``; an older line's ``started_at``."""
    sent = _iso_ms(rec.get("sent_at"))
    return sent if sent is not None else _iso_ms(rec.get("started_at"))


def _count(tokens: dict[str, Any], key: str) -> int | None:
    return _whole(tokens.get(key), 0, MAX_TOKENS)


def _chain_key(rec: dict[str, Any]) -> tuple[object, ...]:
    """Which conversation a logged turn belongs to: its session, and within a bench's or a
    comparison's log, its own request or pane (their prompts share no history)."""
    extra = rec.get("extra") or {}
    bench = extra.get("bench") if isinstance(extra.get("bench"), dict) else None
    if bench is not None:
        return (rec.get("session_id"), "bench", bench.get("conversation", bench.get("index")))
    return (rec.get("session_id"), extra.get("comparison_id"), extra.get("pane"), extra.get("trial"))


def read_session_trace(path: Path) -> Trace:
    """A ttft session log as a trace: every logged turn with a send time, in send order."""
    trace = Trace(str(path), "ttft-session")
    skipped = Skipped()
    rows: list[tuple[float, int, int, tuple[object, ...]]] = []
    try:
        for rec in read_records(path, skipped):
            if len(rows) >= MAX_LINES:
                trace.cut += 1
                continue
            at = _wall_ms(rec)
            if at is None:
                trace.problem(f"turn {rec.get('turn_index')} has no send time (started_at)")
                continue
            tokens = rec.get("tokens") or {}
            n_in = _count(tokens, "input") or tokens_for_chars(len(str(rec.get("prompt") or "")))
            n_out = _count(tokens, "output") or tokens_for_chars(len(str(rec.get("answer") or "")))
            rows.append((at, max(1, n_in), max(1, n_out), _chain_key(rec)))
    except OSError as exc:
        raise TraceError(f"cannot read the trace {path}: {exc.strerror or exc}") from None
    bad = sum(skipped.lines.values())
    if bad:
        trace.skipped += bad
        trace.first_problem = trace.first_problem or "not a well-formed ttft.turn record"
    rows.sort(key=lambda r: r[0])
    # One chain of block ids per conversation, grown as its context grows (a shorter prompt than the
    # last one: the history was cleared, a new chain).
    chains: dict[tuple[object, ...], tuple[list[int], int]] = {}
    next_id = 0
    requests = []
    for at, n_in, n_out, key in rows:
        blocks = -(-n_in // BLOCK_TOKENS)
        ids, last = chains.get(key, ([], 0))
        if n_in < last:
            ids = []
        while len(ids) < blocks:
            ids.append(next_id)
            next_id += 1
        chains[key] = (ids, n_in)
        requests.append(TraceRequest(at, n_in, n_out, tuple(ids[:blocks])))
    trace.requests = _from_start(requests)
    return trace
