"""How a command prints: results on stdout (text, or one JSON document with ``--json``), and its
summary and notes on stderr unless ``-q``. Errors are never silenced."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ...telemetry.export.json_text import json_text
from ..format import visible_controls


def add_output_flags(p: argparse.ArgumentParser, json_help: str) -> None:
    """``--json`` and ``-q/--quiet``, with the same names and meaning on every command."""
    p.add_argument("--json", action="store_true", help=json_help)
    p.add_argument(
        "-q", "--quiet", action="store_true", help="no summary or progress on stderr (errors are still said)"
    )


def print_json(doc: Any) -> None:
    print(json_text(doc))


def note(quiet: bool, text: str) -> None:
    """A summary or progress line on stderr, left out with ``-q``; text from outside is shown, never run."""
    if not quiet:
        print(visible_controls(text), file=sys.stderr, flush=True)


def warn(text: str) -> None:
    """A warning on stderr, said even with ``-q``: what ran is not quite what was asked (a flag that could
    not act). Text from outside is shown, never run."""
    print(visible_controls(text), file=sys.stderr, flush=True)
