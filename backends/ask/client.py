"""The Python API's turns: :func:`arun_turn` (and ``run_turn``), a :class:`Client` that holds a target for
many turns, and its :class:`Conversation`, each through the core ``ttft ask`` runs
(:class:`~backends.ask.run.AskTurn` on an AskPlan made by :func:`backends.ask.arguments.api_plan`).

Hosted turns on one event loop share its connection pool (``backends.load.shared``); a Client's MCP
servers are kept there too, started by its first turn on the loop. What the API hears of a turn is the
caller's events and questions; a notice and a log write that failed are RuntimeWarnings.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, Unpack

from ...telemetry import events as ev
from ...telemetry.log.turns import new_session_id
from ...telemetry.record import TurnRecord
from ...telemetry.values.checked import SettingsKw
from ..agent.consent import Consent
from ..agent.loop import DEFAULT_MAX_STEPS, AgentListener, Ask
from ..base import Message
from ..load import shared as _share
from ..providers.registry import Target, checked_key
from .arguments import api_plan, resolve, turn_arguments, turn_settings
from .offer import Approve, Attachments, Tools, tool_plan
from .plan import AskPlan, check_tools
from .run import AskTurn


def _listener(on_event: Callable[[ev.Event], None] | None, ask: Ask | None) -> AgentListener:
    """What the API hears of a turn: the caller's events and questions; a notice (an MCP server that did
    not start, a tool result cut) as a RuntimeWarning, as a log write that failed is."""

    def notice(text: str) -> None:
        warnings.warn(f"ttft: {text}", RuntimeWarning, stacklevel=2)

    return AgentListener(on_event=on_event, ask=ask, on_notice=notice)


async def _ask(plan: AskPlan, listener: AgentListener, consent: Consent | None = None) -> TurnRecord:
    """:func:`backends.ask.run.run_ask`, a log write that failed said as a warning."""
    result = await AskTurn(plan, listener, consent=consent).run()
    for err in result.log_errors:
        warnings.warn(f"{err}; the turn was not saved (its record is returned)", RuntimeWarning, stacklevel=3)
    return result.record


async def arun_turn(
    target: Target | str,
    prompt: str,
    *,
    system: str | None = None,
    history: Sequence[Message] = (),
    attachments: Attachments = (),
    tools: Tools = None,
    approve: Approve = None,
    max_steps: int = DEFAULT_MAX_STEPS,
    log: bool = True,
    session: str | None = None,
    sdk: bool = False,
    timeout_s: float | None = None,
    key: str | None = None,
    on_event: Callable[[ev.Event], None] | None = None,
    **settings: Unpack[SettingsKw],
) -> TurnRecord:
    """One turn, as ``ttft ask`` runs it (:func:`backends.ask.run.run_ask`); the record as logged.

    ``target``: a Target, or a spec resolved here. ``system``: the system prompt. ``history``: the
    conversation before this prompt (:class:`Conversation` keeps it for you). ``attachments``: files
    sent with the prompt (a path or a list), read and checked as ``ttft ask -a`` reads them. ``tools``:
    MCP servers as ``--mcp`` takes them (a spec or an McpServerConfig, one or a list), started for the
    turn and ended with it, or a ToolHost of your own. ``approve``: who lets a tool call run (None:
    nobody, and the turn stops at the first call; ``"all"``; tool names; or a function asked about each
    call: :mod:`backends.ask.offer`). ``max_steps``: the model steps at most, as ``--max-steps``.
    ``log``: append the turn to the session log (``session``: that session's id; default a new one).
    ``sdk``: read with the API's SDK rather than ttft's own reader. ``timeout_s``: the read timeout.
    ``key``: the API key, in place of the environment's (masked wherever ttft writes). ``on_event``:
    each event as it arrives (the answer's text is in ``TextDelta`` events). ``settings``: TurnSettings'
    fields, checked as their flags.

    A turn that fails at the server is a record with ``status == "error"``, never an exception; a
    target that cannot be reached as given (bad spec, no key) raises ProviderError, a bad value
    BadValue. The local engine runs in this process (``ttft ask`` gives it a process of its own).

    Turns run together on one event loop (``asyncio.gather``) take the bench's path: one client (one
    connection pool) per target, set up once per loop and read by the lean reader, closed when the loop
    ends through ``asyncio.run`` or by :func:`aclose`. Each record carries the loop's lag while it waited
    (``metrics.loop_lag_ms``); when that lag is a large part of the wait, the split puts it in
    ``wait_ms.client_lag`` (ttft's own) and the diagnosis says so, rather than blaming the server.
    """
    submitted = ev.now_ns()  # ttft's own delay runs from this call to the send, as from ask's start
    offered, ask = tool_plan(tools, approve, max_steps)
    plan = api_plan(
        target,
        prompt,
        offered,
        system=system,
        history=history,
        attachments=attachments,
        log=log,
        session=session,
        sdk=sdk,
        timeout_s=timeout_s,
        key=key,
        settings=settings,
        submitted=submitted,
    )
    return await _ask(plan, _listener(on_event, ask))


def run_turn(target: Target | str, prompt: str, **kwargs: Any) -> TurnRecord:
    """:func:`arun_turn`, synchronously (also from inside a running event loop, a notebook's, and from
    many threads at once). Every synchronous turn runs on one event loop of ttft's own, in a daemon
    thread, so they share its clients as ``arun_turn`` calls on one loop do; ``on_event`` and an
    ``approve`` function are called on that thread."""
    return _share.run_sync(lambda: arun_turn(target, prompt, **kwargs))


class Client:
    """One target held for many turns: its spec resolved, its key, settings and tools checked once, here,
    before anything is sent (as the CLI checks its flags), and its connections kept between turns.

    ``Client("openai:gpt-4o-mini", key=..., temperature=0.2)`` then ``client.prompt("hi")`` (or ``await
    client.aprompt("hi")``) runs one turn on it; ``client.conversation()`` keeps a history, so each prompt
    sends the turns before it. A turn's own settings override the client's. The turns go to one session
    log (``session``, or a new one made now); ``log=False`` writes none. A turn that fails at the server
    is a record with ``status == "error"``; a bad argument raises here (:class:`BadValue`, TypeError,
    ProviderError).

    ``tools``, ``approve`` and ``max_steps``: every turn's tools, as :func:`arun_turn` takes them. MCP
    servers are started by the client's first turn on an event loop (that turn's ``metrics.mcp_start_ms``
    says how long) and kept for its later turns there, until ``close()`` / ``aclose()`` or the loop's end
    (``asyncio.run``). An ``"always"`` from the ``approve`` function holds for the client's later turns.

    Connections: turns on one event loop share one pool per target and key (the bench's path, see
    :func:`arun_turn`), so a client's second turn finds its first turn's connection kept alive
    (``record.http.connection == "reused"``). ``close()`` / ``await aclose()`` (or ``with`` / ``async
    with``) drop the loop's pooled connections and end the MCP servers kept on it."""

    def __init__(
        self,
        spec: str | Target,
        *,
        key: str | None = None,
        base_url: str | None = None,
        system: str | None = None,
        tools: Tools = None,
        approve: Approve = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        timeout_s: float | None = None,
        sdk: bool = False,
        log: bool = True,
        session: str | None = None,
        **settings: Unpack[SettingsKw],
    ) -> None:
        turn_arguments(spec, "", timeout_s, session)
        if key is not None and not isinstance(key, str):
            raise TypeError(f"key is text, not {type(key).__name__}")
        if system is not None and not isinstance(system, str):
            raise TypeError(f"system is text, not {type(system).__name__}")
        self.target = spec if isinstance(spec, Target) else resolve(spec, base_url)
        if key is not None:
            checked_key(key, "the key given")  # a line break or stray space, said now (and masked from here on)
        turn_settings(**settings)  # checked now, not at the first turn
        offered, self._ask = tool_plan(tools, approve, max_steps)
        # its MCP servers kept on each event loop's share for its later turns there (backends.load.shared)
        self.tools = replace(offered, kept_by=object()) if offered.servers else offered
        check_tools(self.target, self.tools)  # a model that takes none, said now
        self.consent = self.tools.consent(ask=self._ask is not None)  # the client's: its answers hold
        self.system, self.timeout_s, self.sdk, self.log = system, timeout_s, sdk, log
        self.settings: SettingsKw = settings
        self.session = session if session is not None or not log else new_session_id()
        self._key = key

    def __repr__(self) -> str:  # never the key
        return f"Client({self.target.spec!r}, base_url={self.target.base_url!r})"

    async def aprompt(
        self,
        prompt: str,
        *,
        system: str | None = None,
        history: Sequence[Message] = (),
        attachments: Attachments = (),
        on_event: Callable[[ev.Event], None] | None = None,
        **settings: Unpack[SettingsKw],
    ) -> TurnRecord:
        """One turn on this client: the record as logged (see :func:`arun_turn`). ``system``: this turn's
        system prompt (default: the client's); ``settings``: this turn's, over the client's."""
        plan = self._plan(prompt, system, history, attachments, {**self.settings, **settings})
        return await _ask(plan, _listener(on_event, self._ask), self.consent)

    def _plan(
        self,
        prompt: str,
        system: str | None,
        history: Sequence[Message],
        attachments: Attachments,
        settings: SettingsKw,
    ) -> AskPlan:
        return api_plan(
            self.target,
            prompt,
            self.tools,
            system=system if system is not None else self.system,
            history=history,
            attachments=attachments,
            log=self.log,
            session=self.session,
            sdk=self.sdk,
            timeout_s=self.timeout_s,
            key=self._key,
            settings=settings,
            submitted=ev.now_ns(),
        )

    def prompt(
        self,
        prompt: str,
        *,
        system: str | None = None,
        history: Sequence[Message] = (),
        attachments: Attachments = (),
        on_event: Callable[[ev.Event], None] | None = None,
        **settings: Unpack[SettingsKw],
    ) -> TurnRecord:
        """:meth:`aprompt`, synchronously (on the synchronous API's own loop, as :func:`run_turn`)."""
        return _share.run_sync(
            lambda: self.aprompt(
                prompt, system=system, history=history, attachments=attachments, on_event=on_event, **settings
            )
        )

    def conversation(self, *, system: str | None = None) -> Conversation:
        """A conversation on this client: each prompt sends the turns before it."""
        return Conversation(self, system=system)

    async def aclose(self) -> None:
        """Drop the running loop's pooled connections and end the MCP servers kept on it (the next turn
        opens and starts new ones)."""
        await _share.aclose()

    def close(self) -> None:
        """Drop the synchronous turns' pooled connections and end their kept MCP servers."""
        _share.run_sync(_share.aclose)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class Conversation:
    """A conversation on a :class:`Client`: each prompt sends the system prompt, the turns so far and the
    new prompt (with its attachments, which later turns send again, as the chat does). A tool-using turn
    adds its prompt and its answer; its calls and their results stay in its record. A turn that gave no
    answer (it failed, or was cut before any text) is not added, so the next prompt goes out as if it had
    not been asked. ``messages`` is the history so far; ``records`` every turn's record, in order."""

    def __init__(self, client: Client, *, system: str | None = None) -> None:
        if system is not None and not isinstance(system, str):
            raise TypeError(f"system is text, not {type(system).__name__}")
        self.client = client
        self.system = system
        self.messages: list[Message] = []
        self.records: list[TurnRecord] = []

    async def aprompt(
        self,
        prompt: str,
        *,
        attachments: Attachments = (),
        on_event: Callable[[ev.Event], None] | None = None,
        **settings: Unpack[SettingsKw],
    ) -> TurnRecord:
        """The next turn of the conversation (see :meth:`Client.aprompt`)."""
        client = self.client
        plan = client._plan(prompt, self.system, tuple(self.messages), attachments, {**client.settings, **settings})
        record = await _ask(plan, _listener(on_event, client._ask), client.consent)
        self.records.append(record)
        if record.answer:
            self.messages += [plan.request.messages[-1], Message("assistant", record.answer)]
        return record

    def prompt(
        self,
        prompt: str,
        *,
        attachments: Attachments = (),
        on_event: Callable[[ev.Event], None] | None = None,
        **settings: Unpack[SettingsKw],
    ) -> TurnRecord:
        """:meth:`aprompt`, synchronously."""
        return _share.run_sync(lambda: self.aprompt(prompt, attachments=attachments, on_event=on_event, **settings))
