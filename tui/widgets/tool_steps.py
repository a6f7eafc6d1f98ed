"""A tool call's result as the transcript shows it: the tool, how it ended, its size and time, its text folded.

A result is outside text (a tool server's): every character shown is made visible first, never run,
and a long one is folded to its first lines (the model got it whole, or cut at the loop's cap, which
the line says). A logged turn keeps only each result's size, so a reopened turn shows how each call
ended, not its text. The figures come from the step as the record lists it (``telemetry.agent.steps``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from ...backends.attachments import fmt_size
from ...telemetry.duration import fmt_ms
from ..format import visible_controls

RESULT_LINES = 8  # a result's first lines shown; the rest folded
RESULT_CHARS = 1_500  # and at most this many characters of them
STATUS_STYLE = {
    "ok": "green",
    "error": "red",
    "denied": "yellow",
    "cancelled": "yellow",
    "refused": "red",
    "running": "blue",
}
ANSWER_WORDS = {"once": "allowed once", "always": "always allowed", "deny": "denied", "cancelled": "not answered"}


def fold(text: str) -> tuple[str, str | None]:
    """The first lines of ``text`` (at most ``RESULT_LINES`` lines, ``RESULT_CHARS`` characters), and what
    was left out, said (None when nothing was)."""
    lines = text.splitlines()
    shown = "\n".join(lines[:RESULT_LINES])
    cut = len(shown) > RESULT_CHARS
    if cut:
        shown = shown[:RESULT_CHARS]
    if len(lines) <= RESULT_LINES and not cut:
        return text, None
    rest = max(0, len(lines) - RESULT_LINES)
    more = f"{rest:,} more lines, " if rest else ""
    return shown + " …", f"{more}{len(text):,} characters in all (the model read them all)"


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def result_title(step: Mapping[str, Any]) -> Text:
    """``↳ search · web · ok · 1.2 KB · 250 ms`` for a tool step as the record lists it."""
    status = str(step.get("status") or "?")
    t = Text.assemble(("↳ ", "dim"), (visible_controls(str(step.get("name") or "?")), "bold cyan"))
    if step.get("server"):
        t.append(f" · {visible_controls(str(step['server']))}", style="dim")
    t.append(" · ")
    t.append(status, style=STATUS_STYLE.get(status, ""))
    size = step.get("result_bytes")
    if status in ("ok", "error") and isinstance(size, int):
        t.append(f" · {fmt_size(size)}", style="dim")
        if step.get("truncated"):
            t.append(" (cut before the model read it)", style="yellow")
    if status not in ("denied",):
        t.append(f" · {fmt_ms(_num(step.get('duration_ms')))}", style="dim")
    return t


def result_view(step: Mapping[str, Any], text: str | None, asked: Mapping[str, Any] | None = None) -> Group:
    """One call's result: its title line, the person's answer when they were asked, and its text folded
    (``text`` None: not kept, as in a reopened log)."""
    parts: list[Any] = [result_title(step)]
    if asked is not None:
        answer = ANSWER_WORDS.get(str(asked.get("answer")), str(asked.get("answer") or "asked"))
        parts.append(Text(f"  you {answer} after {fmt_ms(_num(asked.get('duration_ms')))}", style="dim"))
    status = step.get("status")
    if status == "denied":
        parts.append(Text("  not run: the model was told you did not allow it", style="dim italic"))
    elif status == "cancelled":
        parts.append(Text("  stopped (Esc) while it ran", style="dim italic"))
    elif status == "refused":
        parts.append(Text("  not run: its arguments were past ttft's limits (the model was told)", style="red italic"))
    elif text is not None:
        shown, notice = fold(visible_controls(text))
        if shown.strip():
            parts.append(Text(shown, style="red" if status == "error" else ""))
        if notice is not None:
            parts.append(Text(f"  … {notice}", style="dim"))
    return Group(*parts)


def logged_results(steps: Sequence[Mapping[str, Any]], calls: int) -> list[Group | None]:
    """For a logged turn's ``calls`` tool calls (in order), each one's result as its tool step says it (the
    steps pair with the calls in order; a call with no step, e.g. one the turn never reached, gets None)."""
    tools = [s for s in steps if s.get("kind") == "tool"]
    asked = {s.get("call_id"): s for s in steps if s.get("kind") == "approval" and s.get("call_id")}
    out: list[Group | None] = []
    for i in range(calls):
        if i < len(tools):
            step = tools[i]
            out.append(result_view(step, None, asked.get(step.get("call_id")) if step.get("call_id") else None))
        else:
            out.append(None)
    return out


class ToolRun(Static):
    """A tool call's result in the transcript, drawn as the call ends (part of its turn)."""

    DEFAULT_CSS = """
    ToolRun {
        height: auto;
        padding: 0 1 0 3;
        margin: 0 0 1 0;
    }
    """

    def __init__(self, step: Mapping[str, Any], text: str | None, asked: Mapping[str, Any] | None = None) -> None:
        super().__init__(result_view(step, text, asked), classes="tool-run")
        self.step = dict(step)
