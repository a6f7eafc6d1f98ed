"""``ttft bench``: the batching trade-off, measured (aggregate tokens/s against each user's speed).

Runs closed-loop concurrency levels or open-loop Poisson rates against any provider, or
against llama.cpp's ``llama-server`` started here (``-m local-server[:PATH.gguf] --slots 4``),
from this process, ``--workers`` processes, or the drivers of a Ray cluster (``--cluster``).
Every request is a ``ttft.turn`` record; the run leaves ``turns.jsonl``, ``summary.json``
(vLLM bench key names), ``levels.csv`` and the charts in ``--out``.

The command is thin: the flags are read once into a :class:`backends.load.plan.BenchPlan`
(``tui.commands.bench.args.plan``), :func:`backends.load.bench.run_bench` runs it (warm-up, levels or the
capacity search, the llama-server's lifetime, the run's files) and this module prints what it is shown
(``tui.commands.bench.output``), then the charts and the conclusion.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from ....backends.load import event_loop
from ....backends.load.bench import BenchAbort, BenchResult, Hooks, run_bench, scraper
from ....backends.load.capacity import Probe
from ....backends.load.plan import BenchPlan
from ....backends.load.scrape import LevelScraper
from ....telemetry.bench.cluster import partial_line
from ... import signals
from ...format import visible_controls
from ...report import charts
from ..exits import Exit, for_error_kind
from ..output import note, print_json, warn
from . import args as bench_args
from . import capacity as bench_capacity
from .flags import build
from .output import (
    HEADER,
    ProgressLine,
    agent_line,
    bench_charts,
    cost_line,
    gauges_line,
    level_row,
    probe_line,
    server_latency_line,
    server_line,
    token_line,
    ttft_split_line,
    wait_line,
    workload_lines,
)

T = TypeVar("T")
EXITS = {"usage": Exit.USAGE, "failed": Exit.FAILED, "not_saved": Exit.NOT_SAVED}


def register(sub: argparse._SubParsersAction) -> None:
    build(sub, __doc__).set_defaults(func=run, read=bench_args.read)


def run(args: bench_args.BenchArgs) -> int:
    for line in args.said:  # a flag refused, or what the workload's files held
        print(line, file=sys.stderr)
    plan = args.plan
    if isinstance(plan, BenchAbort):
        return report(plan)
    shown: dict[str, Any] = {}
    try:
        if not args.json:
            # SIGTERM and SIGHUP stop it like Ctrl-C; on uvloop when installed (backends.load.event_loop)
            return signals.run(bench(plan, shown, quiet=args.quiet, fmt=args.charts), event_loop.loop_factory())
        # --json: stdout holds the summary alone; the tables and charts go to stderr (or nowhere, -q)
        with contextlib.ExitStack() as stack:
            sink = stack.enter_context(open(os.devnull, "w")) if args.quiet else sys.stderr
            stack.enter_context(contextlib.redirect_stdout(sink))
            rc = signals.run(bench(plan, shown, quiet=args.quiet, fmt=args.charts), event_loop.loop_factory())
        if (summary := shown.get("summary")) is not None:
            print_json(summary)
        return rc
    except KeyboardInterrupt as exc:
        print("\nttft bench: interrupted; results so far are in the output folder", file=sys.stderr)
        return signals.exit_code(exc)


def report(exc: BenchAbort) -> int:
    """A step that could not go on: its sentence (a server's words, maybe: shown, never run) and exit code."""
    if exc.sentence is not None:
        print(visible_controls(f"ttft bench: {exc.sentence}"), file=sys.stderr)
    return EXITS.get(exc.outcome) or for_error_kind(exc.outcome)


async def _scraper(
    server_metrics: str | None,
    quiet: bool,
    spec: str,
    base_url: str | None,
    local_url: str | None,
    meta: dict[str, Any],
) -> LevelScraper | None:
    """:func:`backends.load.bench.scraper` for ``--server-metrics``, its notes left out with ``-q``."""
    hooks = Hooks(on_note=lambda text: note(quiet, text), on_warn=warn)
    return await scraper(server_metrics, spec, base_url, local_url, meta, hooks)


def hooks(quiet: bool, progress: ProgressLine) -> Hooks:
    """What the run shows: each level's row and lines, each probe's, notes (not with -q) and faults."""

    def ended(show: Callable[[T], None]) -> Callable[[T], None]:  # the progress line cleared first
        def shown(what: T) -> None:
            progress.end()
            show(what)

        return shown

    return Hooks(
        on_level=ended(print_level),
        on_probe=ended(print_probe),
        on_start=lambda: print(HEADER),
        on_progress=progress,
        on_note=ended(lambda text: None if quiet else warn(text)),  # as note(): left out with -q
        on_warn=ended(warn),
        on_problem=lambda text: print(visible_controls(text), file=sys.stderr),
    )


def print_level(a: dict[str, Any]) -> None:
    """A level's row, then the lines under it that have something to say."""
    print(level_row(a), flush=True)
    if (line := probe_line(a)) is not None:  # the one user beside the load (--probe-rate)
        print(line, flush=True)
    if (line := agent_line(a)) is not None:  # tool-using turns (--tool-latency, --mcp)
        print(line, flush=True)
    for line in (server_line(a), gauges_line(a), server_latency_line(a)):
        if line is not None:
            print(visible_controls(line), flush=True)
    for line in (wait_line(a), ttft_split_line(a)):
        if line is not None:
            print(visible_controls(line), flush=True)
    if (line := token_line(a)) is not None:  # a tokens/s resting on estimates, or on counts beyond the text
        print(visible_controls(line), flush=True)
    if (line := cost_line(a)) is not None:
        print(line, flush=True)
    for text in workload_lines(a):
        print(text, flush=True)
    if (line := partial_line(a)) is not None:
        print("          " + line, flush=True)


def print_probe(p: Probe) -> None:
    """A capacity probe's row, the server's gauges over it (when read) and its verdict."""
    if p.unreadable:  # a worker's record that does not read: left out of the verdict
        print(f"ttft bench: left out {p.unreadable} unreadable record(s)", file=sys.stderr)
    row, verdict = bench_capacity.probe_lines(p, level_row)
    print(row, flush=True)
    a = p.aggregate
    for line in (
        agent_line(a),
        server_line(a),
        gauges_line(a),
        server_latency_line(a),
        ttft_split_line(a),
        token_line(a),
    ):
        if line is not None:
            print(visible_controls(line), flush=True)
    print(verdict, flush=True)


async def bench(plan: BenchPlan, shown: dict[str, Any], *, quiet: bool, fmt: str) -> int:
    """The plan run (its rows printed as they end), then the charts and the conclusion."""
    progress = ProgressLine(quiet, search=plan.capacity is not None)
    try:
        result = await run_bench(plan, hooks=hooks(quiet, progress))
    except BenchAbort as exc:
        progress.end()
        return report(exc)
    shown["summary"] = {**result.summary, "out": str(result.out)}  # for --json
    return conclude(result, fmt)


def conclude(result: BenchResult, fmt: str) -> int:
    """The charts (drawn here, written beside the results), the conclusion; the exit code says how it went
    (an output that could not be written is said, exit 3)."""
    plan, levels, meta, out = result.plan, result.levels, result.meta, result.out
    unsaved = list(result.unsaved)
    title = meta.get("model") or plan.spec
    if fmt == "png" and not charts.png_available():
        print("ttft bench: PNG charts need matplotlib (pip install matplotlib); writing SVG", file=sys.stderr)
    drawn = bench_charts(levels, str(title), meta.get("capacity"))
    for name, chart in drawn:
        print()
        print(chart.terminal(78, 18))
        try:
            charts.write_chart(chart, out / name, fmt)
        except OSError as exc:
            unsaved.append(f"the {name} chart: {exc.strerror or exc}")
    print()
    print(result.summary["conclusion"])
    if meta.get("capacity"):
        print()
        print(meta["capacity"]["conclusion"])
    if plan.slo:
        print(f"SLOs: {plan.slo.describe()}")
    if unsaved:
        for what in unsaved:
            print(f"ttft bench: could not write {what}", file=sys.stderr)
        return Exit.NOT_SAVED
    names = " + ".join(name for name, _ in drawn)
    print(f"\nresults in {out}/ (turns.jsonl, summary.json, levels.csv, {names} charts)")
    if not levels or not all(lv["completed"] for lv in levels):
        return Exit.FAILED
    lost = (meta.get("cluster") or {}).get("lost")
    return Exit.PARTIAL if lost or any(lv.get("partial") for lv in levels) else Exit.OK
