"""A tool call's result as the transcript shows it: the tool, how it ended, its size and time, its text folded.

A result is outside text (a tool server's): every character shown is made visible first, never run,
and a long one is folded to its first lines (the model got it whole, or cut at the loop's cap, which
the line says). A logged turn keeps only each result's size, so a reopened turn shows how each call
ended, not its text. The figures come from the step as the record lists it (``telemetry.steps``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Group
from rich.text import Text
from textual.widgets import Static

from ...backends.attachments import fmt_size
from ...telemetry.duration import fmt_ms
from ...telemetry.steps import ApprovalStepRecord, StepRecord, ToolStepRecord, of_kind
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


def result_title(step: ToolStepRecord) -> Text:
    """``↳ search · web · ok · 1.2 KB · 250 ms`` for a tool step as the record lists it."""
    status = step.status or "?"
    t = Text.assemble(("↳ ", "dim"), (visible_controls(step.name or "?"), "bold cyan"))
    if step.server:
        t.append(f" · {visible_controls(step.server)}", style="dim")
    t.append(" · ")
    t.append(visible_controls(status), style=STATUS_STYLE.get(status, ""))
    if status in ("ok", "error"):
        t.append(f" · {fmt_size(step.result_bytes)}", style="dim")
        if step.truncated:
            t.append(" (cut before the model read it)", style="yellow")
    if status not in ("denied",):
        t.append(f" · {fmt_ms(step.duration_ms)}", style="dim")
    return t


def result_view(step: ToolStepRecord, text: str | None, asked: ApprovalStepRecord | None = None) -> Group:
    """One call's result: its title line, the person's answer when they were asked, and its text folded
    (``text`` None: not kept, as in a reopened log)."""
    parts: list[Any] = [result_title(step)]
    if asked is not None:
        answer = ANSWER_WORDS.get(asked.answer or "", asked.answer or "asked")
        parts.append(Text(f"  you {answer} after {fmt_ms(asked.duration_ms)}", style="dim"))
    status = step.status
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


def logged_results(steps: Sequence[StepRecord], calls: int) -> list[Group | None]:
    """For a logged turn's ``calls`` tool calls (in order), each one's result as its tool step says it (the
    steps pair with the calls in order; a call with no step, e.g. one the turn never reached, gets None)."""
    tools = of_kind(steps, ToolStepRecord)
    asked = {s.call_id: s for s in of_kind(steps, ApprovalStepRecord) if s.call_id}
    out: list[Group | None] = []
    for i in range(calls):
        if i < len(tools):
            step = tools[i]
            out.append(result_view(step, None, asked.get(step.call_id) if step.call_id else None))
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

    def __init__(self, step: ToolStepRecord, text: str | None, asked: ApprovalStepRecord | None = None) -> None:
        super().__init__(result_view(step, text, asked), classes="tool-run")
        self.step = step
