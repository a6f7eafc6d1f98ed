"""The prompts a person sent, kept across chats: what Up/Down and ctrl+r recall.

One JSON object a line, ``{"at": ISO 8601 UTC, "text": the prompt as sent}``, in
``prompt_history.jsonl`` beside the session logs (``data_dir()``), mode 0600
(:mod:`telemetry.log.private_files`). It holds what was typed or pasted, never an attachment's
contents (a ``/attach`` line keeps its path only), never a secret in what was typed (URL credentials
and query values, a known API key: :func:`telemetry.log.secrets.mask`; the chat that typed it still
recalls it whole, from memory), and at most :data:`MAX_ENTRIES` prompts: past
twice that many lines the file is rewritten with the newest ones. A prompt longer than
:data:`MAX_ENTRY_CHARS` is sent and logged, but not kept here.

Reading it is reading untrusted data: only the file's last :data:`READ_LIMIT` bytes are read, a line
that is not a JSON object with a string ``text`` is skipped, lone surrogates are replaced, and a
file that cannot be read leaves an empty history and one sentence in ``error``. A last line cut
short (a crash, a full disk) is skipped, and the next prompt goes on a line of its own after it
(:func:`telemetry.log.private_files.append`), never glued onto it. Several chats may append to it at
once (one locked write per line); each sees the others' prompts when it next looks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from .. import json_guard
from . import private_files
from .json_line import encode_line
from .secrets import mask
from .surrogates import scrub
from .turns import data_dir

FILE_NAME = "prompt_history.jsonl"
MAX_ENTRIES = 1000
MAX_ENTRY_CHARS = 100_000
READ_LIMIT = 8 * 1024 * 1024  # bytes read from the file's end: MAX_ENTRIES long prompts and then some


def history_path() -> Path:
    return data_dir() / FILE_NAME


def parse(data: bytes) -> tuple[list[str], int]:
    """The prompts in a history file's bytes, oldest first, and how many lines were not readable ones."""
    out: list[str] = []
    bad = 0
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            obj = json_guard.loads(raw)
        except ValueError:
            bad += 1
            continue
        text = obj.get("text") if isinstance(obj, dict) else None
        if not isinstance(text, str) or not text.strip() or len(text) > MAX_ENTRY_CHARS:
            bad += 1
            continue
        out.append(scrub(text))
    return out, bad


@dataclass
class PromptHistory:
    """The history file's prompts (oldest first) and what adding to it does."""

    path: Path = field(default_factory=history_path)
    cap: int = MAX_ENTRIES
    entries: list[str] = field(default_factory=list)
    skipped: int = 0  # lines of the file that were not prompts
    error: str | None = None  # the last read or write that failed, in words
    _seen: tuple[int, int] | None = None  # (size, mtime_ns) of the file as last read

    def load(self) -> PromptHistory:
        """Read the file (again); rewrites it when it holds more than twice ``cap`` lines, or a secret
        (written by an older ttft, or a key this process has learnt since) that is now masked."""
        try:
            data = private_files.read_tail(self.path, READ_LIMIT)
            st = os.stat(self.path) if data else None
        except OSError as exc:
            self.entries, self.error = [], f"the prompt history {self.path} could not be read ({exc.strerror or exc})"
            return self
        found, self.skipped = parse(data)
        self.entries = [mask(t) for t in found]
        self.error = None
        self._seen = (st.st_size, st.st_mtime_ns) if st is not None else None
        if len(self.entries) + self.skipped > 2 * self.cap or self.entries != found:
            self.entries = self.entries[-self.cap :]
            try:
                private_files.replace(self.path, b"".join(_line(t) for t in self.entries))
                self._stamp()
            except OSError as exc:
                self.error = f"the prompt history {self.path} could not be compacted ({exc.strerror or exc})"
        return self

    def refresh(self) -> None:
        """Read the file again if another chat has appended to it since (a stat when it has not)."""
        try:
            st = os.stat(self.path)
        except OSError:
            return
        if (st.st_size, st.st_mtime_ns) != self._seen:
            self.load()

    def add(self, text: str) -> bool:
        """Keep a prompt just sent (not a blank one, nor a repeat of the last, nor one past
        ``MAX_ENTRY_CHARS``); False when it was not kept."""
        if not text.strip() or len(text) > MAX_ENTRY_CHARS:
            return False
        self.refresh()  # another chat's prompts first: this one goes after them
        if self.entries and self.entries[-1] == text:
            return False
        self.entries.append(text)
        del self.entries[: -2 * self.cap]
        try:
            private_files.append(self.path, _line(text))
            self._stamp()
        except OSError as exc:
            self.error = f"the prompt history {self.path} could not be written ({exc.strerror or exc})"
            return False
        return True

    def _stamp(self) -> None:
        try:
            st = os.stat(self.path)
            self._seen = (st.st_size, st.st_mtime_ns)
        except OSError:
            self._seen = None

    def recent(self) -> list[str]:
        """Each prompt once, newest first (what Up walks and ctrl+r searches)."""
        seen: set[str] = set()
        out: list[str] = []
        for text in reversed(self.entries):
            if text not in seen:
                seen.add(text)
                out.append(text)
        return out

    def search(self, query: str, limit: int = 50) -> list[str]:
        """The newest ``limit`` distinct prompts holding every word of ``query`` (any case)."""
        words = query.casefold().split()
        out: list[str] = []
        for text in self.recent():
            folded = text.casefold()
            if all(w in folded for w in words):
                out.append(text)
                if len(out) >= limit:
                    break
        return out


def _line(text: str) -> bytes:
    return encode_line({"at": datetime.now(UTC).isoformat(timespec="seconds"), "text": scrub(mask(text))})
