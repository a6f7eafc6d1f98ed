"""AskPlan: one turn as every front end describes it, typed and frozen, before anything is sent.

``ttft ask`` reads its flags into one, the Python API its arguments: the target (resolved, or the spec
that did not resolve, which is then the turn's recorded error), the request (prompt, system, history,
settings, and the attachments already read and checked here against the target), the tools and who
may run them, where the local engine runs, which connection the turn takes, and its session log.
:func:`backends.ask.run.run_ask` runs it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from ...telemetry.values.checked import BadValue
from ..agent.consent import Consent
from ..agent.host import DEFAULT_MAX_RESULT_BYTES, ToolHost
from ..agent.loop import DEFAULT_MAX_STEPS, NO_TOOLS, TOOL_APIS
from ..attachments import Attachment, Refused, check_attachments, read_attachment
from ..base import ChatRequest
from ..mcp.config import DEFAULT_CALL_TIMEOUT_S, DEFAULT_START_TIMEOUT_S, McpServerConfig
from ..providers.registry import ProviderError, Target

# Where the local engine runs: a process of its own (``ttft ask``: a native crash ends the turn with a
# record, not ttft), or this one (the API). A hosted backend always stays here: a process would cost more
# than its answer.
Isolation = Literal["process", "none"]
# Which backend a hosted turn takes: one of its own, closed when it ends (``ttft ask``), or the event
# loop's shared one, its connections kept alive for the next turn (the API: backends.load.shared).
Connection = Literal["own", "shared"]
# A target that cannot be reached as given (no key, a backend that does not start): a recorded failed turn
# (``ttft ask``: every attempt is in the log), or raised before anything is logged (the API).
StartFailure = Literal["record", "raise"]


@dataclass(frozen=True, slots=True)
class Unresolved:
    """A spec that did not resolve (it does not parse, an unknown provider, a config that does not read):
    the turn runs as a recorded failure with this error."""

    spec: str
    base_url: str | None
    error: ProviderError


@dataclass(frozen=True, slots=True)
class ToolPlan:
    """The tools a turn offers and who may run them. ``servers``: MCP servers started for the turn and
    ended with it, or, with ``kept_by`` (a Client's token), started by that owner's first turn on the event
    loop and kept on the loop's share for its later turns there (``backends.load.shared``); ``host``: tools
    already held by the caller (never closed by the turn). Consent: every tool (``allow_all``), the
    ``allowed`` names, and for the rest the listener's ``ask`` where there is one; without it a call nothing
    allowed stops the turn (``tool_not_allowed``)."""

    servers: tuple[McpServerConfig, ...] = ()
    host: ToolHost | None = None
    allow_all: bool = False
    allowed: frozenset[str] = frozenset()
    max_steps: int = DEFAULT_MAX_STEPS
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    kept_by: object | None = None

    def __post_init__(self) -> None:
        if self.servers and self.host is not None:
            raise BadValue("tools are MCP servers to start or one host already running, not both")

    @property
    def offered(self) -> bool:
        return bool(self.servers) or self.host is not None

    def consent(self, *, ask: bool) -> Consent:
        """A fresh consent (an allow-once answer is spent as the turn goes); ``ask``: someone can be asked."""
        return Consent(allow_all=self.allow_all, allowed=set(self.allowed), ask=ask)


NO_TOOLS_PLAN = ToolPlan()


@dataclass(frozen=True, slots=True)
class AskPlan:
    """One turn, as a front end asked for it (see the module doc). ``key``: an API key in place of the
    environment's (never shown: not in the repr). ``session``: the log's session (None: a new one);
    ``log=False`` writes none. ``submitted_ns``: when the person asked, where ttft's own delay starts
    (None: when the turn starts to run)."""

    target: Target | Unresolved
    request: ChatRequest
    tools: ToolPlan = NO_TOOLS_PLAN
    isolation: Isolation = "none"
    connection: Connection = "own"
    sdk: bool = False
    timeout_s: float | None = None
    key: str | None = field(default=None, repr=False)
    log: bool = True
    session: str | None = None
    submitted_ns: int | None = None
    start_failure: StartFailure = "record"

    def __post_init__(self) -> None:
        check_tools(self.target, self.tools)


def check_tools(target: Target | Unresolved, tools: ToolPlan) -> None:
    """BadValue where tools are offered to a model that takes none (the local engine)."""
    if tools.offered and isinstance(target, Target) and target.api not in TOOL_APIS:
        raise BadValue(NO_TOOLS)


def engine_isolation() -> Isolation:
    """``ttft ask``'s: the local engine in its own process, unless ``TTFT_IN_PROCESS=1`` keeps it here."""
    return "none" if os.environ.get("TTFT_IN_PROCESS") == "1" else "process"


def read_attachments(
    paths: Sequence[str | os.PathLike[str]], target: Target | Unresolved
) -> tuple[Attachment, ...] | Refused:
    """Files for the prompt, each read, then checked against the API and model ``target`` names, before
    anything is sent. A spec that did not resolve is not this check's to report: the turn says it."""
    files: list[Attachment] = []
    for path in paths:
        got = read_attachment(path)
        if isinstance(got, Refused):
            return got
        files.append(got)
    if files and isinstance(target, Target):
        model = target.model or ("local" if target.local else "")
        refused = check_attachments(files, api=target.api, model=model)
        if refused is not None:
            return refused
    return tuple(files)
