"""``ttft export``: a session log as JSONL, CSV, Parquet, or OpenTelemetry GenAI traces (otel) or
metrics (otel-metrics), both OTLP/JSON; with ``--steps``, one row per step (each model call and tool
call of a turn; a turn without tools is one model step) as JSONL, CSV or Parquet.

The data goes to the file (``-o -``: standard output); what the command has to say (how many
turns, what it skipped) goes to standard error, so ``-o -`` and ``-o /dev/stdout`` hold only data."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...telemetry.export import log_slices
from ...telemetry.export.formats import STDOUT, STEP_WRITERS, WRITERS, export
from ...telemetry.log.sessions import resolve
from ...telemetry.log.turns import Skipped, read_records
from .args import ExportArgs, export_args
from .exits import Exit
from .help import examples
from .output import add_output_flags, print_json


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "export",
        help="export a session (default: the latest) as jsonl, csv, parquet, otel (OTLP/JSON traces) or otel-metrics",
        epilog=examples(
            "ttft export                                  # the latest session, as SESSION.jsonl here",
            "ttft export 20260101-090000-a1b2 -f csv -o turns.csv",
            "ttft export -f csv -o - | duckdb -c \"select * from read_csv('/dev/stdin')\"",
            "ttft export --redact -f otel --json          # what was written, as JSON on stdout",
            "ttft export --steps -f csv -o steps.csv      # one row per model call and tool call",
        ),
    )
    p.add_argument("source", nargs="?", help="session id or log file (default: the most recent session)")
    p.add_argument("--format", "-f", choices=sorted(WRITERS), default="jsonl")
    p.add_argument(
        "--out",
        "-o",
        type=Path,
        help="output path, - for standard output (default: SESSION.FORMAT in the current folder)",
    )
    p.add_argument("--redact", action="store_true", help="drop prompt, answer and reasoning text")
    p.add_argument(
        "--steps",
        action="store_true",
        help="one row per step (model call or tool call; a turn without tools is one model step): "
        f"{', '.join(STEP_WRITERS)} only",
    )
    add_output_flags(p, "print what was written as a ttft.export/1 JSON object")
    p.set_defaults(func=run, read=export_args)


def run(args: ExportArgs) -> int:
    try:
        path = resolve(args.source)
    except FileNotFoundError as exc:
        print(f"ttft export: {exc}", file=sys.stderr)
        return Exit.FAILED
    try:
        path.open("rb").close()
    except OSError as exc:
        print(f"ttft export: could not read {path}: {exc.strerror or exc}", file=sys.stderr)
        return Exit.FAILED
    skipped = Skipped()
    passes = 0
    read = 0  # well-formed lines in the first pass: an OTel document leaves out one its mapping cannot read

    def counted(lines: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        nonlocal read
        for rec in lines:
            read += 1
            yield rec

    def records() -> Iterator[dict[str, Any]]:
        """One pass over the log, line by line: the export never holds the session (csv reads twice)."""
        nonlocal passes
        passes += 1
        if passes == 1:  # unreadable lines counted once
            return counted(read_records(path, skipped))
        return read_records(path, None)

    if args.json and args.out == STDOUT:
        print("ttft export: --json and -o - both write to stdout; give -o FILE with --json", file=sys.stderr)
        return Exit.USAGE
    if args.steps and args.format not in STEP_WRITERS:
        print(
            f"ttft export: --steps writes {', '.join(STEP_WRITERS)}; -f {args.format} already holds every step "
            "(a tool-using turn is an invoke_agent span with a span per step)",
            file=sys.stderr,
        )
        return Exit.USAGE
    suffix = {
        "jsonl": ".jsonl",
        "csv": ".csv",
        "parquet": ".parquet",
        "otel": ".otel.json",
        "otel-metrics": ".otel-metrics.json",
    }[args.format]
    # A redacted copy gets a name of its own: written over the full export it would lose that file.
    out = args.out or Path(path.stem + (".steps" if args.steps else "") + (".redacted" if args.redact else "") + suffix)
    try:
        if log_slices.usable(args.format, path.stat().st_size, args.steps):  # a large log: in slices, on every core
            n = read = log_slices.export(path, args.format, out, redact_text=args.redact, skipped=skipped)
        else:
            n = export(records, args.format, out, redact_text=args.redact, steps=args.steps)
    except ModuleNotFoundError:
        print("ttft export: Parquet needs polars (pip install polars); csv has the same columns", file=sys.stderr)
        return Exit.FAILED
    except BrokenPipeError:  # `-o - | head`: the reader has all it wanted; the CLI stops quietly
        raise
    except OSError as exc:  # a read-only folder, a full disk: say where, not a traceback
        reading = exc.filename is not None and str(exc.filename) == str(path)  # the log, read as it streams
        print(
            f"ttft export: could not {'read' if reading else 'write'} {path if reading else out}: "
            f"{exc.strerror or exc}",
            file=sys.stderr,
        )
        return Exit.FAILED if reading else Exit.NOT_SAVED
    if skipped:
        print(f"ttft export: {skipped.message()}", file=sys.stderr)
    turns = read if args.steps else n  # with --steps, n counts rows
    if not args.steps and (left_out := read - n) > 0:
        print(
            f"ttft export: left out {left_out} turn{'s' if left_out != 1 else ''} whose fields do not read "
            "as a ttft.turn record",
            file=sys.stderr,
        )
    if args.json:
        doc = {"schema": "ttft.export/1", "source": str(path), "out": str(out), "format": args.format}
        counts = {"turns": turns, "steps": n} if args.steps else {"turns": n}
        print_json({**doc, **counts, "redacted": args.redact, "skipped_lines": sum(skipped.lines.values())})
    elif not args.quiet:
        where = "standard output" if out == STDOUT else out
        what = f"{n} steps of {turns} turns" if args.steps else f"{n} turns"
        print(
            f"wrote {what} from {path} to {where} ({args.format}{', redacted' if args.redact else ''})",
            file=sys.stderr,
        )
    return Exit.OK
