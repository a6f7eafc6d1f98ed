"""A level's TTFT split by the server's own account: the share spent in its queue, in its prefill, and
the rest (network, HTTP, the server's front end and tokenizer, the client's reader).

Each record's join (``metrics.server_queue_ms``, ``server_ttft_ms``, ``server_rest_ms``:
:func:`telemetry.wire.join_server`) is summed over the level's completed requests that have one, and
each sum is divided by those requests' summed TTFT, so the three shares add up to 1 and a slow
request weighs what it cost. Where the server reports no queue (llama-server's ``timings`` give its
prompt time alone) ``queue_share`` is None and a wait for a slot is in ``rest_share``: the source
says which. Requests whose server figures exceeded their TTFT (no rest: a clock or a figure off) are
left out and counted.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from ..record import TurnRecord


def ttft_split(ok: Sequence[TurnRecord]) -> dict[str, Any] | None:
    """``{queue_share, prefill_share, rest_share, requests, source}`` over ``ok``, or None when no request
    carries the server's split."""
    joined = [
        m
        for r in ok
        if (m := r.metrics).ttft_ms and m.ttft_ms > 0 and m.server_rest_ms is not None and m.server_ttft_ms is not None
    ]
    if not joined:
        return None
    total = sum(m.ttft_ms or 0.0 for m in joined)
    with_queue = all(m.server_queue_ms is not None for m in joined)
    queue = sum(m.server_queue_ms or 0.0 for m in joined)
    prefill = sum(m.server_ttft_ms or 0.0 for m in joined)
    sources = Counter(m.server_timing_source or "?" for m in joined)
    return {
        "queue_share": round(queue / total, 4) if with_queue else None,
        "prefill_share": round(prefill / total, 4),
        "rest_share": round(max(total - queue - prefill, 0.0) / total, 4),
        "requests": len(joined),
        "left_out": sum(1 for r in ok if r.metrics.server_ttft_ms is not None) - len(joined),
        "source": ",".join(sorted(sources)),
    }
