"""The library's front door: ttft from Python, through the same core as the CLI.

``resolve`` turns a spec into the registry's typed Target; ``run_turn`` (and its async twin
``arun_turn``) runs one turn, tools and attachments included, through the core ``ttft ask`` runs
(:func:`backends.ask.run.run_ask` on an :class:`~backends.ask.plan.AskPlan`, written to the session log
unless ``log=False``) and returns its ``TurnRecord``; ``Client`` and its ``Conversation`` run theirs
there too; ``run_probe`` runs :func:`backends.probe.orchestrate.run_probe`, as ``ttft
probe`` does; ``run_bench`` runs :func:`backends.load.bench.run_bench` on a ``BenchPlan``, as ``ttft
bench`` does; ``run_compare`` runs :func:`backends.compare.run.run_compare` on a ``ComparePlan``
(``compare_plan`` builds one), as ``ttft compare --headless`` does; ``turns_frame`` gives records as
a pandas DataFrame typed as the exports are; ``read_log`` reads a session log back as typed records,
and ``log_frame`` as a pandas or polars DataFrame or a DuckDB relation (:mod:`telemetry.export.log_data`).
Nothing here is a second implementation: each function is the CLI's own, minus the printing.
Every failure ttft knows is a :class:`TtftError` (a bad spec: its ``ProviderError``).
"""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Callable, Coroutine, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, Unpack

from ..telemetry import events as ev
from ..telemetry.errors import TtftError
from ..telemetry.export import formats
from ..telemetry.export.log_data import (
    LogReadError,
    LogRecords,
    MissingEngine,
    SkippedLinesWarning,
    log_frame,
    read_log,
)
from ..telemetry.log.turns import check_session_id, new_session_id
from ..telemetry.record import TurnRecord
from ..telemetry.settings import TurnSettings
from ..telemetry.steps import AgentSummary, ApprovalStepRecord, ModelStepRecord, ToolStepRecord
from ..telemetry.values import checked
from ..telemetry.values.checked import BadValue, SettingsKw
from .agent.consent import Consent
from .agent.host import ToolHost, ToolResult
from .agent.loop import DEFAULT_MAX_STEPS, AgentListener, Ask
from .ask.offer import Approve, Attachments, ToolRequest, Tools, read_files, tool_plan
from .ask.plan import AskPlan, ToolPlan, check_tools
from .ask.run import AskTurn
from .base import Message, ToolSpec, build_request
from .compare.panes import MAX_PANES, PaneSpec, parse_model
from .compare.run import ComparePlan, CompareResult
from .compare.run import run_compare as _run_compare
from .load import shared as _share
from .load.bench import BenchAbort, BenchResult
from .load.bench import run_bench as _run_bench
from .load.plan import BenchPlan, Level, Rate, Speedup, Users
from .mcp.config import McpServerConfig
from .probe.orchestrate import ProbePlan, ProbeResult
from .probe.orchestrate import run_probe as _run_probe
from .providers.registry import ProviderError, Target, checked_key
from .providers.registry import resolve as _resolve

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "AgentSummary",
    "ApprovalStepRecord",
    "BadValue",
    "BenchAbort",
    "BenchPlan",
    "BenchResult",
    "Client",
    "ComparePlan",
    "CompareResult",
    "Conversation",
    "Level",
    "LogReadError",
    "LogRecords",
    "McpServerConfig",
    "Message",
    "MissingEngine",
    "ModelStepRecord",
    "ProbePlan",
    "ProbeResult",
    "ProviderError",
    "Rate",
    "SkippedLinesWarning",
    "Speedup",
    "Target",
    "ToolHost",
    "ToolRequest",
    "ToolResult",
    "ToolSpec",
    "ToolStepRecord",
    "TtftError",
    "TurnRecord",
    "TurnSettings",
    "Users",
    "aclose",
    "arun_bench",
    "arun_compare",
    "arun_probe",
    "arun_turn",
    "bench_plan",
    "compare_plan",
    "log_frame",
    "read_log",
    "resolve",
    "run_bench",
    "run_compare",
    "run_probe",
    "run_turn",
    "turn_settings",
    "turns_frame",
]

T = TypeVar("T")
TARGET_SETTINGS = frozenset({"timeout", "headers"})  # a Target's own connection settings


def resolve(spec: str, base_url: str | None = None, **settings: Any) -> Target:
    """``-m spec`` (and ``--base-url``) as the registry resolves it: a frozen Target (no key in it).

    ``settings``: the Target's connection settings to override (``timeout`` in seconds, ``headers``).
    ProviderError (a TtftError) for a spec that does not parse, an unknown provider or a bad URL."""
    unknown = set(settings) - TARGET_SETTINGS
    if unknown:
        raise TypeError(f"resolve() got unknown settings {sorted(unknown)}; it takes {sorted(TARGET_SETTINGS)}")
    if not isinstance(spec, str):
        raise TypeError(f"the spec is text such as 'openai:gpt-4o-mini' or 'local', not {type(spec).__name__}")
    pane = parse_model(spec, base_url)  # PROVIDER:MODEL@URL, as compare's panes take it: the URL is the address
    if "timeout" in settings and settings["timeout"] is not None:
        settings["timeout"] = _checked("timeout", checked.seconds, settings["timeout"])
    target = _resolve(pane.spec, base_url=pane.base_url)
    return replace(target, **settings) if settings else target


def turn_settings(**settings: Unpack[SettingsKw]) -> TurnSettings:
    """The keyword arguments as TurnSettings (``temperature=0.2, max_output_tokens=64, ...``), each checked
    as its flag is (``BadValue``, a TtftError and a ValueError, in the CLI's words); TypeError naming any
    that is not one of its fields."""
    return checked.settings(**settings)


def _checked(name: str, check: Callable[[object], T], value: object) -> T:
    """``value`` through one of telemetry.checked's checks, its refusal naming the argument."""
    try:
        return check(value)
    except BadValue as exc:
        raise BadValue(f"{name} {exc}") from None


def _turn_arguments(target: object, prompt: object, timeout_s: object, session: object) -> None:
    """What arun_turn is given, checked before anything is sent (the CLI's checks, the API's names)."""
    if not isinstance(target, Target | str):
        raise TypeError(f"target is a Target (ttft.resolve) or a spec such as 'openai:gpt-4o-mini', not {target!r}")
    if not isinstance(prompt, str):
        raise TypeError(f"prompt is text, not {type(prompt).__name__}")
    if timeout_s is not None:
        _checked("timeout_s", checked.seconds, timeout_s)
    if session is not None:
        if not isinstance(session, str):
            raise TypeError(f"session is a session id (text), not {type(session).__name__}")
        try:
            check_session_id(session)
        except ValueError as exc:
            raise BadValue(str(exc)) from None


def _plan(
    target: Target | str,
    prompt: str,
    tools: ToolPlan,
    *,
    system: str | None,
    history: Sequence[Message],
    attachments: Attachments,
    log: bool,
    session: str | None,
    sdk: bool,
    timeout_s: float | None,
    key: str | None,
    settings: SettingsKw,
    submitted: int,
) -> AskPlan:
    """The turn's AskPlan from the API's arguments, each checked before anything is sent (the CLI's
    checks, the API's names). The local engine runs in this process; a hosted turn on the loop's pool."""
    _turn_arguments(target, prompt, timeout_s, session)
    if key is not None and not isinstance(key, str):
        raise TypeError(f"key is text, not {type(key).__name__}")
    resolved = target if isinstance(target, Target) else resolve(target)
    files = read_files(attachments, resolved)
    request = build_request(
        prompt, system=system, history=history, settings=turn_settings(**settings), attachments=files
    )
    return AskPlan(
        target=resolved,
        request=request,
        tools=tools,
        connection="shared",
        sdk=sdk,
        timeout_s=timeout_s,
        key=key,
        log=log,
        session=session,
        submitted_ns=submitted,
        start_failure="raise",
    )


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
    plan = _plan(
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

    ``tools``, ``approve`` and ``max_steps``: every turn's tools, as :func:`arun_turn` takes them (MCP
    servers are started for each turn and ended with it). An ``"always"`` from the ``approve`` function
    holds for the client's later turns.

    Connections: turns on one event loop share one pool per target and key (the bench's path, see
    :func:`arun_turn`), so a client's second turn finds its first turn's connection kept alive
    (``record.http.connection == "reused"``). ``close()`` / ``await aclose()`` (or ``with`` / ``async
    with``) drop the loop's pooled connections."""

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
        _turn_arguments(spec, "", timeout_s, session)
        if key is not None and not isinstance(key, str):
            raise TypeError(f"key is text, not {type(key).__name__}")
        if system is not None and not isinstance(system, str):
            raise TypeError(f"system is text, not {type(system).__name__}")
        self.target = spec if isinstance(spec, Target) else resolve(spec, base_url)
        if key is not None:
            checked_key(key, "the key given")  # a line break or stray space, said now (and masked from here on)
        turn_settings(**settings)  # checked now, not at the first turn
        self.tools, self._ask = tool_plan(tools, approve, max_steps)
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
        return _plan(
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
        """Drop the running loop's pooled connections (the next turn opens new ones)."""
        await _share.aclose()

    def close(self) -> None:
        """Drop the synchronous turns' pooled connections."""
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


async def aclose() -> None:
    """Close the clients the turns on the running event loop share (the next turn opens new ones).

    Optional: ``asyncio.run`` closes them as its loop ends, and the synchronous turns' at exit. Await it
    in a notebook to drop the pooled connections, or after changing a provider's settings mid-loop."""
    await _share.aclose()


async def arun_probe(
    plan: ProbePlan,
    *,
    on_plan: Callable[[str, Any], None] | None = None,
    on_turn: Callable[[int, Any, TurnRecord], None] | None = None,
) -> ProbeResult:
    """``ttft probe`` without the printing: the plan's schedule run and fitted. The fit is saved only
    when asked (``result.save_fit()``); ``result.save(dir)`` writes what ``--out DIR`` does."""
    return await _run_probe(plan, on_plan=on_plan, on_turn=on_turn)


def run_probe(plan: ProbePlan, **kwargs: Any) -> ProbeResult:
    """:func:`arun_probe`, synchronously."""
    return _sync(lambda: arun_probe(plan, **kwargs))


def turns_frame(records: Iterable[TurnRecord | dict[str, Any]]) -> pd.DataFrame:
    """The turns as a pandas DataFrame: the export's columns (telemetry.export.table), in its order and
    with its types as nullable pandas dtypes, base URLs without credentials. Needs pandas installed."""
    frame: pd.DataFrame = formats.turns_frame(records)
    return frame


def bench_plan(
    target: Target | str, *, levels: Iterable[Level], out: str | Path | None = None, **settings: Any
) -> BenchPlan:
    """What ``ttft bench``'s flags say, as a typed, immutable plan: ``levels`` all of one kind (``Users(n)``,
    ``Rate(r)``, ``Speedup(x)``); ``settings``: the load's (``requests``, ``warmup``, ``seed``,
    ``max_output_tokens``, ``input_tokens``, ...) and the plan's (``server_metrics``, ...). A Target gives
    its spec and base URL. Results go to ``out`` (default ``ttft-RUN_ID``)."""
    if isinstance(target, Target):
        settings.setdefault("base_url", target.base_url)
        target = target.spec
    return BenchPlan.of(target, levels=tuple(levels), out=None if out is None else Path(out), **settings)


async def arun_bench(plan: BenchPlan, **callbacks: Any) -> BenchResult:
    """``ttft bench`` without the printing (its charts too: they are drawn by the CLI). ``callbacks``:
    ``on_level`` (each level's figures as it ends), ``on_progress``, ``on_note``, ``on_warn``. BenchAbort
    (a TtftError) when a step cannot go on; the levels already run are in its folder."""
    return await _run_bench(plan, **callbacks)


def run_bench(plan: BenchPlan, **callbacks: Any) -> BenchResult:
    """:func:`arun_bench`, synchronously."""
    return _sync(lambda: arun_bench(plan, **callbacks))


def compare_plan(
    targets: Iterable[Target | str],
    prompt: str,
    *,
    repeat: int = 1,
    sequential: bool = False,
    system: str | None = None,
    out: str | Path | None = None,
    timeout_s: float | None = None,
    **settings: Any,
) -> ComparePlan:
    """What ``ttft compare --headless``'s flags say, as a typed, immutable plan: one pane per target (1 to 4;
    a Target gives its spec and base URL), ``prompt`` sent to each ``repeat`` times, at the same instant
    or (``sequential``) one pane after another. ``settings``: TurnSettings' fields, every pane's."""
    panes = [(t.spec, t.base_url) if isinstance(t, Target) else parse_model(t, None) for t in targets]
    if not 1 <= len(panes) <= MAX_PANES:
        raise ValueError(f"compare takes 1 to {MAX_PANES} targets (got {len(panes)})")
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    return ComparePlan(
        panes=tuple(p if isinstance(p, PaneSpec) else PaneSpec(*p) for p in panes),
        prompt=prompt,
        repeat=repeat,
        mode="sequential" if sequential else "parallel",
        system=system,
        settings=turn_settings(**settings),
        timeout_s=timeout_s,
        out=None if out is None else Path(out),
    )


async def arun_compare(plan: ComparePlan, **callbacks: Any) -> CompareResult:
    """``ttft compare --headless`` without the printing: every pane's turns, logged to a session, and the
    comparison's figures and verdicts. ``callbacks``: ``on_turn`` (pane, trial, record, as each turn ends),
    ``on_tool_notice``, ``on_warn``, ``on_note``. ``result.save(dir)`` writes what ``--out DIR`` does
    (``plan.out`` is the CLI's; the API leaves saving to you)."""
    return await _run_compare(plan, **callbacks)


def run_compare(plan: ComparePlan, **callbacks: Any) -> CompareResult:
    """:func:`arun_compare`, synchronously."""
    return _sync(lambda: arun_compare(plan, **callbacks))


def _sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to its end from synchronous code: in this thread, or in a thread of its own when
    this one already runs an event loop (asyncio.run refuses to nest)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with ThreadPoolExecutor(1, thread_name_prefix="ttft-api") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()
