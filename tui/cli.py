"""The ``ttft`` command line. Each subcommand lives in its own module and registers itself here; its
flags are read into its typed record (``tui.commands.args``) and the command runs on that.

Only the module of the command being run is imported (``ttft ask`` never pays for
Textual, numpy-heavy reports or the bench driver); ``ttft --help`` and an unknown
command import them all so argparse can list them.
"""

from __future__ import annotations

# First, before any other import: the moment this process began to serve the user, on the
# events' shared clock. `ttft ask` measures its own delay (start -> first send) from here.
from ..telemetry.events import now_ns

STARTED_NS: int | None = now_ns()

import argparse  # noqa: E402
import contextlib  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from collections.abc import Sequence  # noqa: E402
from types import ModuleType  # noqa: E402
from typing import TYPE_CHECKING  # noqa: E402

from .commands.args import Invocation, invocation  # noqa: E402
from .commands.exits import Exit  # noqa: E402
from .commands.help import Parser, examples  # noqa: E402
from .masked_stderr import masked_stderr  # noqa: E402

if TYPE_CHECKING:
    from ..backends.otel.push import LivePush

# The subcommands, in the order help lists them. Each one's module defines ``register(subparsers)``.
COMMANDS = (
    "chat",
    "ask",
    "models",
    "compare",
    "bench",
    "report",
    "sessions",
    "export",
    "probe",
    "proxy",
    "completion",
)


def command_module(command: str) -> ModuleType:
    """The module that registers ``command``, imported only when it is asked for: ``ttft ask`` never pays
    for the chat's imports. Plain imports, so the import graph, mypy and the packager all see them."""
    match command:
        case "chat":
            from .commands import chat

            return chat
        case "ask":
            from .commands import ask

            return ask
        case "models":
            from .commands import models

            return models
        case "compare":
            from .commands import compare

            return compare
        case "bench":
            from .commands.bench import command as bench

            return bench
        case "report":
            from .commands.report import command as report

            return report
        case "sessions":
            from .commands import sessions

            return sessions
        case "export":
            from .commands import export

            return export
        case "probe":
            from .commands import probe

            return probe
        case "proxy":
            from .commands.proxy import command as proxy

            return proxy
        case "completion":
            from .commands import completion

            return completion
    raise KeyError(command)


# Commands that pick a model read the config file: a bad one stops them before they start,
# with one line (exit 2), never a traceback or a silent fall-back to another provider.
CONFIG_COMMANDS = frozenset({"chat", "ask", "models", "compare", "bench", "probe", "proxy"})
# Commands that print or write what the logs hold: the config's secrets are masked there too.
SHOWS_RECORDS = frozenset({"report", "sessions", "export"})
# Commands that need every command's parser (completion describes them all).
WHOLE_PARSER_COMMANDS = frozenset({"completion"})
USAGE_ERROR = int(Exit.USAGE)


class _Version(argparse.Action):
    """``--version``: reads the installed metadata only when asked (it costs ~10 ms at every start otherwise)."""

    def __init__(self, option_strings: Sequence[str], dest: str = argparse.SUPPRESS, **kw: object) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="show the version and exit")

    def __call__(self, parser: argparse.ArgumentParser, *args: object) -> None:
        from ..backends.version import package_version

        print(f"ttft {package_version()}")
        parser.exit()


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser with every command, or with just ``only`` (the command about to run)."""
    parser = Parser(
        prog="ttft",
        description="A terminal chat client for LLMs that shows where the latency comes from.",
        epilog=examples(
            "ttft                                    # the chat, on the default model",
            'ttft ask -m openai:gpt-4o-mini "hi"      # one turn: answer on stdout, summary on stderr',
            'git diff | ttft ask "review this"        # stdin, then the prompt',
            "ttft COMMAND --help                     # each command's options and examples",
        ),
    )
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    for cmd in COMMANDS:
        if only is None or cmd == only:
            command_module(cmd).register(sub)
    return parser


# The commands that may run the local engine in this process (ask and the chat run it in a child).
ENGINE_HERE = frozenset({"bench", "probe", "compare"})


def _started_ns(argv: Sequence[str] | None) -> int:
    """When the user asked: this process's start for a real command line (the first call), else now."""
    global STARTED_NS
    started, STARTED_NS = STARTED_NS, None
    return started if started is not None and argv is None else now_ns()


# Commands whose turns go to the live OpenTelemetry push when one of these is set (backends.otel.push).
TURN_COMMANDS = frozenset({"chat", "ask", "compare", "bench", "probe"})
OTEL_ENDPOINT_VARS = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
)


def _live_otel(command: str) -> LivePush | None:
    """With an OTLP endpoint in the environment, every turn also goes there. Without one, not even
    ``backends.otel.push`` is imported, let alone the SDK (the first turn is measured in ms)."""
    if command in TURN_COMMANDS and any(os.environ.get(v, "").strip() for v in OTEL_ENDPOINT_VARS):
        from ..backends.otel.push import install

        return install(eager=command in ("bench", "probe"))  # a load test pays the SDK import before it times
    return None


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """The command parsers by name (argparse keeps them on its subparsers action)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; never a traceback: a Ctrl-C that no command caught ends it with its code, and
    anything unforeseen is written to a crash report that one line on stderr names (``tui.crash``).
    Whatever any of it says on stderr is masked there (``tui.masked_stderr``): no key, token or URL
    credential reaches it, whoever worded the line."""
    with masked_stderr():
        try:
            return _main(argv)
        except KeyboardInterrupt as exc:
            from .signals import exit_code

            return exit_code(exc)
        except Exception as exc:
            from .crash import report

            args = list(sys.argv[1:] if argv is None else argv)
            command = next((a for a in args if a in COMMANDS), "chat")
            with contextlib.suppress(Exception):  # stderr itself may be gone; the code still says it
                print(report(exc, f"ttft {command}", args), file=sys.stderr)
            return int(Exit.BUG)


def _main(argv: Sequence[str] | None = None) -> int:
    started = _started_ns(argv)
    args_list = list(sys.argv[1:] if argv is None else argv)
    # Bare `ttft` (or options only) opens the chat.
    if not args_list or (args_list[0].startswith("-") and args_list[0] not in ("-h", "--help", "--version")):
        args_list = ["chat", *args_list]
    only = args_list[0] if args_list[0] in COMMANDS else None
    if only in ENGINE_HERE and _names_local_model(args_list[1:]):
        from ..backends.local.llama_adapter import import_before_numpy

        import_before_numpy()  # before the command's modules import numpy: see its docstring
    parser = build_parser(None if only in WHOLE_PARSER_COMMANDS else only)
    if only == "chat" and "chat" not in parser._subparsers._group_actions[0].choices:  # type: ignore[union-attr,operator]
        parser.print_help()
        return 0
    args, extra = parser.parse_known_args(args_list)
    if extra:  # said by the command's own parser, so its usage line (not ttft's) shows what it takes
        chosen = _subparsers(parser).get(getattr(args, "command", None) or "")
        (chosen or parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    args.started_ns = started  # what a command measures its own delay from
    args.parser = parser
    push = _live_otel(args.command)
    try:
        code = _dispatch(invocation(args))
    except BrokenPipeError:  # `ttft sessions | head -1`: the reader has all it wanted
        code = _reader_gone()
    finally:
        if push is not None:  # before the interpreter shuts down: the export thread may still be starting
            push.report_at_close()
    hangup = sys.modules.get(f"{__package__}.hangup")  # loaded by the chat and compare apps only
    if hangup is not None and hangup.HEARD.is_set():  # their terminal closed: all is saved, end at once
        hangup.exit_now(code)
    return code


def _names_local_model(args: Sequence[str]) -> bool:
    """Whether a command's arguments name the in-process local engine (``-m local...``, or no ``-m`` with
    the default model local)."""
    from itertools import pairwise

    from ..backends.providers.registry import ProviderError, default_spec, names_local_engine

    specs = [v for flag, v in pairwise(args) if flag in ("-m", "--model")]
    specs += [a.split("=", 1)[1] for a in args if a.startswith(("-m=", "--model="))]
    try:
        return any(names_local_engine(s) is True for s in specs or [default_spec()])
    except ProviderError:  # a config that does not read: the command says so
        return False


def _reader_gone() -> int:
    """Stdout's reader closed the pipe: stop quietly, as a shell tool does on SIGPIPE, with its code."""
    # Python flushes stdout again at exit; pointing it at /dev/null keeps that flush from failing too.
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return int(Exit.PIPE_CLOSED)  # 128 + SIGPIPE, what a shell reports for a command killed by it


def _mask_config_secrets() -> None:
    from ..backends.mcp.config_secrets import remember_config_secrets  # only the commands that show secrets

    remember_config_secrets()


def _dispatch(command: Invocation) -> int:
    if command.command not in CONFIG_COMMANDS:  # these never read it (nor pay for importing the HTTP stack)
        if command.command in SHOWS_RECORDS:
            _mask_config_secrets()
        return int(command.run() or 0)
    from ..backends.providers.registry import ProviderError, check_config
    from ..telemetry.errors import ErrorKind

    try:
        check_config()
        _mask_config_secrets()
        return int(command.run() or 0)
    except ProviderError as err:
        if err.kind is not ErrorKind.CONFIG_ERROR:
            raise
        from .format import visible_controls

        hint = f" {err.hint}" if err.hint else ""
        print(visible_controls(f"ttft: {err.message}{hint}"), file=sys.stderr)
        return USAGE_ERROR


if __name__ == "__main__":
    sys.exit(main())
