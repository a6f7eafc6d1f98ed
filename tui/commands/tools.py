"""The tool flags of ``ttft ask`` and ``ttft compare``: ``--mcp``, the consent flags, ``--max-steps``, and
the turn's :class:`~backends.ask.plan.ToolPlan` they make.

The config's ``[mcp.NAME]`` tables are read only when ``--mcp`` is given. No tool runs without consent:
``--allow-tools`` allows every tool, ``--allow-tool NAME`` one; a call nothing allowed stops the turn
(``tool_not_allowed``, exit 5; see docs/agents-loop.md).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from ...backends.agent.consent import Consent
from ...backends.agent.loop import DEFAULT_MAX_STEPS, NO_TOOLS
from ...backends.ask.plan import ToolPlan
from .flags import McpFlags, add_mcp_flags, positive_int


def add_tool_flags(p: argparse.ArgumentParser) -> None:
    add_mcp_flags(p)  # --mcp SPEC and its timeouts, as on chat and compare
    g = p.add_argument_group("tool consent and steps")
    g.add_argument("--allow-tools", action="store_true", help="let the model run every tool it is offered")
    g.add_argument(
        "--allow-tool", action="append", default=[], metavar="NAME", help="let the model run this tool (repeatable)"
    )
    g.add_argument(
        "--max-steps",
        type=positive_int,
        default=DEFAULT_MAX_STEPS,
        metavar="N",
        help=f"at most N model steps in the turn (default {DEFAULT_MAX_STEPS}); reaching it is said in the record",
    )


@dataclass(frozen=True, slots=True)
class ToolFlags:
    """The tool flags as given: the servers, the consent asked for, the step limit."""

    mcp: McpFlags
    allow_all: bool = False  # --allow-tools
    allowed: tuple[str, ...] = ()  # each --allow-tool NAME
    max_steps: int = DEFAULT_MAX_STEPS

    @property
    def consent_asked(self) -> bool:
        return self.allow_all or bool(self.allowed)


def wants_tools(specs: Sequence[str]) -> bool:
    return bool(specs)


def tools_problem(tools: ToolFlags, local: bool) -> str | None:
    """Why these tool flags cannot make a turn (exit 2), or None."""
    if not wants_tools(tools.mcp.specs):
        if tools.consent_asked:
            return "--allow-tools and --allow-tool need --mcp SPEC (the tools to allow)"
        return None
    if local:
        return NO_TOOLS
    from ...backends.mcp.config import McpSpecError, resolve_specs

    try:
        resolve_specs(list(tools.mcp.specs))  # a spec that names nothing is the command line's problem
    except McpSpecError as exc:
        return str(exc)
    return None


def consent_of(allow_all: bool, allowed: Sequence[str]) -> Consent:
    """A fresh consent (it is spent as the turn goes: an allow-once answer is used up)."""
    return Consent.from_flags(allow_all, allowed)


def tool_plan(tools: ToolFlags) -> ToolPlan:
    """The tool flags as the turn's plan: the ``--mcp`` servers resolved (a spec that names nothing was
    refused by :func:`tools_problem`), the consent asked for, the step limit and the timeouts."""
    if not wants_tools(tools.mcp.specs):
        return ToolPlan(max_steps=tools.max_steps)
    from ...backends.mcp.config import resolve_specs  # the config's [mcp.NAME] tables, read only with --mcp

    return ToolPlan(
        servers=tuple(resolve_specs(list(tools.mcp.specs))),
        allow_all=tools.allow_all,
        allowed=frozenset(tools.allowed),
        max_steps=tools.max_steps,
        start_timeout_s=tools.mcp.start_timeout_s,
        call_timeout_s=tools.mcp.call_timeout_s,
    )
