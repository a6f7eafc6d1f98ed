"""The compare screen's commands: the slash commands as one table (``/NAME ARG`` -> what the screen does),
and its entries in the command palette."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from textual.app import SystemCommand

DEFAULT_TRIALS = 5  # what the palette's and F7's trials send: enough for medians, p90 and verdicts
# /repeat's ceiling. One Enter sends N requests per pane (up to 4 panes), all paid for and all kept on
# screen and in memory; the verdicts' bootstrap intervals narrow as 1/sqrt(N), so past ~100 trials
# they barely move and a typo (/repeat 5000) would only run up a bill. A larger study is `ttft bench`.
MAX_TRIALS = 100


class CompareControls(Protocol):
    """What the commands drive: the compare screen."""

    repeat: int
    from_chat: bool

    @property
    def mode(self) -> str: ...

    async def action_keep(self, label: str) -> None: ...

    async def action_remove(self, label: str) -> None: ...

    async def action_add(self, spec: str) -> None: ...

    async def action_trials(self, n: int = ...) -> None: ...

    def action_reveal(self) -> None: ...

    def action_toggle_mode(self) -> None: ...

    async def action_export(self) -> list[Path]: ...

    def action_to_chat(self, label: str | None = None) -> None: ...

    def action_tools(self) -> None: ...

    def update_header(self) -> None: ...


Handler = Callable[[CompareControls, str], Awaitable[str | None]]  # returns a warning for the user, or None


@dataclass(frozen=True, slots=True)
class SlashCommand:
    usage: str
    help: str
    run: Handler


async def _keep(t: CompareControls, arg: str) -> None:
    await t.action_keep(arg)


async def _remove(t: CompareControls, arg: str) -> None:
    await t.action_remove(arg)


async def _add(t: CompareControls, arg: str) -> None:
    await t.action_add(arg)


async def _repeat(t: CompareControls, arg: str) -> str | None:
    try:
        n = max(1, int(arg))
    except ValueError:
        return "/repeat N: trials per prompt"
    if n > MAX_TRIALS:
        return f"/repeat: at most {MAX_TRIALS} trials per prompt (each sends one request per pane)"
    t.repeat = n
    t.update_header()
    return None


async def _again(t: CompareControls, arg: str) -> None:
    await t.action_trials(t.repeat)


async def _reveal(t: CompareControls, arg: str) -> None:
    t.action_reveal()


def _mode(mode: str) -> Handler:
    async def run(t: CompareControls, arg: str) -> None:
        if t.mode != mode:
            t.action_toggle_mode()

    return run


async def _export(t: CompareControls, arg: str) -> None:
    await t.action_export()


async def _chat(t: CompareControls, arg: str) -> None:
    t.action_to_chat(arg or None)


async def _tools(t: CompareControls, arg: str) -> None:
    t.action_tools()


COMMANDS: dict[str, SlashCommand] = {
    "keep": SlashCommand("/keep A", "continue with pane A alone", _keep),
    "remove": SlashCommand("/remove B", "close pane B", _remove),
    "add": SlashCommand("/add SPEC[@URL]", "a new pane (at most 4)", _add),
    "repeat": SlashCommand("/repeat N", "trials per prompt", _repeat),
    "again": SlashCommand("/again", "resend the last prompt, /repeat trials", _again),
    "reveal": SlashCommand("/reveal", "show or hide the model names (blind mode)", _reveal),
    "sequential": SlashCommand("/sequential", "the next prompts run one pane after another", _mode("sequential")),
    "parallel": SlashCommand("/parallel", "the next prompts start every pane at once", _mode("parallel")),
    "export": SlashCommand("/export", "JSONL + summary and verdict CSVs", _export),
    "chat": SlashCommand("/chat [A]", "back to the chat, or continue pane A there", _chat),
    "tools": SlashCommand("/tools", "the MCP tool servers (--mcp): state, start times, tools", _tools),
}


async def run_command(target: CompareControls, text: str) -> str | None:
    """Run ``/NAME ARG``; returns a warning for the user (an unknown command, a bad argument) or None."""
    name, _, arg = text[1:].partition(" ")
    cmd = COMMANDS.get(name.lower())
    if cmd is None:
        return f"unknown command /{name}"
    return await cmd.run(target, arg.strip())


def palette(t: CompareControls, labels: Sequence[str]) -> Iterator[SystemCommand]:
    """The screen's entries in the command palette; ``labels``: its panes."""

    def to_chat(label: str) -> Callable[[], None]:
        return lambda: t.action_to_chat(label)

    def keep(label: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            await t.action_keep(label)

        return run

    if t.from_chat:
        yield SystemCommand("Back to the chat", "F10 / Esc: the chat as it was", t.action_to_chat)
        for label in labels:
            yield SystemCommand(
                f"Continue pane {label} in the chat", "its model and its conversation become the chat's", to_chat(label)
            )
    yield SystemCommand(
        f"Trials: resend the last prompt {DEFAULT_TRIALS} times", "medians, p90 and verdicts", t.action_trials
    )
    yield SystemCommand("Reveal / hide model names", "blind mode", t.action_reveal)
    yield SystemCommand("Parallel / sequential", "how the next prompts start", t.action_toggle_mode)
    yield SystemCommand("Export the comparison", "JSONL + summary and verdict CSVs", t.action_export)
    yield SystemCommand("MCP tools: servers and their tools", "/tools", t.action_tools)
    for label in labels:
        yield SystemCommand(f"Keep pane {label}", "continue with this pane alone", keep(label))
