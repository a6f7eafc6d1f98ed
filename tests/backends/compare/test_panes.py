"""Pane specs and construction (backends/compare/panes.py), shared by the chat, the compare screen and the CLI."""

from __future__ import annotations

import pytest
from ttft.backends.compare.panes import LABELS, MAX_PANES, build_panes, next_label, pane_order
from ttft.telemetry.settings import TurnSettings

from tests.support.compare_fakes import ScheduledBackend


def backends(n: int) -> list[ScheduledBackend]:
    return [ScheduledBackend(f"m{i}", ttft_s=0.001, gap_s=0.001, tokens=1) for i in range(n)]


def test_panes_get_labels_in_order_or_shuffled_when_blind() -> None:
    bs = backends(4)
    settings = TurnSettings(max_output_tokens=7)
    panes = build_panes(bs, pane_order(4, blind=False), settings=settings, history=())
    assert [p.label for p in panes] == list(LABELS) and [p.backend for p in panes] == bs
    assert all(p.settings is settings and p.history == [] for p in panes)
    orders = {tuple(pane_order(4, blind=True, seed=s)) for s in range(20)}
    assert len(orders) > 1 and all(sorted(o) == [0, 1, 2, 3] for o in orders)
    assert pane_order(4, blind=True, seed=3) == pane_order(4, blind=True, seed=3)  # a seed replays the shuffle


def test_each_pane_gets_its_own_copy_of_the_history() -> None:
    from ttft.backends.base import Message

    history = [Message("user", "hi"), Message("assistant", "hello")]
    a, b = build_panes(backends(2), [0, 1], settings=TurnSettings(), history=history)
    a.history.append(Message("user", "more"))
    assert b.history == history and len(a.history) == 3


def test_pane_count_and_labels_are_bounded() -> None:
    with pytest.raises(ValueError, match=f"1 to {MAX_PANES}"):
        build_panes(backends(MAX_PANES + 1), range(MAX_PANES + 1), settings=TurnSettings())
    with pytest.raises(ValueError):
        build_panes([], [], settings=TurnSettings())
    assert next_label({"A", "C"}) == "B"
    with pytest.raises(ValueError):
        next_label(set(LABELS))
