"""The settings that shape a turn's latency, recorded with every turn."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from .plain import as_dict, field_names

# What "speculative decoding on" means wherever a person turns it on: prompt lookup with the
# engine's own defaults (draft length, shortest match, verify threads).
PROMPT_LOOKUP: dict[str, Any] = {"kind": "prompt-lookup"}


@dataclass(frozen=True, slots=True)
class TurnSettings:
    stream: bool = True
    max_output_tokens: int | None = None
    temperature: float | None = None
    reasoning_effort: str | None = None
    reasoning_summary: str | None = None
    thinking_budget: int | None = None
    thinking_display: str | None = None
    # Local speculative decoding: None (off) or {"kind": "prompt-lookup", "num_pred_tokens": 2}.
    speculative: dict[str, Any] | None = None
    max_retries: int = 2
    # The whole turn may take at most this long (seconds); then it ends as an error, partial answer kept.
    deadline_s: float | None = None
    # Anything a backend adds that still shapes latency (GPU layers, ...).
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return as_dict(self, _FIELDS)

    def with_(self, **changes: Any) -> TurnSettings:
        return replace(self, **changes)


_FIELDS = field_names(TurnSettings)
