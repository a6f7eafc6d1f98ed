"""The chat's prompt: the multi-line prompt box (:mod:`tui.widgets.prompt_box`) with the chat's words
and its Tab completion of ``/attach`` paths.

The screen reacts to a prompt sent (``PromptBox.Submitted``), never to the keys that typed it: how
the prompt is edited (several lines, folded pastes, the history) stays inside the box.
"""

from __future__ import annotations

from collections.abc import Callable

from ...telemetry.log.prompt_history import PromptHistory
from ..format import visible_controls
from ..widgets.prompt_box import PromptBox
from .attach import MAX_SHOWN, complete

PLACEHOLDER = "Ask anything · Enter sends · ctrl+j new line · ↑ earlier prompts · ctrl+r search · F1 help"


class ChatPrompt(PromptBox):
    """The chat's prompt box."""

    def __init__(
        self, clock: Callable[[], int], *, prompts: PromptHistory | None = None, id: str | None = None
    ) -> None:
        super().__init__(clock, placeholder=PLACEHOLDER, prompts=prompts, id=id)
        self.completer = self._complete

    def _complete(self, text: str) -> str | None:
        done = complete(text)
        if done is None:
            return None
        completed, candidates = done
        if candidates:
            more = f" and {len(candidates) - MAX_SHOWN} more" if len(candidates) > MAX_SHOWN else ""
            self.notify(visible_controls("  ".join(candidates[:MAX_SHOWN]) + more), title="Tab", markup=False)
        return completed
