"""``ttft report``'s parsed flags read into its typed record (``tui.commands.args`` for the others)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ReportArgs:
    """``ttft report``'s flags."""

    files: tuple[str, ...]
    turns: str | None  # e.g. "1,4,8", checked by the parser
    html: Path | None  # ``-``: standard output
    svg: Path | None
    png: Path | None
    width: int
    merge: bool
    json: bool
    quiet: bool


def report_args(args: argparse.Namespace) -> ReportArgs:
    return ReportArgs(
        files=tuple(args.files),
        turns=args.turns,
        html=args.html,
        svg=args.svg,
        png=args.png,
        width=args.width,
        merge=args.merge,
        json=args.json,
        quiet=args.quiet,
    )
