"""``ttft export``: a session log as JSONL, CSV or OpenTelemetry GenAI metrics."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from telemetry.export import WRITERS, export
from telemetry.log import Skipped, read_records, resolve


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="export a session (default: the latest) as jsonl, csv or otel")
    p.add_argument("source", nargs="?", help="session id or log file (default: the most recent session)")
    p.add_argument("--format", "-f", choices=sorted(WRITERS), default="jsonl")
    p.add_argument("--out", "-o", type=Path, help="output path (default: SESSION.FORMAT in the current folder)")
    p.add_argument("--redact", action="store_true", help="drop prompt, answer and reasoning text")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        path = resolve(args.source)
    except FileNotFoundError as exc:
        print(f"ttft export: {exc}", file=sys.stderr)
        return 1
    skipped = Skipped()
    try:
        records = list(read_records(path, skipped))
    except OSError as exc:
        print(f"ttft export: could not read {path}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if skipped:
        print(f"ttft export: {skipped.message()}", file=sys.stderr)
    suffix = {"jsonl": ".jsonl", "csv": ".csv", "otel": ".otel.json"}[args.format]
    out = args.out or Path(path.stem + suffix)
    try:
        n = export(records, args.format, out, redact_text=args.redact)
    except OSError as exc:  # a read-only folder, a full disk: say where, not a traceback
        print(f"ttft export: could not write {out}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"wrote {n} turns from {path} to {out} ({args.format}{', redacted' if args.redact else ''})")
    return 0
