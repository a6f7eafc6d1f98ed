"""Which tool calls may run: the user's consent, as a small pure policy the front ends share.

``ttft ask`` fixes it on the command line (``--allow-tools``: every tool; ``--allow-tool NAME``:
those named) and never asks; the chat can ask per call and record the answer: allow once, allow
for the rest of the session, or deny. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

Decision = Literal["allow", "deny", "ask"]
Answer = Literal["once", "always", "deny"]


@dataclass(slots=True)
class Consent:
    """The tools allowed so far. ``ask``: a call nobody has decided on is to be asked about (the
    chat); without it such a call is denied (``ttft ask``, which has no one to ask)."""

    allow_all: bool = False
    allowed: set[str] = field(default_factory=set)
    denied: set[str] = field(default_factory=set)
    ask: bool = False
    _once: set[str] = field(default_factory=set)

    @classmethod
    def from_flags(cls, allow_all: bool, names: Iterable[str]) -> Consent:
        return cls(allow_all=allow_all, allowed=set(names))

    @property
    def any_allowed(self) -> bool:
        return self.allow_all or bool(self.allowed)

    def decide(self, name: str) -> Decision:
        """What to do with a call of tool ``name`` now; an allow-once answer is used up by it."""
        if name in self.denied:
            return "deny"
        if self.allow_all or name in self.allowed:
            return "allow"
        if name in self._once:
            self._once.discard(name)
            return "allow"
        return "ask" if self.ask else "deny"

    def answer(self, name: str, answer: Answer) -> None:
        """The user's answer to a call that was asked about (``decide`` said "ask")."""
        match answer:
            case "once":
                self._once.add(name)
            case "always":
                self.allowed.add(name)
                self.denied.discard(name)
            case "deny":
                self.denied.add(name)
