"""The compare screen's panes as a set: one added from a model spec, one removed, one kept alone.

The runner's panes, their backends (started and closed on the stream thread) and their widgets change
together here, in the same order, and each pane remembers the spec it was made from, so that the chat
can continue with it. The screen decides when a change is allowed and tells the user; this does it.
"""

from __future__ import annotations

from collections.abc import Callable

from ...backends.base import Backend, Message
from ...backends.compare.panes import LABELS, BackendFactory, next_label
from ...backends.compare.runner import ComparePane, CompareRunner
from ...backends.spec import parse_model
from ...telemetry.settings import TurnSettings
from .controller import PaneController
from .pane import PaneView
from .view import pane_color

Spec = tuple[str, str | None]  # the model spec and its base URL


class PaneRoster:
    """The panes on screen, in the runner's order: ``views[i]`` draws ``runner.panes[i]``."""

    def __init__(
        self,
        runner: CompareRunner,
        controller: PaneController,
        factory: BackendFactory,
        *,
        settings: TurnSettings,
        clock: Callable[[], int],
        specs: dict[str, Spec],
    ) -> None:
        self.runner = runner
        self.controller = controller
        self.factory = factory
        self.settings = settings
        self.clock = clock
        self.specs = specs  # pane label -> the spec it was made from (unknown for backends passed in built)
        self.views: list[PaneView] = []  # changed in place: the screen and the controller share this list

    def new_view(self, pane: ComparePane, *, blind: bool) -> PaneView:
        """The widget for ``pane`` (the last one the runner has), added to the views; the caller mounts it."""
        view = PaneView(pane.label, pane_name(pane), pane_color(LABELS.index(pane.label)), self.clock)
        view.blind = blind
        self.views.append(view)
        return view

    def index(self, label: str) -> int | None:
        """The position of the pane labelled ``label`` (any case, spaces around ignored), or None."""
        label = label.strip().upper()
        return next((i for i, v in enumerate(self.views) if v.label == label), None)

    async def keep(self, idx: int) -> PaneView:
        """Only pane ``idx`` goes on: the others' backends are closed and their widgets removed."""
        for pane in self.runner.keep(idx):
            self.controller.close_backend(pane.backend)
        kept = self.views[idx]
        for view in [v for v in self.views if v is not kept]:
            await view.remove()
        self.views[:] = [kept]
        return kept

    async def remove(self, idx: int) -> None:
        pane = self.runner.remove(idx)
        self.controller.close_backend(pane.backend)
        await self.views.pop(idx).remove()

    async def add(self, spec: str, *, blind: bool, history: list[Message]) -> PaneView:
        """A new pane for ``spec`` with ``history`` as its context; its backend starts on the stream thread
        (a backend process takes a moment). Raises what starting the backend raised; then nothing changed."""
        factory = self.factory
        parsed = parse_model(spec, None)

        async def make() -> Backend:
            return factory(parsed.spec, parsed.base_url)

        backend = await self.controller.stream.call(make)
        label = next_label({v.label for v in self.views})
        pane = ComparePane(backend, label, history=history, settings=self.settings)
        self.specs[label] = (parsed.spec, parsed.base_url)
        self.runner.add(pane)
        self.controller.warm(backend)
        return self.new_view(pane, blind=blind)


def pane_name(pane: ComparePane) -> str:
    """How the pane's title names its model."""
    return f"{pane.backend.provider}:{pane.backend.model}"
