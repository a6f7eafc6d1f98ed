"""A failed turn, in the transcript: what happened, HTTP status, the provider's message, what to try."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from ...telemetry.errors import ErrorKind
from ...telemetry.log.secrets import mask
from ...telemetry.record import ErrorInfo, TurnRecord
from ..format import visible_controls

GENERIC_HINTS = {
    401: "Check the API key (environment variable or config).",
    403: "The key lacks access to this model or feature.",
    404: "Check the model name (Settings, F2) and the base URL.",
    408: "The server timed out; try again or shorten the prompt.",
    413: "The prompt is too large for this model; start a new chat (ctrl+n).",
    429: "Rate limited: wait a moment, lower the request rate, or raise the limit.",
    500: "The provider had an internal error; try again (F5).",
    502: "The provider's gateway failed; try again (F5).",
    503: "The provider is overloaded; try again shortly (F5).",
}


# Failures that are not the provider's answer get a title in words and a "what happened" line.
TITLES: dict[str, str] = {
    ErrorKind.ENGINE_CRASHED: "The engine process crashed",
}


class ErrorCard(Static):
    """A failed turn's card: what failed, on which model, the message and what to try. :meth:`of` builds
    it from a turn's record; the chat builds one directly when a backend could not even be created."""

    def __init__(self, error: ErrorInfo | None, provider: str, model: str, *, partial: bool = False) -> None:
        super().__init__(_text(error, provider, model, partial=partial), classes="error-card")

    @classmethod
    def of(cls, record: TurnRecord) -> ErrorCard:
        """The card of a turn that ended with status ``error``."""
        return cls(record.error, record.provider, record.model, partial=bool(record.answer))

    @staticmethod
    def _content(rec: TurnRecord) -> Text:
        return _text(rec.error, rec.provider, rec.model, partial=bool(rec.answer))


def _text(err: ErrorInfo | None, provider: str, model: str, *, partial: bool) -> Text:
    status = err.status_code if err is not None else None
    kind = (err.type if err is not None else None) or "error"
    words = TITLES.get(kind)
    title = f"✗ {words} ({kind})" if words else f"✗ {kind}" + (f" · HTTP {status}" if status else "")
    t = Text()
    t.append(title + "\n", style="bold red")
    # the provider's message is the server's text: its control characters are shown, never run
    # (made visible before Rich, which would silently drop BEL and CR but send ESC)
    t.append(visible_controls(f"{provider} · {model}") + "\n", style="dim")
    t.append("What happened: " if words else "Provider said: ", style="bold")
    message = mask(err.message) if err is not None else ""  # masked here too: a card may show an old record
    t.append(visible_controls((message or "no message").strip()[:800]) + "\n")
    hint = (err.hint if err is not None else None) or GENERIC_HINTS.get(status or 0)
    if hint:
        t.append("Try: ", style="bold")
        t.append(visible_controls(mask(hint)) + "\n")
    if partial:
        t.append("The partial answer above is kept.", style="italic")
    else:
        t.append("No answer text arrived.", style="italic dim")
    return t
