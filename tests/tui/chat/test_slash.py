"""tui.chat.slash: a line typed in the prompt box read as a typed command, or as a prompt."""

from __future__ import annotations

import pytest
from ttft.tui.chat import slash


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("/attach notes.md", slash.Attach("notes.md")),
        ("/attach 'my notes.md' b.png", slash.Attach("'my notes.md' b.png")),
        ("  /attach a.md  ", slash.Attach("a.md")),
        ("/detach", slash.Detach("")),
        ("/detach 2", slash.Detach("2")),
        ("/tools", slash.Tools()),
        ("/compare", slash.Compare(None)),
        ("/compare   ", slash.Compare(None)),
        ("/compare openai:gpt-4o-mini", slash.Compare("openai:gpt-4o-mini")),
    ],
)
def test_each_command_is_read_with_its_arguments(text: str, command: slash.Command) -> None:
    assert slash.parse(text) == command


@pytest.mark.parametrize(
    "text", ["hello", "/attachment x", "/compareX", "what does /attach do?", "/help", "", "/ attach a.md"]
)
def test_anything_else_is_a_prompt(text: str) -> None:
    assert slash.parse(text) is None


def test_only_opening_the_comparison_waits_for_the_turn_in_flight() -> None:
    waits = {type(c).__name__ for c in (slash.Attach(""), slash.Detach(""), slash.Tools(), slash.Compare(None))
             if not c.while_busy}  # fmt: skip
    assert waits == {"Compare"}
