"""What leaves a comparison: its files (every turn, one summary row per pane and prompt, the verdicts)
and one pane handed back to the chat (its model spec, its conversation and its turns)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ...backends.base import Message
from ...backends.compare.runner import ComparePane, PromptResult
from ...telemetry.compare.stats import Comparison, write_comparison
from ...telemetry.record import TurnRecord
from .pane import PaneView


@dataclass(frozen=True)
class ChatHandoff:
    """What the chat continues with when the compare screen hands one pane back to it."""

    spec: str
    base_url: str | None
    messages: tuple[Message, ...]  # the pane's conversation: the chat's context from now on
    records: tuple[TurnRecord, ...]  # the pane's turns in this comparison, for the chat's transcript
    label: str

    @classmethod
    def of(cls, view: PaneView, pane: ComparePane, spec: tuple[str, str | None]) -> ChatHandoff:
        """Pane ``pane`` (drawn by ``view``), made from ``spec``, as the chat takes it over."""
        return cls(spec[0], spec[1], tuple(pane.history), tuple(view.turn_records), view.label)


def export(results: Sequence[tuple[PromptResult, Comparison]], out_dir: Path, name: str) -> list[Path]:
    """Every prompt so far, its turns and its comparison, as ``telemetry.compare.stats.write_comparison``
    writes them under ``out_dir``; nothing (and no file) before the first prompt has ended."""
    records = [r for res, _ in results for recs in res.as_dicts() for r in recs]
    if not records:
        return []
    parts = [({"prompt_index": res.prompt_index, "mode": res.mode}, c) for res, c in results]
    return list(write_comparison(records, parts, out_dir, name))
