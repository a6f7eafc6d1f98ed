"""``tools=``, ``approve=`` and ``attachments=`` as the Python API takes them, read into a turn's plan.

``tools``: what ``ttft ask --mcp`` takes (a ``[mcp.NAME]`` from config.toml, a command line, an
``http(s)://`` URL), or an :class:`~backends.providers.config.McpServerConfig`, one or many; or one
:class:`~backends.agent.host.ToolHost` of the caller's own. ``approve``: who lets a call run. No tool runs
without it: None (the default) denies every call, and the turn stops at the first one
(``tool_not_allowed``), as ``ttft ask`` without ``--allow-tools``; ``"all"`` allows every tool, as
``--allow-tools``; tool names allow those, as ``--allow-tool NAME``; a function is asked about each call
nothing allowed yet (a :class:`ToolRequest`), and says True (this once), False (no: the model reads
that the call did not run, and the turn goes on), or ``"once"``, ``"always"`` (this tool, from now on),
``"deny"``. It may be async. ``attachments``: files sent with the prompt, a path or a list, as
``ttft ask -a`` reads them. Everything is checked here, before anything is sent or started.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal, cast

from ...telemetry.log.secrets import remember
from ...telemetry.values import checked
from ...telemetry.values.checked import BadValue
from ..agent.consent import Answer
from ..agent.host import ToolHost
from ..agent.loop import DEFAULT_MAX_STEPS, Ask
from ..attachments import Attachment
from ..base import ArgumentsRefused, ToolCall, ToolSpec
from ..mcp.config import McpServerConfig, resolve_specs
from ..mcp.config_secrets import server_secrets
from ..providers.registry import Target
from .plan import ToolPlan, Unresolved, read_attachments

ANSWERS: tuple[Answer, ...] = ("once", "always", "deny")


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """A call the model asks to make, as an ``approve`` function is shown it: the tool, its arguments,
    the server that holds it and what it says it does, and the call's place among its step's calls."""

    name: str
    arguments: dict[str, Any]
    server: str
    description: str
    index: int  # 0 for the step's first call
    count: int  # the step's calls


Verdict = bool | Answer
ApproveFn = Callable[[ToolRequest], Verdict | Awaitable[Verdict]]
Approve = Literal["all"] | Collection[str] | ApproveFn | None
Tools = str | McpServerConfig | Sequence[str | McpServerConfig] | ToolHost | None
Attachments = str | os.PathLike[str] | Sequence[str | os.PathLike[str]]


def _is_host(value: object) -> bool:
    return all(callable(getattr(value, name, None)) for name in ("tools", "call", "aclose"))


def read_tools(tools: Tools) -> tuple[tuple[McpServerConfig, ...], ToolHost | None]:
    """``tools=`` as the MCP servers to start, or the caller's host. A spec that names nothing raises
    ``McpSpecError`` (a TtftError), in ``--mcp``'s words; two servers of one name, BadValue."""
    if tools is None:
        return (), None
    if _is_host(tools):
        return (), cast(ToolHost, tools)
    given = [tools] if isinstance(tools, str | McpServerConfig) else tools
    if not isinstance(given, Sequence) or not all(isinstance(t, str | McpServerConfig) for t in given):
        raise TypeError(
            "tools are MCP servers (a spec as --mcp takes it, or an McpServerConfig; one or a list) or a ToolHost,"
            f" not {type(tools).__name__}"
        )
    servers = list(resolve_specs([t for t in given if isinstance(t, str)]))  # each one's secrets masked from now
    for config in (t for t in given if isinstance(t, McpServerConfig)):
        remember(*server_secrets(config))
        servers.append(config)
    names = [s.name for s in servers]
    if len(set(names)) != len(names):
        twice = sorted({n for n in names if names.count(n) > 1})
        raise BadValue(f"tools name the MCP server {', '.join(twice)} twice: give each server a name of its own")
    return tuple(servers), None


def tool_plan(tools: Tools, approve: Approve, max_steps: object = DEFAULT_MAX_STEPS) -> tuple[ToolPlan, Ask | None]:
    """The turn's ToolPlan, and the loop's ``ask`` where ``approve`` is a function."""
    try:
        steps = checked.positive_int(max_steps)
    except BadValue as exc:
        raise BadValue(f"max_steps {exc}") from None
    servers, host = read_tools(tools)
    if not servers and host is None:
        if approve is not None:
            raise BadValue("approve needs tools (the tools to allow)")
        return ToolPlan(max_steps=steps), None
    plan = ToolPlan(servers=servers, host=host, max_steps=steps)
    if approve is None:
        return plan, None
    if approve == "all":
        return replace(plan, allow_all=True), None
    if callable(approve):
        return plan, asker(approve)
    if isinstance(approve, str) or not all(isinstance(n, str) for n in approve):
        raise BadValue(f"approve takes 'all', tool names, or a function, not {approve!r}")
    return replace(plan, allowed=frozenset(approve)), None


def asker(approve: ApproveFn) -> Ask:
    """The agent loop's ``ask``: ``approve`` shown each call as a ToolRequest; an answer it does not know
    is a denial (a model never runs a tool on a guess)."""

    async def ask(call: ToolCall, spec: ToolSpec | None, index: int, count: int) -> Answer:
        try:
            arguments = call.arguments_object()
        except ArgumentsRefused:  # never asked about (the loop refuses it itself); nothing to show
            arguments = {}
        request = ToolRequest(
            call.name,
            arguments,
            spec.server if spec is not None else "",
            spec.description if spec is not None else "",
            index,
            count,
        )
        said: object = approve(request)
        if inspect.isawaitable(said):
            said = await said
        if said is True:
            return "once"
        return said if isinstance(said, str) and said in ANSWERS else "deny"

    return ask


def read_files(given: Attachments, target: Target | Unresolved) -> tuple[Attachment, ...]:
    """``attachments=`` read, then checked against the target; BadValue says why one cannot go."""
    paths = [given] if isinstance(given, str | os.PathLike) else list(given)
    if not all(isinstance(p, str | os.PathLike) for p in paths):
        raise TypeError("attachments are file paths (one, or a list)")
    files = read_attachments(paths, target)
    if not isinstance(files, tuple):
        raise BadValue(f"attachments: {files.sentence}")
    return files
