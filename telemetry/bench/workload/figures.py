"""A level's figures about its workload: lengths drawn, the prefix cache, cost by turn, arrivals (pure).

``telemetry.bench.aggregate.aggregate_level`` adds these to each level; each is left out when the
level has nothing to say about it, so a plain bench's summary keeps its shape:

- ``lengths``: the distribution of the input and output lengths drawn (what was asked), and of the
  output tokens received (a server that stops at its end-of-sequence token answers shorter);
- ``prefix_cache``: input tokens the server says it served from its cache (usage
  ``cached_tokens``, else llama-server's ``cache_n``; a server whose usage says nothing of it reads
  as 0, as the record keeps it), and TTFT of the requests that hit the cache against those that
  missed: a hit is :data:`CACHE_HIT_SHARE` of the prompt or more from cache;
- ``by_turn``: per turn of a conversation, TTFT, the server's own prefill time where it reports
  one, and the input tokens sent: what a growing context costs;
- ``conversations``: how many the level held, and how many a failed turn cut short;
- ``arrivals``: for requests sent on a schedule (open loop, a trace), how late each left against
  it: a late client delays the load it was asked to offer.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...metrics import percentiles
from ...record import TurnRecord
from ...server.timings import server_timings
from ..requests import BenchTurn

CACHE_HIT_SHARE = 0.25  # a request served this share of its prompt from cache or more hit it
ON_TIME_MS = 5.0  # a scheduled send this late or less is on time


def _pct(values: Sequence[float], std: bool = True) -> dict[str, float | None]:
    """The sample's percentiles as summary.json writes them, with its standard deviation."""
    out: dict[str, float | None] = percentiles(values).to_dict()
    if std:
        out["std"] = float(np.std(values)) if values else None
    return out


def cached_tokens(rec: TurnRecord) -> int | None:
    """Input tokens the server served from its prefix cache: usage's ``cached_tokens``, else a server
    timing's reused tokens (llama-server ``cache_n``); None when the server says nothing."""
    if rec.tokens.cached_input is not None:
        return rec.tokens.cached_input
    for st in server_timings(rec.server):
        if st.cache_reused_tokens is not None:
            return st.cache_reused_tokens
    return None


def _prefill_ms(rec: TurnRecord) -> float | None:
    for st in server_timings(rec.server):
        if st.prefill_ms is not None:
            return st.prefill_ms
    return None


def lengths(reqs: Sequence[BenchTurn]) -> dict[str, Any] | None:
    drawn_in = [float(t.bench.input_tokens) for t in reqs if t.bench.input_tokens is not None]
    drawn_out = [float(t.bench.output_tokens) for t in reqs if t.bench.output_tokens is not None]
    if not drawn_in and not drawn_out:
        return None
    ok = [t.record.tokens for t in reqs if t.record.status == "ok"]
    got = [float(n.output) for n in ok if n.output is not None]
    sent = [float(n.input) for n in ok if n.input is not None]
    return {
        "input_tokens": _pct(drawn_in),  # drawn: the new user text (a trace's whole prompt)
        "output_tokens": _pct(drawn_out),  # asked for through max_tokens
        "input_tokens_sent": _pct(sent),  # the whole prompt as the server counted it (or estimated)
        "output_tokens_received": _pct(got),
    }


def prefix_cache(ok: Sequence[TurnRecord], with_prefix: int = 0) -> dict[str, Any] | None:
    """``with_prefix``: how many of the level's requests began with a shared prefix (``--prefix-tokens``)."""
    rows = [(r, c) for r in ok if (c := cached_tokens(r)) is not None]
    if not rows:
        return None
    hit_ttft: list[float] = []
    miss_ttft: list[float] = []
    shares: list[float] = []
    hits = 0
    for r, c in rows:
        n_in = r.tokens.input or 0
        share = c / n_in if n_in > 0 else 0.0
        shares.append(share)
        hit = share >= CACHE_HIT_SHARE
        hits += hit
        if r.metrics.ttft_ms is not None:
            (hit_ttft if hit else miss_ttft).append(r.metrics.ttft_ms)
    total = sum(c for _, c in rows)
    return {
        "requests": len(rows),  # completed requests whose server reported cached tokens
        "hits": hits,
        "hit_fraction": hits / len(rows),
        "cached_input_tokens": total,
        "cached_input_tokens_mean": total / len(rows),
        "cached_share": _pct(shares, std=False),  # cached / input tokens, per request
        "ttft_hit_ms": _pct(hit_ttft),
        "ttft_miss_ms": _pct(miss_ttft),
        "hit_share": CACHE_HIT_SHARE,
        "with_prefix": with_prefix,
    }


def by_turn(reqs: Sequence[BenchTurn]) -> list[dict[str, Any]] | None:
    turns: dict[int, list[BenchTurn]] = {}
    for t in reqs:
        if t.bench.turn is not None:
            turns.setdefault(t.bench.turn, []).append(t)
    if not turns:
        return None
    out = []
    for k in sorted(turns):
        group = turns[k]
        ok = [t.record for t in group if t.record.status == "ok"]
        cached = [float(c) for r in ok if (c := cached_tokens(r)) is not None]
        out.append(
            {
                "turn": k,
                "requests": len(group),
                "completed": len(ok),
                "ttft_ms": _pct([v for r in ok if (v := r.metrics.ttft_ms) is not None]),
                "server_prefill_ms": _pct([v for r in ok if (v := _prefill_ms(r)) is not None]),
                "input_tokens": _pct([float(r.tokens.input) for r in ok if r.tokens.input is not None]),
                "cached_input_tokens": _pct(cached),
            }
        )
    return out


def conversations(reqs: Sequence[BenchTurn]) -> dict[str, Any] | None:
    """How many conversations the level held, and how many a failed turn cut short (their later
    turns were never sent)."""
    convs: dict[int, list[BenchTurn]] = {}
    for t in reqs:
        if t.bench.conversation is not None:
            convs.setdefault(t.bench.conversation, []).append(t)
    if not convs:
        return None
    cut = sum(
        1
        for group in convs.values()
        if any(t.record.status != "ok" for t in group) or len(group) < max(t.bench.turns or 0 for t in group)
    )
    return {"conversations": len(convs), "cut_short": cut, "requests": sum(len(g) for g in convs.values())}


def arrivals(reqs: Sequence[BenchTurn]) -> dict[str, Any] | None:
    late = [
        t.bench.sent_at_ms - t.bench.scheduled_at_ms
        for t in reqs
        if t.bench.sent_at_ms is not None and t.bench.scheduled_at_ms is not None
    ]
    if not late:
        return None
    return {
        "scheduled": len(late),
        "late_ms": _pct(late, std=False),  # sent minus scheduled: how late the client ran
        "on_time_ms": ON_TIME_MS,
        "on_time_fraction": sum(x <= ON_TIME_MS for x in late) / len(late),
    }


def workload_figures(reqs: Sequence[BenchTurn], ok: Sequence[TurnRecord]) -> dict[str, Any]:
    """Every workload figure the level has (``reqs``: measured requests; ``ok``: those that completed)."""
    out: dict[str, Any] = {}
    for key, value in (
        ("lengths", lengths(reqs)),
        ("prefix_cache", prefix_cache(ok, sum(t.bench.prefix is not None for t in reqs))),
        ("by_turn", by_turn(reqs)),
        ("conversations", conversations(reqs)),
        ("arrivals", arrivals(reqs)),
    ):
        if value is not None:
            out[key] = value
    return out
