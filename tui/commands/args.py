"""The parsed flags read into typed, frozen records: the one place a command's ``argparse.Namespace``
is read. Everything after (a command's ``run``, the shared helpers) takes the record.

Each command registers its reader beside its ``run`` (``set_defaults(func=run, read=ask_args)``);
``tui.cli`` parses, then runs :func:`invocation`'s answer. A package command (``bench``, ``report``)
reads its flags in its own ``args.py``. Modules a record names from afar are imported for type
checking only: ``ttft --help``, which imports every command, pays for nothing more.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...backends.mcp.config import DEFAULT_CALL_TIMEOUT_S, DEFAULT_START_TIMEOUT_S
from ...telemetry.settings import PROMPT_LOOKUP, TurnSettings
from ...telemetry.values.checked import ADAPTIVE
from .flags import (
    DEFAULT_MAX_RETRIES,
    LocalFlags,
    McpFlags,
    local_extra,
)

if TYPE_CHECKING:
    from .tools import ToolFlags


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
        start_timeout_s=getattr(args, "mcp_start_timeout", DEFAULT_START_TIMEOUT_S),
        call_timeout_s=getattr(args, "mcp_call_timeout", DEFAULT_CALL_TIMEOUT_S),
    )


def tool_flags(args: argparse.Namespace) -> ToolFlags:
    """``--mcp`` and the consent and step flags of ``tui.commands.tools.add_tool_flags`` (ask, compare)."""
    from .tools import ToolFlags  # late: the agent loop it names is for the commands with tools

    return ToolFlags(mcp_flags(args), bool(args.allow_tools), tuple(args.allow_tool), args.max_steps)


# --- what tui.cli runs ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Invocation:
    """A command to run: its name (``tui.cli`` checks the config for those that read it) and its run."""

    command: str
    run: Callable[[], int]


def invocation(args: argparse.Namespace) -> Invocation:
    """The command the parsed flags name; each registers its reader (``read``) beside its ``run``
    (``func``). The flags are read as it starts: after ``tui.cli``'s config check, as they always were
    (the bench's reading resolves ``-m``, so a bad config.toml is said before anything of the command's)."""
    read: Callable[[argparse.Namespace], Any] = args.read
    run: Callable[[Any], int] = args.func
    return Invocation(args.command, lambda: run(read(args)))


# --- each command's record ------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AskArgs:
    """``ttft ask``'s flags."""

    prompt: tuple[str, ...]
    model: str | None
    base_url: str | None
    settings: TurnSettings
    system: str | None
    timeout: float | None
    local: LocalFlags
    tools: ToolFlags
    attach: tuple[str, ...]
    session: str | None
    sdk: bool
    json: bool
    quiet: bool
    started_ns: int | None  # the process start (tui.cli): what the turn's own delay runs from


def ask_args(args: argparse.Namespace) -> AskArgs:
    return AskArgs(
        prompt=tuple(args.prompt),
        model=args.model,
        base_url=args.base_url,
        settings=settings_from_args(args),
        system=args.system,
        timeout=args.timeout,
        local=local_flags(args),
        tools=tool_flags(args),
        attach=tuple(args.attach or ()),
        session=args.session,
        sdk=args.sdk,
        json=args.json,
        quiet=args.quiet,
        started_ns=getattr(args, "started_ns", None),
    )


@dataclass(frozen=True, slots=True)
class ChatArgs:
    """``ttft chat``'s flags; ``settings`` holds ``--speculative`` too."""

    model: str | None
    base_url: str | None
    resume: str | None  # "": the most recent session
    settings: TurnSettings
    system: str | None
    timeout: float | None
    sdk: bool
    local: LocalFlags
    mcp: McpFlags


def chat_args(args: argparse.Namespace) -> ChatArgs:
    settings = settings_from_args(args)
    return ChatArgs(
        model=args.model,
        base_url=args.base_url,
        resume=args.resume,
        settings=settings.with_(speculative=dict(PROMPT_LOOKUP)) if args.speculative else settings,
        system=args.system,
        timeout=args.timeout,
        sdk=args.sdk,
        local=local_flags(args),
        mcp=mcp_flags(args),
    )


@dataclass(frozen=True, slots=True)
class CompareArgs:
    """``ttft compare``'s flags (``tui.commands.compare.plan_of`` makes them its ComparePlan)."""

    models: tuple[str, ...]
    base_url: str | None
    sequential: bool
    repeat: int
    headless: bool
    blind: bool
    out: Path | None
    settings: TurnSettings
    system: str | None
    timeout: float | None
    local: LocalFlags
    tools: ToolFlags
    prompt: tuple[str, ...]
    json: bool
    quiet: bool
    started_ns: int | None


def compare_args(args: argparse.Namespace) -> CompareArgs:
    return CompareArgs(
        models=tuple(args.model),
        base_url=args.base_url,
        sequential=args.sequential,
        repeat=args.repeat,
        headless=args.headless,
        blind=args.blind,
        out=args.out,
        settings=settings_from_args(args),
        system=args.system,
        timeout=args.timeout,
        local=local_flags(args),
        tools=tool_flags(args),
        prompt=tuple(args.prompt),
        json=args.json,
        quiet=args.quiet,
        started_ns=getattr(args, "started_ns", None),
    )


@dataclass(frozen=True, slots=True)
class ProbeArgs:
    """``ttft probe``'s flags (``tui.commands.probe.plan_of`` makes them its ProbePlan)."""

    model: str | None
    base_url: str | None
    quick: bool
    budget: int | None
    settings: TurnSettings
    timeout: float | None
    local: LocalFlags
    out: Path | None
    no_save: bool
    sdk: bool
    json: bool
    quiet: bool


def probe_args(args: argparse.Namespace) -> ProbeArgs:
    return ProbeArgs(
        model=args.model,
        base_url=args.base_url,
        quick=args.quick,
        budget=args.budget,
        settings=settings_from_args(args),
        timeout=args.timeout,
        local=local_flags(args),
        out=args.out,
        no_save=args.no_save,
        sdk=args.sdk,
        json=args.json,
        quiet=args.quiet,
    )


@dataclass(frozen=True, slots=True)
class ModelsArgs:
    """``ttft models``' flags."""

    model: str | None
    base_url: str | None
    json: bool
    quiet: bool


def models_args(args: argparse.Namespace) -> ModelsArgs:
    return ModelsArgs(args.model, args.base_url, args.json, args.quiet)


@dataclass(frozen=True, slots=True)
class ExportArgs:
    """``ttft export``'s flags."""

    source: str | None
    format: str
    out: Path | None
    redact: bool
    steps: bool
    json: bool
    quiet: bool


def export_args(args: argparse.Namespace) -> ExportArgs:
    return ExportArgs(args.source, args.format, args.out, args.redact, args.steps, args.json, args.quiet)


@dataclass(frozen=True, slots=True)
class SessionsArgs:
    """``ttft sessions``' flags."""

    json: bool


def sessions_args(args: argparse.Namespace) -> SessionsArgs:
    return SessionsArgs(args.json)


@dataclass(frozen=True, slots=True)
class CompletionArgs:
    """``ttft completion``'s shell, and the whole parser it describes (``tui.cli`` builds every command's)."""

    shell: str
    parser: argparse.ArgumentParser


def completion_args(args: argparse.Namespace) -> CompletionArgs:
    return CompletionArgs(args.shell, args.parser)
