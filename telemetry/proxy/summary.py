"""A proxy run's calls in figures: how many by client and model, TTFT and TPOT medians, tokens with the
share read from the provider's prompt cache, cost, and the calls that failed or were retries.

``ttft proxy`` prints these when a run ends (``tui.commands.proxy.output``); they are computed here, so
the printing only writes them.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from ..metrics import TokenCounts
from ..record import TurnRecord
from .shape import CallShape


@dataclass(frozen=True, slots=True)
class CallsSummary:
    """A run's calls in figures (see the module doc). ``failed``: (HTTP status or None, how the call
    failed, how many), most first; ``cost_usd`` None when no call was priced."""

    calls: int
    by_client_model: tuple[tuple[str, str, int], ...]  # (client, model, calls), most first
    ttft_p50_ms: float | None
    tpot_p50_ms: float | None
    input_tokens: int
    cached_input_tokens: int
    output_tokens: int
    cost_usd: float | None
    unpriced: int  # calls with no price (an unknown model, counts estimated)
    failed: tuple[tuple[int | None, str, int], ...]
    retries: int  # calls the app's SDK marked as a retry (X-Stainless-Retry-Count above 0)


def cache_share(tokens: TokenCounts) -> float | None:
    """The share of a call's input read from the provider's prompt cache; None when the server said nothing."""
    if not tokens.input or tokens.cached_input is None:
        return None
    return tokens.cached_input / tokens.input


def _p50(values: Sequence[float | None]) -> float | None:
    got = [v for v in values if v is not None]
    return statistics.median(got) if got else None


def summarize(calls: Sequence[tuple[TurnRecord, CallShape]]) -> CallsSummary:
    """The figures of these calls (records and their shapes, as the proxy hands them over)."""
    records = [rec for rec, _ in calls]
    who = Counter((shape.client or "-", rec.model or shape.model or "-") for rec, shape in calls)
    failed = Counter(
        (shape.status, str(rec.error.type) if rec.error is not None else rec.status)
        for rec, shape in calls
        if rec.status != "ok"
    )
    priced = [rec.cost.total_usd for rec in records if rec.cost is not None]
    return CallsSummary(
        calls=len(calls),
        by_client_model=tuple((client, model, n) for (client, model), n in who.most_common()),
        ttft_p50_ms=_p50([r.metrics.ttft_ms for r in records]),
        tpot_p50_ms=_p50([r.metrics.tpot_ms for r in records]),
        input_tokens=sum(r.tokens.input or 0 for r in records),
        cached_input_tokens=sum(r.tokens.cached_input or 0 for r in records),
        output_tokens=sum(r.tokens.output or 0 for r in records),
        cost_usd=sum(priced) if priced else None,
        unpriced=len(records) - len(priced),
        failed=tuple((status, kind, n) for (status, kind), n in failed.most_common()),
        retries=sum(shape.retry_count > 0 for _, shape in calls),
    )
