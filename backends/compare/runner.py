"""Run one prompt on several backends, side by side, and log every turn tagged with its pane.

Each pane keeps its own conversation and gets its own recorder from
:func:`backends.turn.new_recorder`; every turn is a :class:`backends.ask.core.TurnCore`, the
piece ``ttft ask`` and the chat run, so it is measured and logged exactly as theirs are. In ``parallel`` mode all
panes wait behind one barrier and are released in the same event-loop step; in
``sequential`` mode they run one after another (the order rotates with each
trial, so no pane always goes first). A pane that fails fails alone.

Trials resend the same conversation: only the last trial's answer joins the
pane's history, so every trial of a prompt sees the same context.

With :class:`PaneTools` (``ttft compare --mcp``) every pane whose backend takes tools runs its turn as
the agent loop (``TurnCore`` makes it) on the same host and under the same consent,
so each model is offered the same tools and an "always" given in one pane holds in every pane; the
front end hears each pane's steps, tool results and questions tagged with the pane.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from ...telemetry import events as ev
from ...telemetry.agent.steps import ToolStep
from ...telemetry.cost import warm as warm_prices
from ...telemetry.log.turns import SessionLog
from ...telemetry.record import TurnRecord
from ...telemetry.recorder import TurnRecorder
from ...telemetry.settings import TurnSettings
from ..agent.consent import Answer, Consent
from ..agent.host import ToolHost, ToolResult
from ..agent.loop import DEFAULT_MAX_STEPS, AgentListener, AgentTurn
from ..ask.core import Offered, TurnCore
from ..base import Backend, ChatRequest, Message, ToolCall, ToolSpec, build_request
from ..finish import finish_turn
from ..turn import new_recorder

# How a comparison runs its panes: all at once, or one after another (no pane slowed by another).
CompareMode = Literal["parallel", "sequential"]
MODES: tuple[CompareMode, ...] = ("parallel", "sequential")

OnStart = Callable[[int, int, TurnRecorder], None]  # pane, trial, recorder (poll its snapshot)
OnDone = Callable[[int, int, TurnRecord], None]
OnEvent = Callable[[int, ev.Event], None]
Ready = Callable[[], Awaitable[None]]  # resolves when the front end is ready to show the turns just started
READY_TIMEOUT_S = 2.0  # a front end that never answers delays a release by this much, no more

# Asks the person about one pane's call: the pane, the call, its tool, its place in the step, the step's calls.
PaneAsk = Callable[[int, ToolCall, ToolSpec | None, int, int], Awaitable[Answer]]


@dataclass
class PaneTools:
    """The tools every pane is offered: one host, one consent (shared: an "always" holds in every pane),
    and the front end's ears, each call tagged with the pane. ``ask`` None: nobody to ask (headless), a
    call the consent does not allow stops that pane's turn (``tool_not_allowed``)."""

    host: ToolHost
    consent: Consent
    max_steps: int = DEFAULT_MAX_STEPS
    ask: PaneAsk | None = None
    on_step: Callable[[int, TurnRecorder], None] | None = None  # a model step begins (the first one too)
    on_tool: Callable[[int, ToolStep, ToolResult | None], None] | None = None  # a tool call ended
    on_notice: Callable[[int, str], None] | None = None
    # Headless compare starts the servers after the submit: (start, end) in monotonic ns, fed to each pane's
    # first turn as ev.McpStarted, the servers' time and not ttft's own delay.
    mcp_start_ns: tuple[int, int] | None = None


def _pane_listener(i: int, tools: PaneTools, on_event: OnEvent | None) -> AgentListener:
    """The front end's ears for pane ``i``'s tool-using turn: each call tagged with the pane."""
    on_step, on_tool, on_notice, ask = tools.on_step, tools.on_tool, tools.on_notice, tools.ask
    return AgentListener(
        on_event=(lambda e: on_event(i, e)) if on_event is not None else None,
        on_step=(lambda rec: on_step(i, rec)) if on_step is not None else None,
        on_tool=(lambda step, result: on_tool(i, step, result)) if on_tool is not None else None,
        on_notice=(lambda text: on_notice(i, text)) if on_notice is not None else None,
        ask=(lambda call, spec, k, n: ask(i, call, spec, k, n)) if ask is not None else None,
    )


@dataclass(frozen=True)
class _Hooks:
    """A front end's callbacks for one prompt (any may be None)."""

    on_start: OnStart | None = None
    on_done: OnDone | None = None
    on_event: OnEvent | None = None
    ready: Ready | None = None

    def started(self, pane: int, trial: int, recorder: TurnRecorder) -> None:
        if self.on_start is not None:
            self.on_start(pane, trial, recorder)

    def done(self, pane: int, trial: int, record: TurnRecord) -> None:
        if self.on_done is not None:
            self.on_done(pane, trial, record)

    async def until_ready(self) -> None:
        if self.ready is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.ready(), READY_TIMEOUT_S)


def new_comparison_id() -> str:
    return "cmp-" + datetime.now(UTC).strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)


@dataclass
class ComparePane:
    backend: Backend
    label: str = ""
    history: list[Message] = field(default_factory=list)
    settings: TurnSettings = field(default_factory=TurnSettings)

    def __post_init__(self) -> None:
        if not self.label:
            self.label = f"{self.backend.provider}:{self.backend.model}"


@dataclass
class PromptResult:
    """All turns of one prompt: ``records[pane][trial]`` (a pane skipped by a cancel has fewer)."""

    prompt_index: int
    prompt: str
    mode: CompareMode
    records: list[list[TurnRecord]]
    start_skew_ms: list[float]  # parallel mode: max - min first send, per trial

    def as_dicts(self) -> list[list[dict[str, Any]]]:
        return [[r.to_dict() for r in recs] for recs in self.records]


class CompareRunner:
    def __init__(
        self,
        panes: Sequence[ComparePane],
        *,
        log: SessionLog | None = None,
        comparison_id: str | None = None,
        mode: CompareMode = "parallel",
        system: str | None = None,
        tools: PaneTools | None = None,
    ) -> None:
        if not panes:
            raise ValueError("a comparison needs at least one pane")
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}")
        self.panes = list(panes)
        self.pane_ids = list(range(len(self.panes)))  # stable ids for the log, across add/remove/keep
        self.kept = False
        self.log = log
        self.comparison_id = comparison_id or new_comparison_id()
        self.mode: CompareMode = mode
        self.system = system
        self.tools = tools  # may be set later (the screen's servers start while the user types)
        self.agents: dict[int, AgentTurn] = {}  # the tool-using turn in flight in each pane (a live view reads it)
        self.session_id = log.session_id if log is not None else self.comparison_id
        self.prompt_index = 0
        self._turn_index = log.next_turn_index() if log is not None else 0
        self._tasks: dict[int, asyncio.Task[TurnRecord]] = {}
        self._cancel_requested: set[int] = set()
        self._stop = False
        self._submitted_ns: int | None = None  # the current prompt's submit (run_prompt)

    # --- one prompt, every pane ---------------------------------------------------------
    async def run_prompt(
        self,
        prompt: str,
        *,
        repeat: int = 1,
        on_start: OnStart | None = None,
        on_done: OnDone | None = None,
        on_event: OnEvent | None = None,
        ready: Ready | None = None,
        submitted_ns: int | None = None,
    ) -> PromptResult:
        """Every pane, ``repeat`` trials. ``on_start`` sees each turn's recorder before its request
        goes out; ``ready`` (awaited after the ``on_start`` calls, before the release) lets a front end
        finish laying out the new turns first, so its drawing work does not overlap the streams' start.

        ``submitted_ns``: when the user asked (Enter), the start of each first turn's own delay
        (``own_delay_ms``); a turn ttft starts by itself (a later trial, the next pane in sequential
        mode) counts its own delay from the moment ttft starts it."""
        if repeat < 1:
            raise ValueError("repeat must be >= 1")
        index = self.prompt_index
        self.prompt_index += 1
        records: list[list[TurnRecord]] = [[] for _ in self.panes]
        skews: list[float] = []
        requests = [self._request(p, prompt) for p in self.panes]
        hooks = _Hooks(on_start, on_done, on_event, ready)
        self._submitted_ns = submitted_ns
        self._stop = False
        for trial in range(repeat):
            if self._stop:
                break
            self._cancel_requested = set()
            if self.mode == "parallel":
                got, skew = await self._parallel(requests, index, trial, hooks)
                skews.append(skew)
            else:
                got = await self._sequential(requests, index, trial, hooks)
            for i, rec in got.items():
                records[i].append(rec)
        for pane, recs in zip(self.panes, records, strict=True):
            answered = [r for r in recs if r.answer]
            if answered:
                pane.history += [Message("user", prompt), Message("assistant", answered[-1].answer)]
        return PromptResult(index, prompt, self.mode, records, skews)

    def cancel(self, pane: int | None = None) -> None:
        """Cancel the turn in flight in one pane (the others go on), or in all panes and stop the trials.

        What arrived is kept: the cancelled turns are recorded, logged and returned.
        """
        if pane is None:
            self._stop = True
        for i, task in list(self._tasks.items()):
            if pane is None or i == pane:
                self._cancel_requested.add(i)
                task.cancel()

    def add(self, pane: ComparePane) -> int:
        """A new pane, from the next prompt on; returns its position."""
        self.panes.append(pane)
        self.pane_ids.append(max(self.pane_ids, default=-1) + 1)
        return len(self.panes) - 1

    def remove(self, pane: int) -> ComparePane:
        """Drop the pane at this position (close its backend yourself)."""
        if len(self.panes) <= 1:
            raise ValueError("cannot remove the last pane")
        self.pane_ids.pop(pane)
        return self.panes.pop(pane)

    def keep(self, pane: int) -> list[ComparePane]:
        """Continue with this pane alone; returns the dropped ones (close their backends yourself)."""
        dropped = [p for i, p in enumerate(self.panes) if i != pane]
        self.panes, self.pane_ids = [self.panes[pane]], [self.pane_ids[pane]]
        self.kept = True
        return dropped

    async def aclose(self) -> None:
        self.cancel()
        for p in self.panes:
            await p.backend.aclose()

    # --- internals ----------------------------------------------------------------------
    def _request(self, pane: ComparePane, prompt: str) -> ChatRequest:
        return build_request(prompt, system=self.system, history=pane.history, settings=pane.settings)

    def _recorder(self, i: int, request: ChatRequest, prompt_index: int, trial: int, position: int) -> TurnRecorder:
        extra = {
            "comparison_id": self.comparison_id,
            "pane": self.pane_ids[i],
            "pane_label": self.panes[i].label,
            "panes": len(self.panes),
            "mode": self.mode,
            "trial": trial,
            "prompt_index": prompt_index,
            "position": position,
        }
        if self.kept:
            extra["kept"] = True
        rec = new_recorder(
            self.panes[i].backend, request, session_id=self.session_id, turn_index=self._turn_index, extra=extra
        )
        self._turn_index += 1
        asked = self._submitted_ns
        first = asked is not None and trial == 0 and position == 0
        rec.feed(ev.Submitted(asked if first and asked is not None else ev.now_ns()))
        started = self.tools.mcp_start_ns if self.tools is not None else None
        if first and started is not None and asked is not None and started[0] >= asked:
            rec.feed(ev.McpStarted(started[1], start_ns=started[0]))
        return rec

    def _core(self, i: int, request: ChatRequest, recorder: TurnRecorder, on_event: OnEvent | None) -> TurnCore:
        """The pane's turn: the agent loop where tools are offered and its backend takes them (the one host and
        consent every pane shares), else one stream."""
        tools = self.tools
        if tools is not None and tools.host.tools():
            offered = Offered(tools.host, tools.consent, tools.max_steps)
            listener = _pane_listener(i, tools, on_event)
        else:
            offered, listener = (
                None,
                AgentListener(on_event=(lambda e: on_event(i, e)) if on_event is not None else None),
            )
        return TurnCore(self.panes[i].backend, request, recorder, log=self.log, tools=offered, listener=listener)

    async def _one(self, i: int, request: ChatRequest, recorder: TurnRecorder, on_event: OnEvent | None) -> TurnRecord:
        """The pane's turn, recorded and logged however it ends; a pane cancelled on request ends alone."""
        core = self._core(i, request, recorder, on_event)
        if core.agent is not None:
            self.agents[i] = core.agent
        try:
            return await core.run()
        except asyncio.CancelledError as exc:
            if i in self._cancel_requested:
                return core.failed(exc, "a comparison's turn")
            raise
        except Exception as exc:  # raised outside the turn's own guards (e.g. closing the stream)
            return core.failed(exc, "a comparison's turn")  # a failed log write is in log.write_errors
        finally:
            self.agents.pop(i, None)

    def _never_sent(self, i: int, trial: int, recorder: TurnRecorder, hooks: _Hooks) -> TurnRecord:
        """A turn started (its pane shows it) but cancelled before its request went out."""
        recorder.feed(ev.Cancelled(ev.now_ns()))
        record = finish_turn(recorder, self.log)
        hooks.done(i, trial, record)
        return record

    async def _parallel(
        self,
        requests: list[ChatRequest],
        prompt_index: int,
        trial: int,
        hooks: _Hooks,
    ) -> tuple[dict[int, TurnRecord], float]:
        # An SDK's first-use costs (its first stream builds the typed models: tens of ms of CPU) are
        # paid before the barrier: paid after it, one pane's warm-up held the others' sends back.
        for pane in self.panes:
            warm = getattr(pane.backend, "warm_up", None)
            if warm is not None:
                with contextlib.suppress(Exception):  # met again, and recorded, by the turn itself
                    await warm()
            # The price table's import (0.2-0.3 s, once): paid at the first pane's end, it held the other
            # panes' streams, and so their stamps, back.
            warm_prices(getattr(pane.backend, "price", None))
        release = asyncio.Event()
        parked = 0
        recorders = [self._recorder(i, r, prompt_index, trial, 0) for i, r in enumerate(requests)]

        async def pane_task(i: int) -> TurnRecord:
            nonlocal parked
            parked += 1
            await release.wait()
            record = await self._one(i, requests[i], recorders[i], hooks.on_event)
            hooks.done(i, trial, record)
            return record

        for i, rec in enumerate(recorders):
            hooks.started(i, trial, rec)
        await hooks.until_ready()
        if self._stop:  # cancelled while the front end got ready: nothing went out
            return {i: self._never_sent(i, trial, rec, hooks) for i, rec in enumerate(recorders)}, 0.0
        self._tasks = {i: asyncio.create_task(pane_task(i)) for i in range(len(requests))}
        try:
            while parked < len(requests):  # every pane is parked at the barrier
                await asyncio.sleep(0)
            release.set()
            results = await asyncio.gather(*self._tasks.values(), return_exceptions=True)
        finally:
            tasks, self._tasks = self._tasks, {}
            for t in tasks.values():
                t.cancel()
        records = {
            i: r if isinstance(r, TurnRecord) else finish_turn(recorders[i], self.log) for i, r in enumerate(results)
        }
        sent = [r.timestamps.sent for r in records.values() if r.timestamps.sent is not None]
        skew = (max(sent) - min(sent)) / 1e6 if len(sent) > 1 else 0.0
        return records, skew

    async def _sequential(
        self,
        requests: list[ChatRequest],
        prompt_index: int,
        trial: int,
        hooks: _Hooks,
    ) -> dict[int, TurnRecord]:
        n = len(requests)
        order = [(trial + k) % n for k in range(n)]
        out: dict[int, TurnRecord] = {}
        for position, i in enumerate(order):
            if self._stop:
                break  # cancelled as a whole: the panes not yet run are skipped
            recorder = self._recorder(i, requests[i], prompt_index, trial, position)
            hooks.started(i, trial, recorder)
            await hooks.until_ready()
            if self._stop:
                out[i] = self._never_sent(i, trial, recorder, hooks)
                break
            task = asyncio.create_task(self._one(i, requests[i], recorder, hooks.on_event))
            self._tasks = {i: task}
            try:
                out[i] = await task
            finally:
                self._tasks = {}
            hooks.done(i, trial, out[i])
        return out
