"""The ``ttft`` command line. Each subcommand lives in its own module and registers itself here."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version

# Modules that define ``register(subparsers)``; each adds one subcommand.
# A module not written yet is skipped, so commands can land one at a time.
COMMAND_MODULES = (
    "tui.commands.chat",
    "tui.commands.ask",
    "tui.commands.models",
    "tui.commands.compare",
    "tui.commands.bench",
    "tui.commands.report",
    "tui.commands.sessions",
    "tui.commands.export",
)


def package_version() -> str:
    try:
        return version("ttft")
    except PackageNotFoundError:
        return "0+unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ttft",
        description="A terminal chat client for LLMs that shows where the latency comes from.",
    )
    parser.add_argument("--version", action="version", version=f"ttft {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
            continue
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    # Bare `ttft` (or options only) opens the chat.
    if not args_list or (args_list[0].startswith("-") and args_list[0] not in ("-h", "--help", "--version")):
        if "chat" in parser._subparsers._group_actions[0].choices:  # type: ignore[union-attr]
            args_list = ["chat", *args_list]
        else:
            parser.print_help()
            return 0
    args = parser.parse_args(args_list)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
