"""The prompt from the command line and stdin, combined as simonw/llm does.

``echo CONTEXT | ttft ask "summarize"`` sends the piped text, a blank line, then the argument;
piped text alone is the prompt; a terminal on stdin is never read (nor is /dev/null, or a stdin
that is not a real file, as under a test runner). What is read is bounded: a prompt past
``STDIN_LIMIT_BYTES`` is refused with a message, not sent cut or read until memory runs out.
"""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Sequence

from ...telemetry.errors import TtftError
from ...telemetry.log.surrogates import scrub

STDIN_LIMIT_BYTES = 4 << 20  # 4 MiB: about a million tokens of English, past any model's context


class PromptTooLarge(TtftError, ValueError):
    def __init__(self, limit: int) -> None:
        super().__init__(
            f"stdin holds more than {limit >> 20} MiB; give a shorter context (e.g. head -c 1M FILE | ...)"
        )


def _piped_stdin(limit: int) -> str | None:
    """stdin's text when it is a pipe, a file or a socket; None for a terminal or anything else."""
    stream = sys.stdin
    try:
        if stream is None or stream.isatty():
            return None
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, OSError, ValueError):  # pytest's capture, a closed stdin
        return None
    if not (stat.S_ISFIFO(mode) or stat.S_ISREG(mode) or stat.S_ISSOCK(mode)):
        return None
    raw = getattr(stream, "buffer", None)
    data = raw.read(limit + 1) if raw is not None else stream.read(limit + 1).encode("utf-8", "replace")
    if len(data) > limit:
        raise PromptTooLarge(limit)
    return data.decode("utf-8", "replace")  # bytes that are not UTF-8 become U+FFFD, not an error


def read_prompt(words: Sequence[str], *, limit: int = STDIN_LIMIT_BYTES) -> str:
    """The prompt: piped stdin, then the words of the argument, separated by a blank line.

    Raises PromptTooLarge when stdin holds more than ``limit`` bytes.
    """
    arg = " ".join(words).strip()
    piped = (_piped_stdin(limit) or "").strip()
    # bytes argv could not decode arrive as lone surrogates, which no request can carry
    return scrub("\n\n".join(part for part in (piped, arg) if part))
