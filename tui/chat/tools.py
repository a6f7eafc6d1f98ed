"""The chat's tool-using turns: the MCP servers' tools offered to the model, each call asked about, each step drawn.

:meth:`ChatTools.agent` makes a turn's :class:`~backends.ask.core.TurnCore` with their tools when the servers are up
and the backend takes tools (``ChatTurns`` asks at each send, so a regenerated or edited prompt runs
the loop again); the in-process engine takes none, which a notice says once. The loop runs on the
stream thread, as ``ttft ask`` runs it, and its callbacks become messages to the screen:
``StepBegan`` (a model step: a new answer is drawn for it), ``ToolEnded`` (a call's result),
``ApprovalAsked`` (the dialog of :mod:`tui.screens.approve`, answered through ``reply``) and
``ToolNotice``. :class:`ToolSteps` draws them in the transcript and finishes each step's answer from
its own record when the turn ends.

Approval: each call of a step that nothing allowed yet is asked about in turn, one dialog per call
(saying "2 of 3"), before any call of the step runs; "always" holds for the rest of the chat, a
denial for that call only. Esc in the dialog denies; ``x`` stops the whole turn, as Esc does in the chat.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any, Protocol

from textual.app import App
from textual.dom import DOMNode
from textual.message import Message

from ...backends.agent.consent import Answer, Consent
from ...backends.agent.host import ToolResult
from ...backends.agent.loop import NO_TOOLS, AgentListener, supports_tools
from ...backends.ask.core import Offered, TurnCore
from ...backends.base import Backend, ChatRequest, ToolCall, ToolSpec
from ...telemetry.agent.steps import ToolStep, tool_step
from ...telemetry.log.turns import SessionLog
from ...telemetry.record import TurnRecord
from ...telemetry.recorder import TurnRecorder
from ...telemetry.steps import StepRecord
from ..runner import LiveTurn
from ..screens.approve import Approval, ApproveScreen, Reply
from ..tool_servers import ToolServers
from ..widgets.code_blocks import code_blocks
from ..widgets.tool_steps import ToolRun
from ..widgets.transcript import AssistantMessage, Transcript
from .drawn import DrawnTurns


class StepBegan(Message):
    """A model step of ``turn`` began; ``recorder`` is its own."""

    def __init__(self, turn: TurnCore, recorder: TurnRecorder) -> None:
        super().__init__()
        self.turn, self.recorder = turn, recorder


class ToolEnded(Message):
    """A call of ``turn`` ended (ran, failed, was denied or stopped); ``result``: what the model got."""

    def __init__(self, turn: TurnCore, step: ToolStep, result: ToolResult | None) -> None:
        super().__init__()
        self.turn, self.step, self.result = turn, step, result


class ApprovalAsked(Message):
    """A call of ``turn`` waits for the person's answer; ``reply`` hands it back to the loop."""

    def __init__(self, turn: TurnCore, approval: Approval, reply: Callable[[Answer], None]) -> None:
        super().__init__()
        self.turn, self.approval, self.reply = turn, approval, reply


class ToolNotice(Message):
    """Something about the tools the person should hear (a result cut, no tools for this backend)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class ChatTools:
    """The chat's tools: its servers, the consent given so far, and the loop each turn runs."""

    def __init__(self, servers: ToolServers, screen: DOMNode) -> None:
        self.servers = servers
        self.screen = screen
        self.consent = Consent(ask=True)  # "always" answers hold for the rest of the chat
        self._said_no_tools = False

    def new_chat(self) -> None:
        """A new chat asks again about every tool."""
        self.consent = Consent(ask=True)

    def agent(self, backend: Backend, request: ChatRequest, recorder: TurnRecorder, log: SessionLog) -> TurnCore | None:
        """The turn with the servers' tools (the agent loop); None where there are none to offer, or the
        backend takes none (said once)."""
        host = self.servers.host
        if host is None or not host.tools():
            return None
        if not supports_tools(backend):
            if not self._said_no_tools:
                self._said_no_tools = True
                self.screen.post_message(ToolNotice(f"The MCP tools are not offered: {NO_TOOLS}."))
            return None
        post = self.screen.post_message  # thread-safe: the callbacks run on the stream thread
        # The listener's messages name the turn they come from: ``turn`` is read when one is called, after
        # the turn below is made.

        def on_step(rec: TurnRecorder) -> None:
            post(StepBegan(turn, rec))

        def on_tool(step: ToolStep, result: ToolResult | None) -> None:
            post(ToolEnded(turn, step, result))

        def on_notice(text: str) -> None:
            post(ToolNotice(text))

        async def ask(call: ToolCall, spec: ToolSpec | None, index: int, count: int) -> Answer:
            loop = asyncio.get_running_loop()
            answered: asyncio.Future[Answer] = loop.create_future()

            def reply(answer: Answer) -> None:  # on the UI thread
                def give() -> None:
                    if not answered.done():
                        answered.set_result(answer)

                with contextlib.suppress(RuntimeError):  # the stream loop already closed: nobody waits
                    loop.call_soon_threadsafe(give)

            approval = Approval(
                call.name,
                spec.server if spec is not None else "",
                spec.description if spec is not None else "",
                call.arguments,
                index,
                count,
            )
            if not post(ApprovalAsked(turn, approval, reply)):
                return "deny"  # the chat is closing: nobody to ask
            return await answered

        turn = TurnCore(
            backend,
            request,
            recorder,
            log=log,
            tools=Offered(host, self.consent),
            listener=AgentListener(on_step=on_step, on_tool=on_tool, on_notice=on_notice, ask=ask),
        )
        return turn


def live_steps(live: LiveTurn | None, now_ns: int) -> tuple[StepRecord, ...]:
    """A tool-using turn in flight's steps so far (() for any other turn)."""
    return live.core.live_steps(now_ns) if live is not None and live.core is not None else ()


class StepsScreen(Protocol):
    """What :class:`ToolSteps` draws on: the chat's screen."""

    @property
    def on_screen(self) -> LiveTurn | None: ...
    @property
    def transcript(self) -> Transcript: ...
    @property
    def app(self) -> App[Any]: ...
    def clock(self) -> int: ...
    def frame(self, force: bool = False, pane: bool = True) -> None: ...


class ToolSteps:
    """Draws the tool-using turn on the chat's screen: a new answer per model step, each call's result
    under the step that asked for it, the dialog for each call asked about."""

    def __init__(
        self,
        screen: StepsScreen,
        drawn: DrawnTurns,
        *,
        cancel: Callable[[], object],
        focus_prompt: Callable[[], object],
    ) -> None:
        self.screen = screen
        self.drawn = drawn  # the turn on screen's answer: a new one per model step
        self._cancel = cancel  # the turn in flight (a "stop" in the approval dialog)
        self._focus_prompt = focus_prompt
        self.answers: list[AssistantMessage] = []  # the answer drawn for each model step of the turn on screen
        self.dialog: ApproveScreen | None = None  # the open dialog, closed if the turn ends first

    def _ours(self, turn: TurnCore) -> LiveTurn | None:
        live = self.screen.on_screen
        return live if live is not None and live.core is turn else None

    async def step_began(self, event: StepBegan) -> None:
        screen, drawn = self.screen, self.drawn
        live = self._ours(event.turn)
        if live is None or drawn.answer is None:
            return
        if not self.answers:
            self.answers = [drawn.answer]
        if event.recorder is live.recorder:  # the first step: drawn already
            return
        screen.frame(force=True, pane=False)  # the last step's text all painted before its answer is left
        answer = await screen.transcript.add_assistant(screen.clock, drawn.lag)
        # its code blocks are numbered after the last step's, as the joined answer numbers them
        answer.first_block = drawn.answer.first_block + len(code_blocks(live.recorder.answer))
        self.answers.append(answer)
        drawn.answer = answer
        live.recorder = event.recorder

    async def tool_ended(self, event: ToolEnded) -> None:
        if self._ours(event.turn) is None:
            return
        step = tool_step(event.step, event.step.start_ns)
        text = event.result.text if event.result is not None else None
        await self.screen.transcript.mount(ToolRun(step, text))

    def approval_asked(self, event: ApprovalAsked) -> None:
        if self._ours(event.turn) is None:
            event.reply("deny")  # a turn no longer on screen (the chat moved on): it is being cancelled
            return

        def answered(reply: Reply | None) -> None:
            self.dialog = None
            if reply == "stop":
                self._cancel()
            elif reply is not None:  # None: the turn ended while it was asked
                event.reply(reply)
            self._focus_prompt()

        self.dialog = ApproveScreen(event.approval)
        self.screen.app.push_screen(self.dialog, answered)

    def close_dialog(self) -> None:
        """The turn ended (Esc, an error) while a call was asked about: its dialog goes."""
        dialog, self.dialog = self.dialog, None
        if dialog is not None and dialog.is_attached and dialog.is_current:
            dialog.dismiss(None)

    async def finalize(self, live: LiveTurn, record: TurnRecord) -> bool:
        """The turn's end: each step's answer drawn from its own record, the last holding the joined one
        (what a compacted or reopened turn draws). False: not a tool-using turn, nothing drawn."""
        self.close_dialog()
        answers, self.answers = self.answers, []
        if live.agent is None or not record.steps:
            return False
        models = live.agent.result.models
        if not answers and self.drawn.answer is not None:
            answers = [self.drawn.answer]
        for answer, rec in zip(answers, models, strict=False):
            await answer.finalize(rec)
        if answers:
            answers[-1].turn = record
        return True
