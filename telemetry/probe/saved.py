"""A saved probe: one target's fit, as the recorder uses it to split a turn's server wait.

The split itself is the turn's core (:func:`telemetry.wire.split_server_wait`): the server's
part of the wait (``wait_ms.server + wait_ms.first_token``; some servers send their headers at
once and prefill afterwards, others hold them until the first token, so only the sum compares
across servers) is split into the prefill the probe expects for this many uncached input tokens
(``expected_prefill_ms``) and the rest (``server_queue_ms``: a queue, a model load, a busy server).
A :class:`SavedProbe` is the model it splits by. Without one, nothing is guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .result import ProbeFit


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

    def prefill_at(self, fresh_input_tokens: float) -> float | None:
        """What the fit expects an idle server to take to its first token for this much uncached input."""
        return self.fit.prefill_at(fresh_input_tokens)
