"""run_ask: one turn as its :class:`~backends.ask.plan.AskPlan` says, tools included, heard by one listener.

The whole turn, the same for ``ttft ask`` and the Python API: the backend made (in the local engine's own
process, a backend of the turn's own, or the event loop's shared one), the MCP servers started and
timed, the turn run (:func:`backends.turn.run_turn`, or the agent loop where tools are offered), the
record logged (:mod:`backends.finish`), and what the turn made closed again. The listener
(:class:`~backends.agent.loop.AgentListener`), given when the turn is made, hears each event (the
answer's text in ``TextDelta``), each model step's start, each tool call's end, each notice, and is
asked (``ask``) about each call the consent leaves open. Nothing here prints.

A target that cannot be reached as given is a recorded failed turn, or raised (``plan.start_failure``).
Cancelled (Ctrl-C, SIGTERM), the turn is recorded and logged with what arrived, and the cancellation
goes on: :meth:`AskTurn.ended` gives that record to whoever caught it.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...telemetry import events as ev
from ...telemetry.errors import TtftError
from ...telemetry.log.turns import SessionLog, new_session_id
from ...telemetry.record import TurnRecord
from ...telemetry.recorder import TurnRecorder
from ..agent.consent import Consent
from ..agent.host import ToolHost
from ..agent.loop import AgentListener, AgentResult, AgentTurn
from ..base import Backend, ChatRequest
from ..finish import finish_turn
from ..providers.registry import create_backend, parse_spec
from ..turn import new_recorder
from .core import Offered, TurnCore
from .plan import AskPlan, Unresolved

if TYPE_CHECKING:
    from ..load.shared import LoopShare


class ToolsNotStarted(TtftError):
    """The MCP servers could not be started at all (ttft's own failure: a server that fails alone is a
    notice, and the turn goes on with the others' tools)."""


@dataclass(frozen=True, slots=True)
class AskResult:
    """What a turn left: its record (as logged), why the log write failed, if it did, and for a
    tool-using turn its parts (each model step's record, the tool and approval steps, the notices)."""

    record: TurnRecord
    log_errors: tuple[str, ...] = ()
    agent: AgentResult | None = None


class AskTurn:
    """One turn of ``plan``, run by :meth:`run`; ``listener`` hears it as it goes. ``consent``: the
    caller's own, kept across turns (an "always" holds for a whole conversation); None: a fresh one
    from the plan."""

    def __init__(self, plan: AskPlan, listener: AgentListener | None = None, *, consent: Consent | None = None):
        self.plan, self.listener = plan, listener if listener is not None else AgentListener()
        self.consent = consent if consent is not None else plan.tools.consent(ask=self.listener.ask is not None)
        self.log = SessionLog(plan.session) if plan.log else None
        self.core: TurnCore | None = None  # the turn, once its backend is made and its servers are up
        self._failed: TurnRecord | None = None  # a turn whose backend could not be made

    @property
    def agent(self) -> AgentTurn | None:
        """The agent loop of a tool-using turn (None before it begins, and for a plain turn)."""
        return self.core.agent if self.core is not None else None

    def ended(self) -> AskResult | None:
        """The turn's result once it ended (also when it was cancelled); None before, or when it was
        stopped before any turn began (while the servers started)."""
        record = self.core.ended() if self.core is not None else self._failed
        if record is None:
            return None
        errors = tuple(str(e) for e in self.log.write_errors) if self.log is not None else ()
        return AskResult(record, errors, self.agent.result if self.agent is not None else None)

    async def run(self) -> AskResult:
        """Run the turn (once). Raises what ``plan.start_failure="raise"`` asks for, ToolsNotStarted,
        and the cancellation; a turn that fails at the server is a record."""
        submitted = self.plan.submitted_ns if self.plan.submitted_ns is not None else ev.now_ns()
        try:
            backend, share = await self._backend()
        except TtftError as err:  # a ProviderError, a BackendStartError: a turn that never reached a server
            if self.plan.start_failure == "raise":
                raise
            self._failed = self._failed_record(err, submitted)
        else:
            try:
                if self.plan.tools.offered:
                    await self._tooled(backend, submitted, share)
                else:
                    await self._plain(backend, submitted, share)
            finally:
                if share is None:  # the turn's own backend
                    await backend.aclose()
        result = self.ended()
        assert result is not None, "a turn that ran has its record"
        return result

    async def _backend(self) -> tuple[Backend, LoopShare | None]:
        """The turn's backend, and the event loop's share it came from (None: the turn's own, closed
        when it ends)."""
        plan, target = self.plan, self.plan.target
        if isinstance(target, Unresolved):
            raise target.error
        if target.local and plan.isolation == "process":
            from .isolated import ProcessBackend  # multiprocessing's import: the local engine's alone

            return ProcessBackend(target.spec, target.base_url), None  # a BackendStartError when it cannot start
        if target.local or plan.connection == "own":  # the engine holds one model: never shared across turns
            return create_backend(target, api_key=plan.key, timeout_s=plan.timeout_s, lean=not plan.sdk), None
        from ..load.shared import loop_share  # the API's path: ask never pays its import

        share = await loop_share()
        return share.backend(target, plan.timeout_s, plan.sdk, plan.key), share

    def _session(self) -> tuple[str, int]:
        if self.log is None:
            return new_session_id(), 0
        return self.log.session_id, self.log.next_turn_index()

    def _failed_record(self, err: TtftError, submitted: int) -> TurnRecord:
        """A turn that never reached a server (bad spec, missing key, bad URL) is still a recorded turn."""
        target = self.plan.target
        spec = target.spec
        provider, model = parse_spec(spec) if spec.strip() else ("", None)
        stub = _Unmade(provider, model or "", target.base_url)
        session_id, index = self._session()
        rec = new_recorder(stub, self.plan.request, session_id=session_id, turn_index=index)
        rec.feed(ev.Submitted(submitted))
        rec.feed(ev.Failed.of(err))
        return finish_turn(rec, self.log)  # a failed write is kept in log.write_errors

    def _first(self, backend: Backend, submitted: int) -> TurnRecorder:
        """The first step's recorder: ttft's own delay runs from ``submitted`` to the send."""
        session_id, index = self._session()
        recorder = new_recorder(backend, self.plan.request, session_id=session_id, turn_index=index)
        recorder.feed(ev.Submitted(submitted))
        return recorder

    async def _plain(self, backend: Backend, submitted: int, share: LoopShare | None) -> None:
        """A turn without tools: one stream, its one step told to the listener. On the shared connection
        the loop's lag while it waited is measured (``metrics.loop_lag_ms``), so a blocked loop is never
        counted as the server's."""
        recorder = self._first(backend, submitted)
        if self.listener.on_step is not None:
            self.listener.on_step(recorder)
        self.core = TurnCore(
            backend, self.plan.request, recorder, log=self.log, listener=self.listener, before_finish=_lag(share)
        )
        await _watched(self.core, share, recorder, submitted)

    async def _tooled(self, backend: Backend, submitted: int, share: LoopShare | None) -> None:
        """A turn with tools: the servers started (their start is its own figure, not ttft's own delay),
        the agent loop run, the servers ended; the loop records and logs the turn, cancelled too. On the
        shared connection each model step's wait is watched for the loop's lag, as a plain turn's is."""
        tools = self.plan.tools
        t0 = ev.now_ns()
        host, started, owned = await self._host(share)
        try:
            recorder = self._first(backend, submitted)
            if started:
                recorder.feed(ev.McpStarted(ev.now_ns(), start_ns=t0))
            offered = Offered(host, self.consent, tools.max_steps, tools.max_result_bytes)
            self.core = TurnCore(
                backend,
                self.plan.request,
                recorder,
                log=self.log,
                tools=offered,
                listener=self.listener,
                before_finish=_lag(share),
            )
            await _watched(self.core, share, recorder, submitted)
        finally:
            if owned:
                with contextlib.suppress(Exception):  # a server that will not end never costs the turn
                    await host.aclose()

    async def _host(self, share: LoopShare | None) -> tuple[ToolHost, bool, bool]:
        """The tools, whether this turn started them (their start is then its figure) and whether it ends
        them: the caller's host; the owner's servers kept on the loop's share (started by its first turn
        there); or the plan's servers, started now for this turn alone."""
        tools = self.plan.tools
        if tools.host is not None:
            return tools.host, False, False
        if tools.kept_by is not None and share is not None:
            host, started = await share.kept_host(tools.kept_by, self._start)
            return host, started, False
        return await self._start(), True, True

    async def _start(self) -> ToolHost:
        """The plan's MCP servers, started (a server that fails is a notice; ttft's own failure raises)."""
        tools = self.plan.tools
        from ..mcp.host import start_host  # the MCP SDK's import, paid only by a turn with servers

        try:
            host = await start_host(
                list(tools.servers),
                on_notice=self.listener.on_notice,
                start_timeout_s=tools.start_timeout_s,
                call_timeout_s=tools.call_timeout_s,
                max_result_bytes=tools.max_result_bytes,
            )
        except Exception as exc:  # never a server's own failure (a notice): ttft's, said in one line
            raise ToolsNotStarted(f"the MCP servers did not start: {exc}") from exc
        return host


def _lag(share: LoopShare | None) -> Callable[[TurnRecorder], None] | None:
    """On the shared connection: each model step's ``loop_lag_ms``, the loop's lag while it waited (send to
    first token), so a blocked loop is never counted as the server's. A tool turn's is its first step's,
    as its TTFT is."""
    if share is None:
        return None

    def lag(rec: TurnRecorder) -> None:
        ts = rec.timestamps()
        rec.loop_lag_ms = share.lag_ms(ts.sent, ts.first_token)

    return lag


async def _watched(core: TurnCore, share: LoopShare | None, recorder: TurnRecorder, submitted: int) -> None:
    """Run the turn; on the shared connection, the loop's watcher ticks while it is in flight."""
    if share is None:
        await core.run()
        return
    share.begin(recorder, submitted)
    try:
        await core.run()
    finally:
        share.end(recorder)


class _Unmade:
    """A backend that was never made, as its turn's recorder reads one: its names, and no stream."""

    def __init__(self, provider: str, model: str, base_url: str | None) -> None:
        self.provider, self.api, self.model, self.base_url = provider, "", model, base_url

    def stream(self, request: ChatRequest) -> AsyncIterator[ev.Event]:
        raise NotImplementedError("a backend that was never made streams nothing")

    async def aclose(self) -> None:
        return None


async def run_ask(plan: AskPlan, listener: AgentListener | None = None) -> AskResult:
    """Run one turn of ``plan`` to its end (see :class:`AskTurn`); the listener hears it as it goes."""
    return await AskTurn(plan, listener).run()
