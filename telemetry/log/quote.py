"""Values from outside (a config file, a flag, a file name) as an error message quotes them.

An error line must stay a line: a 100,000-character ``default`` in config.toml once printed a
100 KB message. Every value an error quotes goes through :func:`quoted` (its ``repr``) or
:func:`cut` (as it is), which keep at most :data:`LIMIT` characters of it: its start and its end
around a "…", and how long it was, so a reader can still tell which value it was.
"""

from __future__ import annotations

LIMIT = 200
ELLIPSIS = "…"


def cut(text: str, limit: int = LIMIT) -> str:
    """``text`` whole when it fits ``limit`` characters, else its start and end around "…" (the end
    often tells values apart: a file's extension, a model's size) and its length in all."""
    if len(text) <= limit:
        return text
    tail = max(limit // 4, 1)
    head = max(limit - tail - len(ELLIPSIS), 1)
    return f"{text[:head]}{ELLIPSIS}{text[-tail:]} ({len(text):,} characters)"


def quoted(value: object, limit: int = LIMIT) -> str:
    """``repr(value)`` (quotes, and control characters escaped) cut as :func:`cut` cuts it."""
    return cut(repr(value), limit)
