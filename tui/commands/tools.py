"""``ttft ask``'s tools: ``--mcp``, the consent flags, ``--max-steps``, and the MCP host they start.

The MCP client (``backends.mcp``) is imported by name when ``--mcp`` is given, so a ttft without it
still runs every other turn and says so for ``--mcp`` (exit 2). No tool runs without consent:
``--allow-tools`` allows every tool, ``--allow-tool NAME`` one; a call nothing allowed stops the turn
(``tool_not_allowed``, exit 5; see docs/agents-loop.md).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
from typing import Any

from backends.agent.consent import Consent
from backends.agent.host import ToolHost
from backends.agent.loop import DEFAULT_MAX_RESULT_BYTES, DEFAULT_MAX_STEPS, NO_TOOLS

MCP_MODULE = "backends.mcp"
NOT_INSTALLED = "MCP support is not installed in this ttft (the backends.mcp module is missing)"


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not a whole number") from None
    if n < 1:
        raise argparse.ArgumentTypeError("give 1 or more")
    return n


def add_tool_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("tools (MCP)")
    g.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="SPEC",
        help="offer the tools of this MCP server to the model (repeat for more); a tool runs only with"
        " --allow-tools or --allow-tool NAME",
    )
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


def wants_tools(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "mcp", None))


def mcp_module() -> Any | None:
    """The MCP client, or None where this ttft has none."""
    try:
        return importlib.import_module(MCP_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name is not None and MCP_MODULE.startswith(exc.name):
            return None
        raise


def tools_problem(args: argparse.Namespace, local: bool) -> str | None:
    """Why these tool flags cannot make a turn (exit 2), or None."""
    if not wants_tools(args):
        if args.allow_tools or args.allow_tool:
            return "--allow-tools and --allow-tool need --mcp SPEC (the tools to allow)"
        return None
    if local:
        return NO_TOOLS
    if mcp_module() is None:
        return NOT_INSTALLED
    return None


def consent_of(args: argparse.Namespace) -> Consent:
    return Consent.from_flags(bool(args.allow_tools), args.allow_tool)


async def start_host(args: argparse.Namespace, on_notice: Any) -> ToolHost:
    """The MCP servers of ``--mcp``, started (a bad spec or a server that does not start raises)."""
    mod = mcp_module()
    if mod is None:
        raise RuntimeError(NOT_INSTALLED)
    servers = [mod.parse_mcp_spec(spec) for spec in args.mcp]
    host = mod.start_host(servers, on_notice=on_notice, max_result_bytes=DEFAULT_MAX_RESULT_BYTES)
    if inspect.isawaitable(host):
        host = await host
    return host
