"""A gate in front of a response's heavy first step, which a caller may set for the requests it runs.

Under a bench level a batching server answers many requests in one poll of the event loop, and taking
in each response's headers is real Python work. The load driver sets its pass budget here
(:class:`backends.load.spread.PassSpreader` is such a gate), so the Protocol transport takes in those
headers a few a pass. Everywhere else (chat, ask, compare) no gate is set and nothing waits.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol


class Gate(Protocol):
    async def admit(self) -> None:
        """Return when this pass of the event loop still has room for one more heavy step."""
        ...


ACTIVE: ContextVar[Gate | None] = ContextVar("ttft_response_gate", default=None)


async def admit() -> None:
    """Wait at the gate set in this context, if any; else return at once."""
    gate = ACTIVE.get()
    if gate is not None:
        await gate.admit()
