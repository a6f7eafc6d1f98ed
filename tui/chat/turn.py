"""A chat turn from Enter to its record, told to the chat screen in three messages.

:meth:`ChatTurns.start` sends the prompt on the stream thread (``tui.runner``) and says
``TurnStarted`` once the request is on its way, or ``TurnFailed`` when the backend could not even be
created. The turn then runs in a worker, in two steps: :meth:`ChatTurns.run` waits for its record,
:meth:`ChatTurns.hand_off` folds it into the session's context and says ``TurnFinished``. The driver
touches no widget: the screen's handlers draw each step, and its frames paint the turn in flight from
its recorder. At most one turn is in flight.
"""

from __future__ import annotations

import asyncio
import contextlib

from textual.dom import DOMNode
from textual.message import Message

from ...backends.attachments import Attachment
from ...backends.finish import finish_turn
from ...telemetry.log.turns import SessionLog
from ...telemetry.record import ErrorInfo, TurnRecord
from ...telemetry.view.render import RenderLag
from ..runner import LiveTurn
from ..session import AgentFactory, ChatSession


class TurnStarted(Message):
    """The request is on its way. ``live``: the turn in flight, whose recorder the frames paint;
    ``lag``: its render lag, which the answer's paints stamp; ``files``: the attachments' names."""

    def __init__(self, live: LiveTurn, prompt: str, lag: RenderLag, files: tuple[str, ...] = ()) -> None:
        super().__init__()
        self.live = live
        self.prompt = prompt
        self.lag = lag
        self.files = files

    @property
    def turn_index(self) -> int:
        return self.live.recorder.turn_index


class TurnFailed(Message):
    """The turn could not start (an unknown model, a missing key): nothing was sent, nothing logged."""

    def __init__(self, prompt: str, spec: str, error: ErrorInfo) -> None:
        super().__init__()
        self.prompt = prompt
        self.spec = spec
        self.error = error


class TurnFinished(Message):
    """The turn's record, logged and in the session's context; ``lag``: its render lag so far (the
    answer's full render adds the last paint). ``log_error``: the log could not hold it;
    ``trouble``: the turn ended some way the runner should never let it (said, the record kept)."""

    def __init__(
        self, live: LiveTurn, record: TurnRecord, lag: RenderLag, *, log_error: str | None, trouble: str | None
    ) -> None:
        super().__init__()
        self.live = live
        self.record = record
        self.lag = lag
        self.log_error = log_error
        self.trouble = trouble


class ChatTurns:
    """The chat's turn in flight: started, run and handed off; each step posted to ``host`` (the screen)."""

    def __init__(self, session: ChatSession, host: DOMNode) -> None:
        self.session = session
        self.host = host
        self.live: LiveTurn | None = None
        self.starting = False  # from Enter until the request is on its way (a backend may be starting)
        self.agent: AgentFactory | None = None  # the tool-using loop, where tools are offered (tui.chat.tools)
        self._handed_off: asyncio.Event | None = None  # set once the turn in flight is handed off

    @property
    def busy(self) -> bool:
        return self.starting or self.live is not None

    async def start(self, prompt: str, submitted_ns: int, attachments: tuple[Attachment, ...] = ()) -> bool:
        """Start a turn; returns once its request is on its way (True) or the user was told why it could
        not start (False). ``submitted_ns``: the user's Enter; the record's ``own_delay_ms`` runs from it.
        ``attachments``: files read and checked (``backends.attachments``), sent with the prompt."""
        session = self.session
        self.starting = True
        try:
            live = await session.start(prompt, submitted_ns=submitted_ns, attachments=attachments, agent=self.agent)
        except Exception as exc:  # the backend could not even be created (unknown model, missing key, ...)
            error = ErrorInfo(
                type=getattr(exc, "kind", None) or type(exc).__name__,
                message=str(exc) or repr(exc),
                hint=getattr(exc, "hint", None),
            )
            self.host.post_message(TurnFailed(prompt, session.spec, error))
            return False
        finally:
            self.starting = False
        self.live = live
        self._handed_off = asyncio.Event()
        lag = RenderLag()
        self.host.post_message(TurnStarted(live, prompt, lag, tuple(a.name for a in attachments)))
        self.host.run_worker(self._follow(live, lag, session.log), group="turn", exclusive=False)
        return True

    async def _follow(self, live: LiveTurn, lag: RenderLag, log: SessionLog) -> None:
        record, trouble = await self.run(live, log)
        self.hand_off(live, record, lag, trouble)

    async def run(self, live: LiveTurn, log: SessionLog) -> tuple[TurnRecord, str | None]:
        """The turn's record once it has ended, and what went wrong if it ended abnormally."""
        try:
            return await live.wait(), None
        except Exception as exc:  # should not happen: the runner turns every failure into a record
            return finish_turn(live.recorder, log), f"turn ended abnormally: {exc}"  # logged, if not yet

    def hand_off(self, live: LiveTurn, record: TurnRecord, lag: RenderLag, trouble: str | None = None) -> None:
        """The record into the session's context (unless the chat has moved on to another conversation
        meanwhile: then it is only logged), and to the screen."""
        if self.session.live is live:
            self.session.complete(record)
        if self.live is live:
            self.live = None
            if self._handed_off is not None:
                self._handed_off.set()
        self.host.post_message(TurnFinished(live, record, lag, log_error=live.log_error, trouble=trouble))

    def cancel(self) -> bool:
        """Stop the turn in flight, if any (it ends as cancelled, with what arrived kept and logged)."""
        if self.live is None:
            return False
        self.live.cancel()
        return True

    async def wait_idle(self, timeout: float | None = None) -> None:
        """Until the turn in flight, if any, is handed off (or ``timeout`` seconds have passed)."""
        handed_off = self._handed_off
        if self.live is not None and handed_off is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(handed_off.wait(), timeout)
