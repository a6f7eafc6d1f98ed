"""Compare panes from model specs: ``PROVIDER:MODEL[@URL]`` parsing, pane labels, and building the panes'
backends through a factory the caller passes in (the chat, the compare screen and ``ttft compare`` all do)."""

from __future__ import annotations

import random
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from ...telemetry.settings import TurnSettings
from ..base import Backend, Message

if TYPE_CHECKING:
    from .runner import ComparePane

LABELS = "ABCD"
MAX_PANES = len(LABELS)

BackendFactory = Callable[[str, str | None], Backend]


def in_process_factory(spec: str, base_url: str | None, *, timeout_s: float | None = None) -> Backend:
    """A backend in this process (headless runs: nothing paints, so nothing can delay a stamp).

    ``timeout_s``: the token idle timeout (``--timeout``); None is the provider's own."""
    from ..providers.registry import create_backend  # imported late: `ttft --help` stays fast

    return create_backend(spec, base_url=base_url, timeout_s=timeout_s)


def check_count(n: int) -> None:
    if not 1 <= n <= MAX_PANES:
        raise ValueError(f"compare takes 1 to {MAX_PANES} models")


def pane_order(n: int, *, blind: bool, seed: int | None = None) -> list[int]:
    """Which backend each label gets: in order, or (blind) shuffled, so pane A is not simply the first -m."""
    order = list(range(n))
    if blind:
        random.Random(seed).shuffle(order)
    return order


def build_panes(
    backends: Sequence[Backend],
    order: Sequence[int],
    *,
    settings: TurnSettings,
    history: Sequence[Message] = (),
) -> list[ComparePane]:
    """Label ``k`` gets ``backends[order[k]]``; every pane starts from the same conversation."""
    from .runner import ComparePane  # imported late: the CLI's parser needs only the specs

    check_count(len(backends))
    return [ComparePane(backends[j], LABELS[k], history=list(history), settings=settings) for k, j in enumerate(order)]


def next_label(used: Collection[str]) -> str:
    """The first free label for a pane added later; ValueError when every label is taken."""
    for c in LABELS:
        if c not in used:
            return c
    raise ValueError(f"at most {MAX_PANES} panes")
