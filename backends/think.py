"""Split ``<think>...</think>`` inside streamed content into reasoning and visible text.

Tags may be cut anywhere across chunks, so a tail that could be the start of the
tag being looked for is held back until the next chunk decides it.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["reasoning", "text"]


class ThinkSplitter:
    def __init__(self, open_tag: str = "<think>", close_tag: str = "</think>", *, inside: bool = False) -> None:
        self.open_tag = open_tag
        self.close_tag = close_tag
        self.inside = inside  # some templates open the think block in the prompt
        self._held = ""
        lead = open_tag[:1]
        self._lead = lead if lead and lead == close_tag[:1] else None

    def feed(self, text: str) -> list[tuple[Kind, str]]:
        if not self._held and self._lead is not None and self._lead not in text:
            # The common chunk: without the tags' first character neither a tag nor the start of one is in it.
            return [("reasoning" if self.inside else "text", text)] if text else []
        out: list[tuple[Kind, str]] = []
        buf = self._held + text
        self._held = ""
        while buf:
            tag = self.close_tag if self.inside else self.open_tag
            kind: Kind = "reasoning" if self.inside else "text"
            i = buf.find(tag)
            if i >= 0:
                if i:
                    out.append((kind, buf[:i]))
                buf = buf[i + len(tag) :]
                self.inside = not self.inside
                continue
            keep = partial_suffix(buf, tag)
            emit = buf[: len(buf) - keep]
            if emit:
                out.append((kind, emit))
            self._held = buf[len(buf) - keep :]
            break
        return out

    def flush(self) -> list[tuple[Kind, str]]:
        """End of stream: a held fragment was not a tag after all."""
        held, self._held = self._held, ""
        return [("reasoning" if self.inside else "text", held)] if held else []


def partial_suffix(buf: str, tag: str) -> int:
    """Length of the longest suffix of ``buf`` that is a proper prefix of ``tag``."""
    for n in range(min(len(tag) - 1, len(buf)), 0, -1):
        if buf.endswith(tag[:n]):
            return n
    return 0
