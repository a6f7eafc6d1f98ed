"""The agent loop: the model, then the tool calls it asks for, then their results back, until an answer.

Each model step is one stream through :func:`backends.turn.stream_turn` with its own recorder (its
own TTFT, TPOT, wait split); each call of a step runs on the :class:`~backends.agent.host.ToolHost`,
the calls of one step at once (``asyncio.gather``). The loop ends with a step that asks for no tool
(the answer), at ``max_steps`` model steps, at a call the :class:`~backends.agent.consent.Consent`
does not allow (nothing of that step runs), at a model step that fails, or when cancelled (Esc,
Ctrl-C): in every case every step that arrived is kept, and :func:`telemetry.agent.steps.join_turn`
makes the one record that is logged.

What a tool gives back is outside text: its size is capped before the model sees it (the host cuts,
and the loop cuts what a host did not), a cut is said in a notice, and a tool's failure (its own
error, arguments that are no JSON object, a tool no host has) goes back to the model as an error
result rather than ending the turn. Arguments past the untrusted-JSON guard's limits (nested past 128
levels, or over 4 MiB) are never parsed by anything that recurses: the call is ``refused``, said in a
notice, and the model reads why.

Where someone can be asked (the chat: ``ask`` is given and the consent says "ask"), each call of a
step that nothing allowed yet is asked about in turn, before any of the step's calls runs; each wait
is an approval step of the record. A call the person denies goes back to the model as a denied result
(the step says ``denied``) and the loop goes on; without ``ask`` (``ttft ask``) such a call stops the turn.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from typing import Any

from ...telemetry import events as ev
from ...telemetry.agent.steps import (
    ARGUMENTS_REFUSED_NOTICE,
    MAX_STEPS_NOTICE,
    TRUNCATED_NOTICE,
    ApprovalAnswer,
    ApprovalStep,
    ToolStatus,
    ToolStep,
    join_turn,
    live_steps,
)
from ...telemetry.errors import ErrorKind
from ...telemetry.log.turns import SessionLog
from ...telemetry.probe.saved import SavedProbe
from ...telemetry.record import ErrorInfo, TurnRecord
from ...telemetry.recorder import TurnRecorder
from ...telemetry.steps import StepRecord, Stopped
from ..base import ArgumentsRefused, Backend, ChatRequest, Message, ToolCall, ToolSpec
from ..finish import deliver_record
from ..turn import new_recorder, stream_turn
from .consent import Answer, Consent
from .host import DEFAULT_MAX_RESULT_BYTES, ToolHost, ToolResult, cap

DEFAULT_MAX_STEPS = 10
TOOL_APIS = frozenset({"chat.completions", "responses", "messages"})  # the in-process engine has none
NO_TOOLS = (
    "the local engine has no tool support: use a hosted model or an OpenAI-compatible server"
    " (llama-server needs --jinja for tools)"
)


def denied_result(name: str) -> ToolResult:
    """What the model reads for a call the person did not allow: it did not run, and why."""
    return ToolResult(f"The user did not allow this call of {name}: it did not run.", is_error=True)


def _readable(call: ToolCall) -> bool:
    """Whether the call's arguments are an object a tool may get (:meth:`ToolCall.arguments_object`)."""
    try:
        call.arguments_object()
    except ArgumentsRefused:
        return False
    return True


# Asks the person about one call (the call, its tool, its place in the step, the step's call count).
Ask = Callable[[ToolCall, ToolSpec | None, int, int], Awaitable[Answer]]


def supports_tools(backend: Backend) -> bool:
    return backend.api in TOOL_APIS


def tool_defs(specs: list[ToolSpec]) -> tuple[ToolSpec, ...]:
    """The tools as the request offers them (each schema copied: a host's own dict is never shared)."""
    return tuple(replace(s, input_schema=dict(s.input_schema)) for s in specs)


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """How a tool-using turn runs: its limits, and what each model step's recorder is given."""

    max_steps: int = DEFAULT_MAX_STEPS
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    # Passed to each model step's recorder (backends.turn.new_recorder): the load driver's tags or the chat's
    # (compare id, pane, ...), and the target's saved probe, looked up once a level.
    extra: dict[str, Any] | None = None
    saved_probe: bool = True
    probe: SavedProbe | None = None
    branch_of: int | None = None  # the turn whose prompt this one edits (the first step's record says it)
    # When the caller started the MCP servers for this turn (``ttft ask --mcp``): (start, end) in monotonic ns,
    # fed to the first step's recorder as ev.McpStarted so the servers' start is not ttft's own delay.
    mcp_start_ns: tuple[int, int] | None = None


@dataclass(frozen=True, slots=True)
class AgentListener:
    """What a front end hears of a tool-using turn as it goes, given when the turn is made. Each is called
    on the turn's event loop; ``ask`` is awaited (the chat's dialog), and without it consent decides alone."""

    on_event: Callable[[ev.Event], None] | None = None  # each model step's events, as they arrive
    on_step: Callable[[TurnRecorder], None] | None = None  # a model step begins (the echo follows its recorder)
    on_tool: Callable[[ToolStep, ToolResult | None], None] | None = None  # a tool call ended
    on_notice: Callable[[str], None] | None = None  # a cut result, a refused call, the step limit
    ask: Ask | None = None  # the chat: asks the person; a denial goes back to the model, and the loop goes on


@dataclass
class AgentResult:
    """What a tool-using turn leaves: each model step's record, the tool and approval steps, the notices,
    and the one joined record (set, and logged, when the turn ends, also when it is cancelled)."""

    models: list[TurnRecord] = field(default_factory=list)
    tools: list[ToolStep] = field(default_factory=list)
    approvals: list[ApprovalStep] = field(default_factory=list)
    notices: dict[str, Any] = field(default_factory=dict)
    record: TurnRecord | None = None
    log_error: str | None = None


class AgentTurn:
    """One tool-using turn, run by :meth:`run`: its settings and its listener are given here, and what it
    leaves is in :attr:`result` (``result.record`` is set, and logged, when it ends, also when it is
    cancelled: ``run`` then re-raises). ``first``: the first step's recorder, made (and stamped
    Submitted) by the caller; ``submitted_ns``: when the person asked, where the caller made none.
    ``before_finish``: given each model step's recorder as the turn ends, before it is finished (the API's
    loop lag)."""

    def __init__(
        self,
        backend: Backend,
        request: ChatRequest,
        host: ToolHost,
        consent: Consent,
        *,
        session_id: str,
        turn_index: int,
        log: SessionLog | None = None,
        settings: AgentSettings = AgentSettings(),
        listener: AgentListener = AgentListener(),
        first: TurnRecorder | None = None,
        submitted_ns: int | None = None,
        before_finish: Callable[[TurnRecorder], None] | None = None,
    ) -> None:
        self.backend, self.request, self.host, self.consent = backend, request, host, consent
        self.before_finish = before_finish
        self.session_id, self.turn_index, self.log = session_id, turn_index, log
        self.settings, self.listener = settings, listener
        self.first, self.submitted_ns = first, submitted_ns
        self.result = AgentResult()
        # The model steps' recorders, finished only when the turn ends: a record's first finish() imports numpy
        # (its ITL percentiles), 150-200 ms that would otherwise sit between the first step and its tools.
        self._steps: list[TurnRecorder] = []
        # What is going on now, for a live view: the calls running (call id -> step so far), the call asked about.
        self._running: dict[str, ToolStep] = {}
        self._asking: ApprovalStep | None = None

    def live_steps(self, now_ns: int) -> tuple[StepRecord, ...]:
        """The steps so far as the record will list them (the running ones end now), for a live view."""
        return live_steps(
            list(self._steps),
            list(self.result.tools),
            list(self.result.approvals),
            list(self._running.values()),
            now_ns,
            self._asking,
        )

    async def run(self) -> TurnRecord:
        stopped: Stopped = "answer"
        error: ErrorInfo | None = None
        try:
            stopped, error = await self._loop()
        except asyncio.CancelledError:
            stopped = "cancelled"
            raise
        except Exception as exc:  # ttft's own bug: the record must not read as an answer (the caller reports it)
            stopped = "error"
            error = ErrorInfo(
                type(exc).__name__, f"ttft's tool loop failed ({type(exc).__name__}): the steps that arrived are kept"
            )
            raise
        finally:
            if not self._steps:  # cancelled before the first step was even made
                self._steps.append(self.first if self.first is not None else self._recorder_for(self.request))
            if self.before_finish is not None:
                for r in self._steps:
                    self.before_finish(r)
            self.result.models = [r.finish() for r in self._steps]
            self.result.record, self.result.log_error = deliver_record(
                join_turn(
                    self.result.models,
                    self.result.tools,
                    stopped=stopped,
                    max_steps=self.settings.max_steps,
                    error=error,
                    notices=self.result.notices,
                    approvals=self.result.approvals,
                ),
                self.log,
            )
        return self.result.record

    def _recorder_for(self, request: ChatRequest) -> TurnRecorder:
        rec = new_recorder(
            self.backend,
            request,
            session_id=self.session_id,
            turn_index=self.turn_index,
            extra=self.settings.extra,
            saved_probe=self.settings.saved_probe,
            probe=self.settings.probe,
        )
        first = not self._steps
        if first:
            rec.branch_of = self.settings.branch_of
        rec.feed(ev.Submitted(self.submitted_ns if first and self.submitted_ns is not None else ev.now_ns()))
        if first and self.settings.mcp_start_ns is not None:
            rec.feed(ev.McpStarted(self.settings.mcp_start_ns[1], start_ns=self.settings.mcp_start_ns[0]))
        return rec

    def _notice(self, key: str, text: str) -> None:
        self.result.notices[key] = text
        if self.listener.on_notice is not None:
            self.listener.on_notice(text)

    async def _loop(self) -> tuple[Stopped, ErrorInfo | None]:
        specs = {s.name: s for s in self.host.tools()}
        messages = list(self.request.messages)
        base = replace(self.request, tools=tool_defs(list(specs.values())))
        for step in range(1, self.settings.max_steps + 1):
            request = replace(base, messages=tuple(messages))
            recorder = self.first if step == 1 and self.first is not None else self._recorder_for(request)
            self._steps.append(recorder)
            if self.listener.on_step is not None:
                self.listener.on_step(recorder)
            await stream_turn(self.backend, request, recorder, on_event=self.listener.on_event)
            calls = [
                ToolCall(cid or f"call_{step}_{i}", c["name"], c["arguments"])
                for i, (c, cid) in enumerate(zip(recorder.tool_calls, recorder.tool_call_ids, strict=True))
            ]
            status = recorder.status
            answer = recorder.answer
            if status != "ok" or not calls:
                return ("answer" if status == "ok" else "error"), None
            if step == self.settings.max_steps:
                self._notice(
                    MAX_STEPS_NOTICE,
                    f"the model still asked for {len(calls)} tool call(s) at --max-steps {self.settings.max_steps}:"
                    " the loop stopped there, without a final answer",
                )
                return "max_steps", None
            if self.listener.ask is not None:
                results = await self._asked(calls, specs)
                messages.append(Message("assistant", answer, tool_calls=tuple(calls)))
                messages += [
                    Message("tool", r.text, tool_call_id=c.call_id, is_error=r.is_error)
                    for c, r in zip(calls, results, strict=True)
                ]
                continue
            refused = [c for c in calls if self.consent.decide(c.name) != "allow"]
            if refused:
                now = ev.now_ns()
                for c in refused:
                    server = specs[c.name].server if c.name in specs else ""
                    self.result.tools.append(ToolStep(c.name, server, now, now, "denied", call_id=c.call_id))
                names = ", ".join(sorted({c.name for c in refused}))
                return "denied", ErrorInfo(
                    ErrorKind.TOOL_NOT_ALLOWED,
                    f"The model called {names}, which was not allowed, so no tool ran and the turn stopped.",
                    None,
                    "Allow it with --allow-tool NAME (or every tool with --allow-tools).",
                )
            results = await asyncio.gather(*(self._call(c, specs) for c in calls))
            messages.append(Message("assistant", answer, tool_calls=tuple(calls)))
            messages += [
                Message("tool", r.text, tool_call_id=c.call_id, is_error=r.is_error)
                for c, r in zip(calls, results, strict=True)
            ]
        raise AssertionError("unreachable: the last step returns")  # pragma: no cover

    async def _asked(self, calls: list[ToolCall], specs: dict[str, ToolSpec]) -> list[ToolResult]:
        """The step's calls, each asked about in turn where nothing allowed it yet; then the allowed
        ones run at once, and each denied one is a denied result (in the calls' order)."""
        allowed: list[bool] = []
        for i, c in enumerate(calls):
            spec = specs.get(c.name)
            # No such tool, or arguments no tool may get: nothing would run, so nobody is asked (_result says why)
            decision = self.consent.decide(c.name) if spec is not None and _readable(c) else "allow"
            if decision == "ask":
                assert self.listener.ask is not None
                answer = await self._ask(c, spec, i, len(calls))
                if answer != "deny":  # a denial is for this call only: the next one is asked about again
                    self.consent.answer(c.name, answer)
                decision = self.consent.decide(c.name) if answer != "deny" else "deny"
            allowed.append(decision == "allow")
        denied: dict[int, ToolResult] = {}
        for i, (c, ok) in enumerate(zip(calls, allowed, strict=True)):
            if not ok:
                now = ev.now_ns()
                spec = specs.get(c.name)
                step = ToolStep(c.name, spec.server if spec else "", now, now, "denied", call_id=c.call_id)
                denied[i] = denied_result(c.name)
                self._ended(step, denied[i])
        ran = await asyncio.gather(*(self._call(c, specs) for c, ok in zip(calls, allowed, strict=True) if ok))
        out, it = [], iter(ran)
        for i in range(len(calls)):
            out.append(denied[i] if i in denied else next(it))
        return out

    async def _ask(self, call: ToolCall, spec: ToolSpec | None, i: int, n: int) -> Answer:
        assert self.listener.ask is not None
        server = spec.server if spec is not None else ""
        start = ev.now_ns()
        self._asking = ApprovalStep(call.name, server, start, start, "cancelled", call.call_id)
        said: ApprovalAnswer = "cancelled"
        try:
            answer = await self.listener.ask(call, spec, i, n)
            said = answer
            return answer
        finally:
            self._asking = None
            self.result.approvals.append(ApprovalStep(call.name, server, start, ev.now_ns(), said, call.call_id))

    async def _call(self, call: ToolCall, specs: dict[str, ToolSpec]) -> ToolResult:
        spec = specs.get(call.name)
        server = spec.server if spec is not None else ""
        start = ev.now_ns()
        result: ToolResult | None = None
        self._running[call.call_id] = ToolStep(call.name, server, start, start, "ok", call_id=call.call_id)
        try:
            result, status = await self._result(call, spec)
        except asyncio.CancelledError:
            self._ended(ToolStep(call.name, server, start, ev.now_ns(), "cancelled", call_id=call.call_id), None)
            raise
        finally:
            self._running.pop(call.call_id, None)
        result = cap(result, self.settings.max_result_bytes)
        end = ev.now_ns()
        if result.truncated:
            self._notice(
                f"{TRUNCATED_NOTICE}:{call.call_id}",
                f"the result of {call.name} was cut to {len(result.text.encode())} of {result.size_bytes} bytes"
                " before the model read it",
            )
        step = ToolStep(call.name, server, start, end, status, result.size_bytes, result.truncated, call.call_id)
        self._ended(step, result)
        return result

    def _ended(self, step: ToolStep, result: ToolResult | None) -> None:
        self.result.tools.append(step)
        if self.listener.on_tool is not None:
            self.listener.on_tool(step, result)

    async def _result(self, call: ToolCall, spec: ToolSpec | None) -> tuple[ToolResult, ToolStatus]:
        if spec is None:
            return ToolResult(f"there is no tool named {call.name!r}", is_error=True), "error"
        try:
            arguments = call.arguments_object()
        except ArgumentsRefused as exc:
            if exc.reason == "not_json":  # the model's slip (a cut-off object): it reads why and tries again
                return ToolResult(f"the arguments are not valid JSON ({exc})", is_error=True), "error"
            # Past the guard's limits: nothing walks them, the tool never sees them, and the turn says so.
            self._notice(
                f"{ARGUMENTS_REFUSED_NOTICE}:{call.call_id}",
                f"{exc}: ttft refused the call of {call.name} without running it, and told the model why",
            )
            return ToolResult(f"ttft refused this call without running it: {exc}.", is_error=True), "refused"
        try:
            result = await self.host.call(call.name, arguments)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a host must not raise for a tool's failure; if one does, the model hears it
            result = ToolResult(f"the tool failed: {type(exc).__name__}: {exc}", is_error=True)
        return result, ("error" if result.is_error else "ok")
