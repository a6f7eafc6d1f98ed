"""A saved probe applied to one turn: the server's part of the wait split into expected prefill and queue.

Pure. The server's part is ``wait_ms.server + wait_ms.first_token`` (some servers
send their headers at once and prefill afterwards, others hold the headers until
the first token, so only the sum compares across servers). The probe says what an
idle server took to its first token for this many uncached input tokens (its base
plus the per-token prefill); that much of the server's part is
``expected_prefill_ms``, the rest ``server_queue_ms`` (a queue, a model load, a
busy server). Without a probe, or without the wait's split, nothing is guessed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from telemetry.probe_result import ProbeFit

SERVER_PHASES = ("server", "first_token")


@dataclass(frozen=True, slots=True)
class SavedProbe:
    """A probe's fit as saved for one provider, model and (masked) base URL."""

    provider: str
    model: str
    base_url: str | None
    date: str  # ISO 8601, UTC
    fit: ProbeFit

    def reference(self) -> dict[str, Any]:
        """What a turn's record keeps of the probe it was split with."""
        pre, base = self.fit.prefill_ms_per_1k_input_tokens, self.fit.base_ttft_ms
        return {
            "date": self.date,
            "base_ttft_ms": round(base.value, 3) if base else None,
            "prefill_ms_per_1k_input_tokens": round(pre.value, 3) if pre else None,
        }


@dataclass(frozen=True, slots=True)
class ServerSplit:
    expected_prefill_ms: float
    server_queue_ms: float


def _as_mapping(wait: object) -> Mapping[str, Any] | None:
    if isinstance(wait, Mapping):
        return wait
    if dataclasses.is_dataclass(wait) and not isinstance(wait, type):
        return dataclasses.asdict(wait)
    return None


def server_wait_ms(wait_ms: object) -> float | None:
    """``server + first_token`` of a turn's ``wait_ms``; None when the turn has no such split."""
    wait = _as_mapping(wait_ms)
    if not wait:
        return None
    parts = [wait.get(k) for k in SERVER_PHASES]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in parts):
        return None
    return float(sum(parts))  # type: ignore[arg-type]


def split_server_wait(
    wait_ms: object, input_tokens: int | None, cached_tokens: int | None, fit: ProbeFit
) -> ServerSplit | None:
    """The server's part of this turn's wait as (expected prefill, the rest); the two sum to that part.

    The expected prefill is capped at the part itself (a server faster than at the probe
    had no queue), and is never below 0 (a fit's negative intercept is no negative time).
    """
    server = server_wait_ms(wait_ms)
    if server is None or input_tokens is None:
        return None
    expected = fit.prefill_at(max(input_tokens - (cached_tokens or 0), 0))
    if expected is None:
        return None
    expected = min(max(expected, 0.0), max(server, 0.0))
    return ServerSplit(round(expected, 3), round(max(server - expected, 0.0), 3))


def probe_day(date: str | None) -> str:
    """``2026-12-02T...`` as ``2 Dec`` for a sentence; the text itself (printable, bounded) when it is no date.

    The date comes from a saved probe file or an old log's ``extra.probe``, so it is untrusted:
    the diagnosis sentence it lands in is printed by ``ttft ask`` and drawn in the pane.
    """
    if not date:
        return "an earlier probe"
    try:
        d = datetime.fromisoformat(date)
    except ValueError:
        return "".join(ch for ch in date[:32] if ch.isprintable()) or "an earlier probe"
    return f"{d.day} {d:%b}"
