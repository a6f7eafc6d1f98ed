"""``ttft sessions``: the logged sessions with turn counts and medians."""

from __future__ import annotations

import argparse
import sys
from dataclasses import asdict

from ...telemetry.duration import fmt_ms
from ...telemetry.log.sessions import list_sessions
from ...telemetry.log.turns import Skipped, sessions_dir
from ..format import visible_controls
from .args import SessionsArgs, sessions_args
from .exits import Exit
from .help import examples
from .output import add_output_flags, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "sessions",
        help="list logged sessions with turn counts and medians",
        epilog=examples(
            "ttft sessions",
            "ttft sessions --json | jq -r '.sessions[0].session_id'   # the latest session's id",
        ),
    )
    add_output_flags(p, "print the sessions as a ttft.sessions/1 JSON object")
    p.set_defaults(func=run, read=sessions_args)


def _fmt(v: float | None) -> str:
    return fmt_ms(v, unit="ms", bare=True, missing="-")  # the column header names the unit


def run(args: SessionsArgs) -> int:
    skipped = Skipped()
    sessions = list_sessions(skipped=skipped)
    if skipped:  # once, for every file: the other sessions are listed as usual
        print(visible_controls(f"ttft sessions: {skipped.message()}"), file=sys.stderr)
    if args.json:
        print_json(
            {
                "schema": "ttft.sessions/1",
                "sessions_dir": str(sessions_dir()),
                "sessions": [{**asdict(s), "path": str(s.path), "models": list(s.models)} for s in sessions],
            }
        )
        return Exit.OK
    if not sessions:
        print(f"no sessions logged yet (looked in {sessions_dir()})")
        return 0
    print(f"{'session':<24} {'turns':>5} {'errors':>6} {'TTFT p50 ms':>11} {'TPOT p50 ms':>11}  models")
    for s in sessions:
        line = (
            f"{s.session_id:<24} {s.turns:>5} {s.errors:>6} {_fmt(s.median_ttft_ms):>11} "
            f"{_fmt(s.median_tpot_ms):>11}  {', '.join(s.models)}"
        )
        print(visible_controls(line))  # ids and model names come from files: shown, never run
    print(f"\n{len(sessions)} sessions in {sessions_dir()}")
    return Exit.OK
