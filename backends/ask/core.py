"""One turn on a backend already made: the agent loop where tools are offered, else one stream.

This is the piece ``ttft ask`` and the API (:mod:`backends.ask.run`), the chat and compare all run, so
a turn is put together once: the caller makes the backend and the first step's recorder (stamped
Submitted, with its tags, its branch, the servers' start), and says which tools it offers; the turn is
the agent loop (:class:`~backends.agent.loop.AgentTurn`) where there are some and the backend takes
them, else :func:`backends.turn.run_turn`. Either way it is recorded and logged however it ends.

The listener is given here. A plain turn hears ``on_event`` alone (its one step is the recorder the
caller made); a tool-using turn hears every part of it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

from ...telemetry import events as ev
from ...telemetry.log.crashes import with_report
from ...telemetry.log.turns import SessionLog
from ...telemetry.record import TurnRecord
from ...telemetry.recorder import TurnRecorder
from ...telemetry.steps import StepRecord
from ..agent.consent import Consent
from ..agent.host import DEFAULT_MAX_RESULT_BYTES, ToolHost
from ..agent.loop import DEFAULT_MAX_STEPS, AgentListener, AgentSettings, AgentTurn, supports_tools
from ..base import Backend, ChatRequest
from ..finish import finish_turn
from ..turn import run_turn


@dataclass(frozen=True, slots=True)
class Offered:
    """The tools a turn is offered: their host, the consent (the caller's own: a chat's or a comparison's
    answers outlive one turn) and the loop's limits."""

    host: ToolHost
    consent: Consent
    max_steps: int = DEFAULT_MAX_STEPS
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES


class TurnCore:
    """One turn of ``request`` on ``backend``; ``recorder`` is its first step's, made by the caller.
    ``before_finish``: given each model step's recorder once its stream is over (the API's loop lag)."""

    def __init__(
        self,
        backend: Backend,
        request: ChatRequest,
        recorder: TurnRecorder,
        *,
        log: SessionLog | None,
        tools: Offered | None = None,
        listener: AgentListener | None = None,
        before_finish: Callable[[TurnRecorder], None] | None = None,
    ) -> None:
        self.backend, self.request, self.recorder, self.log = backend, request, recorder, log
        self.listener = listener if listener is not None else AgentListener()
        self.before_finish = before_finish
        self.agent: AgentTurn | None = None  # the loop, where tools are offered and the backend takes them
        if tools is not None and supports_tools(backend):
            settings = AgentSettings(
                max_steps=tools.max_steps,
                max_result_bytes=tools.max_result_bytes,
                extra=dict(recorder.extra),
                branch_of=recorder.branch_of,
            )
            self.agent = AgentTurn(
                backend,
                request,
                tools.host,
                tools.consent,
                session_id=recorder.session_id,
                turn_index=recorder.turn_index,
                log=log,
                settings=settings,
                listener=self.listener,
                first=recorder,
                before_finish=before_finish,
            )

    async def run(self) -> TurnRecord:
        """The turn to its end: the record as logged. Cancelled, it is recorded and logged with what
        arrived (:meth:`ended`), then the cancellation goes on; a failure at the server is a record."""
        if self.agent is not None:
            return await self.agent.run()
        return await run_turn(
            self.backend,
            self.request,
            self.recorder,
            log=self.log,
            on_event=self.listener.on_event,
            before_finish=self.before_finish,
        )

    def ended(self) -> TurnRecord | None:
        """The record once the turn ended (cancelled too); None before."""
        if self.agent is not None:
            return self.agent.result.record
        return self.recorder.delivered

    @property
    def log_error(self) -> str | None:
        """Why the record could not be written to the log, if it could not."""
        return self.agent.result.log_error if self.agent is not None else self.recorder.log_error

    def failed(self, exc: BaseException, where: str) -> TurnRecord:
        """The record of a turn that raised outside its own guards (ttft's bug: the record names its crash
        report), or of one cancelled before it began; the record it left where it ended already."""
        if (record := self.ended()) is not None:
            return record
        if isinstance(exc, asyncio.CancelledError):
            self.recorder.feed(ev.Cancelled(ev.now_ns()))
        else:
            self.recorder.feed(with_report(ev.Failed.of(exc), exc, where))
        return finish_turn(self.recorder, self.log)

    def live_steps(self, now_ns: int) -> tuple[StepRecord, ...]:
        """A tool-using turn's steps so far, for a live view (() for a plain turn)."""
        return self.agent.live_steps(now_ns) if self.agent is not None else ()
