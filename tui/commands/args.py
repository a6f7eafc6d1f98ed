"""The parsed flags read into typed, frozen records: the one place a command's ``argparse.Namespace``
is read. Everything after (a command's ``run``, the shared helpers) takes the record.

Only the records' own modules are imported here; the types they hold from elsewhere are named for
type checking only, so ``ttft --help`` (which imports every command) pays for nothing more.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from telemetry.settings import TurnSettings
from tui.commands.flags import (
    ADAPTIVE,
    DEFAULT_MAX_RETRIES,
    MCP_CALL_TIMEOUT_S,
    MCP_START_TIMEOUT_S,
    LocalFlags,
    McpFlags,
    local_extra,
)

if TYPE_CHECKING:
    from tui.commands.tools import ToolFlags


# --- the flag groups that several commands share ---------------------------------------------------
def local_flags(args: argparse.Namespace) -> LocalFlags:
    """``--gpu-layers``, ``--threads``, ``--flash-attn`` (and the bench's ``--server-bin``), as given."""
    return LocalFlags(
        gpu_layers=getattr(args, "gpu_layers", None),
        threads=getattr(args, "threads", None),
        flash_attn=getattr(args, "flash_attn", None),
        server_bin=getattr(args, "server_bin", None),
    )


def settings_from_args(args: argparse.Namespace) -> TurnSettings:
    """The settings the turn flags asked for (any not added to the parser keep TurnSettings' default)."""
    extra: dict[str, Any] = {}
    extra.update(local_extra(local_flags(args)))
    budget = getattr(args, "thinking_budget", None)
    if budget == ADAPTIVE:
        extra["thinking"] = ADAPTIVE
        budget = None
    return TurnSettings(
        stream=not getattr(args, "no_stream", False),
        max_output_tokens=getattr(args, "max_output_tokens", None),
        temperature=getattr(args, "temperature", None),
        reasoning_effort=getattr(args, "reasoning_effort", None),
        reasoning_summary=getattr(args, "reasoning_summary", None),
        thinking_budget=budget,
        thinking_display=getattr(args, "thinking_display", None),
        max_retries=getattr(args, "max_retries", DEFAULT_MAX_RETRIES),
        deadline_s=getattr(args, "deadline", None),
        extra=extra,
    )


def mcp_flags(args: argparse.Namespace) -> McpFlags:
    """``--mcp`` (each spec as given) and its timeouts."""
    return McpFlags(
        specs=tuple(getattr(args, "mcp", None) or ()),
        start_timeout_s=getattr(args, "mcp_start_timeout", MCP_START_TIMEOUT_S),
        call_timeout_s=getattr(args, "mcp_call_timeout", MCP_CALL_TIMEOUT_S),
    )


def tool_flags(args: argparse.Namespace) -> ToolFlags:
    """``--mcp`` and the consent and step flags of ``tui.commands.tools.add_tool_flags`` (ask, compare)."""
    from tui.commands.tools import ToolFlags  # late: the agent loop it names is for the commands with tools

    return ToolFlags(mcp_flags(args), bool(args.allow_tools), tuple(args.allow_tool), args.max_steps)
