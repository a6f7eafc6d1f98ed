"""The compare screen's hand-off between threads: prompts run on the stream thread (``LoopThread``), where
``CompareRunner`` releases the panes; each pane's start and end come back to the UI loop as queued tasks,
never waited on, so painting can never delay a stream; and a prompt's requests go out only once every new
answer is laid out.

With tools (``--mcp``) each pane's model steps, tool results and questions come over the same way:
:meth:`PaneController.tools` makes the runner's :class:`~backends.compare.runner.PaneTools`. A call to
ask about opens the chat's dialog (``tui.screens.approve``), one at a time; the consent is shared, so a
call that waited behind another pane's "always" for the same tool runs without asking again."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from textual.css.query import NoMatches

from ...backends.agent.consent import Answer, Consent
from ...backends.agent.host import ToolHost, ToolResult
from ...backends.agent.loop import AgentTurn
from ...backends.base import Backend, ToolCall, ToolSpec
from ...backends.compare.runner import CompareRunner, PaneTools, PromptResult
from ...backends.turn import warm_up
from ...telemetry.agent.steps import ToolStep, tool_step
from ...telemetry.record import TurnRecord
from ...telemetry.recorder import TurnRecorder
from ...telemetry.steps import ToolStepRecord
from ..format import visible_controls
from ..runner import LoopThread
from ..screens.approve import Approval, ApproveScreen, Reply
from .pane import PaneView


class PaneHost(Protocol):
    """What the controller needs of the screen: its panes, and a way to wait for a paint."""

    @property
    def views(self) -> list[PaneView]: ...

    async def wait_for_refresh(self) -> bool: ...

    @property
    def is_attached(self) -> bool: ...

    def pane_done(self) -> None:
        """A pane's turn ended (the race view redraws)."""

    @property
    def app(self) -> Any: ...

    def notify(self, message: str, *, severity: Any = ..., markup: bool = ..., timeout: float | None = ...) -> None: ...


class PaneController:
    """Owns the stream thread and every hop between it and the UI loop for one compare screen."""

    def __init__(self, host: PaneHost, runner: CompareRunner, running: Callable[[], bool]) -> None:
        self.host = host
        self.runner = runner
        self.running = running  # the app still runs: a pane update failing then is a bug, not a shutdown
        self.stream = LoopThread("ttft-compare")
        self.repeat = 1  # trials of the prompt in flight
        self._ui_loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._agents: dict[int, AgentTurn] = {}  # each pane's tool-using turn in flight (its steps' records at the end)
        self._asking = asyncio.Lock()  # one approval dialog at a time, whichever pane asks
        self.consent = Consent(ask=True)
        self.dialog: ApproveScreen | None = None

    # --- lifecycle -----------------------------------------------------------------
    def attach(self) -> None:
        """Called on the UI loop once the screen is mounted."""
        self._ui_loop = asyncio.get_running_loop()

    def warm(self, backend: Backend) -> None:
        """First-use costs while the user types, not in the first prompt's own delay."""
        fut = self.stream.submit(warm_up(backend))  # a backend process finishes it before a turn sent meanwhile
        fut.add_done_callback(lambda f: f.cancelled() or f.exception())  # best effort: never raises

    def on_stream(self, fn: Callable[[], Any]) -> None:
        if not self.stream.loop.is_closed():
            self.stream.loop.call_soon_threadsafe(fn)

    def cancel(self) -> None:
        self.on_stream(self.runner.cancel)

    def close_backend(self, backend: Backend) -> None:
        self.stream.submit(backend.aclose())

    async def close(self) -> None:
        for task in list(self._tasks):  # pane updates still queued: their widgets are going
            task.cancel()
        self.cancel()
        with contextlib.suppress(Exception):
            await self.stream.call(self.runner.aclose)
        self.stream.close()

    # --- tools -------------------------------------------------------------------
    def tools(self, host: ToolHost, consent: Consent, max_steps: int) -> PaneTools:
        """The runner's tools: every pane's steps, results and questions handed to the UI loop."""
        self.consent = consent
        return PaneTools(
            host,
            consent,
            max_steps=max_steps,
            ask=self._ask,
            on_step=self._step,
            on_tool=self._tool,
            on_notice=self._notice,
        )

    # Called on the stream thread.
    def _step(self, pane: int, recorder: TurnRecorder) -> None:
        agent = self.runner.agents.get(pane)
        if agent is not None:
            self._agents[pane] = agent
        self._to_ui(self._ui_step(pane, recorder))

    def _tool(self, pane: int, step: ToolStep, result: ToolResult | None) -> None:
        self._to_ui(self._ui_tool(pane, tool_step(step, step.start_ns), result.text if result is not None else None))

    def _notice(self, pane: int, text: str) -> None:
        label = self.runner.panes[pane].label if pane < len(self.runner.panes) else "?"
        assert self._ui_loop is not None
        self._ui_loop.call_soon_threadsafe(
            lambda: self.host.notify(visible_controls(f"{label}: {text}"), severity="warning", markup=False)
        )

    async def _ask(self, pane: int, call: ToolCall, spec: ToolSpec | None, index: int, count: int) -> Answer:
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[Answer] = loop.create_future()

        def reply(answer: Answer | None) -> None:  # on the UI loop; None: stop this pane's turn
            def give() -> None:
                if answer is None:
                    self.runner.cancel(pane)
                elif not answered.done():
                    answered.set_result(answer)

            with contextlib.suppress(RuntimeError):  # the stream loop already closed: nobody waits
                loop.call_soon_threadsafe(give)

        label = self.runner.panes[pane].label
        approval = Approval(
            call.name,
            spec.server if spec is not None else "",
            spec.description if spec is not None else "",
            call.arguments,
            index,
            count,
            pane=label,
        )
        self._to_ui(self._ui_ask(approval, reply))
        return await answered

    # --- a prompt ------------------------------------------------------------------
    def run_prompt(self, prompt: str, repeat: int, submitted_ns: int) -> asyncio.Future[PromptResult]:
        """Start the prompt on the stream thread; the future resolves on the UI loop when every pane is done."""
        self.repeat = repeat
        future = self.stream.submit(
            self.runner.run_prompt(
                prompt,
                repeat=repeat,
                on_start=self._started,
                on_done=self._done,
                ready=self._ready,
                submitted_ns=submitted_ns,
            )
        )
        return asyncio.wrap_future(future)

    async def settle(self) -> None:
        """Every pane's queued UI work (finalize, error cards) has landed."""
        for v in list(self.host.views):
            async with v.ui_lock:
                pass

    # Called on the stream thread: hand over to the UI loop without waiting (never block a stream).
    def _started(self, pane: int, trial: int, recorder: TurnRecorder) -> None:
        self._to_ui(self._ui_started(pane, trial, recorder))

    def _done(self, pane: int, trial: int, record: TurnRecord) -> None:
        agent = self._agents.pop(pane, None)
        models = list(agent.result.models) if agent is not None and agent.result.record is record else []
        self._to_ui(self._ui_done(pane, record, models))

    async def _ready(self) -> None:
        """Resolves once every pane just started is laid out and on screen: the requests go out then,
        so mounting and laying out the new answers never competes with their first tokens."""
        assert self._ui_loop is not None
        fut: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._ui_loop.call_soon_threadsafe(self._spawn, self._ui_ready(fut))
        await asyncio.wrap_future(fut)

    def _to_ui(self, coro: Coroutine[Any, Any, None]) -> None:
        assert self._ui_loop is not None
        self._ui_loop.call_soon_threadsafe(self._spawn, coro)

    # --- on the UI loop ------------------------------------------------------------
    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(self._while_attached(coro))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _while_attached(self, coro: Coroutine[Any, Any, None]) -> None:
        """A pane update from the stream thread; one that lands while the app is closing finds
        its widgets gone, and is dropped (the turn itself is recorded and logged by the runner)."""
        try:
            await coro
        except NoMatches:
            if self.running() and self.host.is_attached:
                raise

    async def _ui_started(self, pane: int, trial: int, recorder: TurnRecorder) -> None:
        view = self.host.views[pane]
        async with view.ui_lock:
            await view.render_final()  # sequential mode: the previous trial's answer in full first
            await view.start_trial(trial, self.repeat, recorder)

    async def _ui_step(self, pane: int, recorder: TurnRecorder) -> None:
        view = self.host.views[pane]
        async with view.ui_lock:
            await view.step_began(recorder)

    async def _ui_tool(self, pane: int, step: ToolStepRecord, text: str | None) -> None:
        view = self.host.views[pane]
        async with view.ui_lock:
            await view.tool_ended(step, text)

    async def _ui_ask(self, approval: Approval, reply: Callable[[Answer | None], None]) -> None:
        """The dialog for one call, after any other pane's; a tool another pane's answer allowed since
        is not asked about again."""
        async with self._asking:
            c = self.consent
            if c.allow_all or approval.tool in c.allowed:
                reply("always")
                return
            if approval.tool in c.denied:
                reply("deny")
                return
            answered: asyncio.Future[Reply | None] = asyncio.get_running_loop().create_future()
            self.dialog = ApproveScreen(approval)

            def dismissed(r: Reply | None) -> None:
                if not answered.done():
                    answered.set_result(r)

            self.host.app.push_screen(self.dialog, dismissed)
            try:
                got = await answered
            finally:
                self.dialog = None
            if got == "always":  # now, not when the stream thread hears it: a dialog queued behind this one reads it
                c.answer(approval.tool, "always")
            reply(None if got in ("stop", None) else got)  # type: ignore[arg-type]

    async def _ui_done(self, pane: int, record: TurnRecord, models: list[TurnRecord] | None = None) -> None:
        view = self.host.views[pane]
        async with view.ui_lock:
            await view.finish_trial(record, render=False, models=models or [])
        self.host.pane_done()
        if not any(v.recorder is not None for v in self.host.views):  # nobody streams now: full renders
            for v in list(self.host.views):
                async with v.ui_lock:
                    await v.render_final()

    async def _ui_ready(self, fut: concurrent.futures.Future[None]) -> None:
        try:
            await self.settle()  # the _ui_started calls queued before this one hold these locks
            await self.host.wait_for_refresh()  # the new answers are laid out: their rooms can be measured
            for v in list(self.host.views):
                v.fit_room()
            await self.host.wait_for_refresh()  # ... and laid out in turn
        finally:
            if not fut.done():
                fut.set_result(None)
