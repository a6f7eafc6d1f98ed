"""The chat's prompt: where the user types, and the one message it sends up, ``ChatPrompt.Sent``.

The screen reacts to a prompt sent, never to the keys that typed it: how the prompt is edited (one
line today; several lines, a history of past prompts, attachments listed above it) stays inside this
widget, and what is sent and when reaches the screen the same way.
"""

from __future__ import annotations

from collections.abc import Callable

from textual.message import Message
from textual.widgets import Input

PLACEHOLDER = "Ask anything · Enter sends · Esc cancels · F1 help"


class ChatPrompt(Input):
    """The one-line prompt. Enter sends its text (stripped; an empty one sends nothing), stamped on the
    events' clock as it is handled: what the user waits for starts there, not at the request's send."""

    class Sent(Message):
        """A prompt sent with Enter. The text stays in the prompt until the screen takes it (``clear``):
        one the chat cannot send now (a turn in flight) is not lost."""

        def __init__(self, prompt: ChatPrompt, text: str, submitted_ns: int) -> None:
            super().__init__()
            self.prompt = prompt
            self.text = text
            self.submitted_ns = submitted_ns  # Enter, on the events' clock: ttft's own delay runs from here

        @property
        def control(self) -> ChatPrompt:
            return self.prompt

    def __init__(self, clock: Callable[[], int], *, id: str | None = None) -> None:
        super().__init__(placeholder=PLACEHOLDER, id=id)
        self.clock = clock

    def on_input_submitted(self, event: Input.Submitted) -> None:
        submitted = self.clock()  # first: the stamp is the Enter, not what handling it cost
        event.stop()  # the screen hears Sent, not the Input's own message
        text = event.value.strip()
        if text:
            self.post_message(self.Sent(self, text, submitted))
