"""A failed turn, in the transcript: what happened, HTTP status, the provider's message, what to try."""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from tui.format import visible_controls

GENERIC_HINTS = {
    401: "Check the API key (environment variable or config).",
    403: "The key lacks access to this model or feature.",
    404: "Check the model name (Settings, F2) and the base URL.",
    408: "The server timed out; try again or shorten the prompt.",
    413: "The prompt is too large for this model; start a new chat (ctrl+n).",
    429: "Rate limited: wait a moment, lower the request rate, or raise the limit.",
    500: "The provider had an internal error; try again (ctrl+r).",
    502: "The provider's gateway failed; try again (ctrl+r).",
    503: "The provider is overloaded; try again shortly (ctrl+r).",
}


# Failures that are not the provider's answer get a title in words and a "what happened" line.
TITLES = {
    "engine_crashed": "The engine process crashed",
}


class ErrorCard(Static):
    """Built from a ``ttft.turn`` record with status ``error``."""

    def __init__(self, record: dict[str, Any], **kwargs: Any) -> None:
        self.record = record
        super().__init__(self._content(record), classes="error-card", **kwargs)

    @staticmethod
    def _content(rec: dict[str, Any]) -> Text:
        err = rec.get("error") or {}
        status = err.get("status_code")
        kind = err.get("type") or "error"
        words = TITLES.get(kind)
        title = f"✗ {words} ({kind})" if words else f"✗ {kind}" + (f" · HTTP {status}" if status else "")
        t = Text()
        t.append(title + "\n", style="bold red")
        # the provider's message is the server's text: its control characters are shown, never run
        # (made visible before Rich, which would silently drop BEL and CR but send ESC)
        t.append(visible_controls(f"{rec.get('provider', '?')} · {rec.get('model', '?')}") + "\n", style="dim")
        t.append("What happened: " if words else "Provider said: ", style="bold")
        t.append(visible_controls((err.get("message") or "no message").strip()[:800]) + "\n")
        hint = err.get("hint") or GENERIC_HINTS.get(status or 0)
        if hint:
            t.append("Try: ", style="bold")
            t.append(visible_controls(hint) + "\n")
        if rec.get("answer"):
            t.append("The partial answer above is kept.", style="italic")
        else:
            t.append("No answer text arrived.", style="italic dim")
        return t
