"""``ttft report FILE...``: summary tables and charts from session logs, comparisons and bench results.

Reads any mix of: a bench results folder (or its ``summary.json`` / ``turns.jsonl``), a session
log (``.jsonl`` of ``ttft.turn`` lines, or a session id), a comparison log (turns tagged with a
``comparison_id``). Prints the tables and terminal charts: TTFT and TPOT distributions, the
timeline of chosen turns (failed and cancelled turns marked), and the trade-off chart for benches.
``--html FILE`` writes the same as one self-contained page (``tui.report.html``): a header with the
date, version, models, base URLs and sources, hover details on every chart, a layout that fits a
phone; ``--svg DIR`` / ``--png DIR`` write each chart as a file. ``--merge`` reads bench runs
made on several machines at once as one load (``tui.commands.report.merge``, ``telemetry.bench.merge``).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from ....telemetry.bench.merge import MergeRefused
from ....telemetry.bench.probe import ms, read_probe
from ....telemetry.compare.stats import pane_stats
from ....telemetry.export.formats import STDOUT, open_private
from ....telemetry.log.quote import quoted
from ....telemetry.record import TurnRecord
from ...format import short_model, visible_controls
from ...report import charts
from ...report import figures as chart_builders
from ...report import html as report_html
from ..bench.output import (
    COLUMNS,
    HEADER,
    agent_line,
    bench_charts,
    level_cells,
    level_row,
    probe_line,
)
from ..exits import Exit
from ..help import examples
from ..output import add_output_flags, note, print_json
from .args import ReportArgs, report_args
from .inputs import TIMELINE_TURNS, Group, Loaded, capacity_block, load, load_merged, wanted


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "report",
        help="tables and charts from session logs, comparisons and bench results",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=examples(
            "ttft report ttft-bench-20260101-090000/           # a bench folder",
            "ttft report SESSION_ID cmp/CMP_ID.jsonl --html report.html",
            "ttft report a/ b/ --svg charts/ --json -q        # the figures as JSON, the charts as files",
            "ttft report --merge m1/ m2/                     # runs made at once on two machines, as one load",
        ),
    )
    p.add_argument("files", nargs="+", help="bench folders, summary.json, .jsonl logs, or session ids")
    p.add_argument(
        "--turns",
        type=_turns_arg,
        help="turns for the timeline, numbered from 1 as shown, e.g. 1,4,8 (default: the last 8)",
    )
    p.add_argument("--html", type=Path, help="write one HTML page with the tables and charts (- for stdout alone)")
    p.add_argument("--svg", type=Path, metavar="DIR", help="write each chart as an SVG file into DIR")
    p.add_argument("--png", type=Path, metavar="DIR", help="write each chart as PNG into DIR (needs matplotlib)")
    p.add_argument("--width", type=int, default=78, help="terminal chart width")
    p.add_argument(
        "--merge",
        action="store_true",
        help="the bench runs given (folders or turns.jsonl, made at once on several machines) are one load:"
        " level k of each together, its concurrency or rate their sum, every figure over all their requests",
    )
    add_output_flags(p, "print the figures as a ttft.report/1 JSON object instead of the tables and charts")
    p.set_defaults(func=run, read=report_args)


# --- tables ------------------------------------------------------------------------------
GROUP_COLUMNS = ("turns", "ok", "errors", "TTFT p50", "p90", "TTFVT p50", "TPOT p50", "p90", "E2E p50", "out tok p50")


def group_row(g: Group) -> list[str]:
    st = pane_stats(g.name, g.records)  # the figures come from telemetry; this only formats them

    def fmt(key: str, which: str, digits: int = 0) -> str:
        v = getattr(st.metrics[key], which)
        return "-" if v is None else f"{v:,.{digits}f}"

    return [
        str(st.turns),
        str(st.ok),
        str(st.failed),
        fmt("ttft", "median"),
        fmt("ttft", "p90"),
        fmt("ttfvt", "median"),
        fmt("tpot", "median", 1),
        fmt("tpot", "p90", 1),
        fmt("e2e", "median"),
        fmt("output_tokens", "median"),
    ]


def groups_table(groups: list[Group]) -> str:
    name_w = min(48, max(len(g.name) for g in groups))
    lines = [f"{'turns of':<{name_w}} " + " ".join(f"{c:>9}" for c in GROUP_COLUMNS)]
    for g in groups:
        lines.append(f"{short_model(g.name, name_w):<{name_w}} " + " ".join(f"{c:>9}" for c in group_row(g)))
    return "\n".join(lines)


def _turns_arg(value: str) -> str:
    if not all(t.strip().isdigit() and int(t) >= 1 for t in value.split(",") if t.strip()):
        raise argparse.ArgumentTypeError(f"expected turn numbers from 1, e.g. 1,4,8; got {quoted(value)}")
    return value


def _chosen(records: list[TurnRecord], turns: str | None) -> list[TurnRecord]:
    want = wanted(turns)
    if want is None:
        return records[-TIMELINE_TURNS:]
    return [r for r in records if r.turn_index in want]


def report_charts(loaded: Loaded, turns: str | None) -> list[tuple[str, charts.Chart]]:
    out: list[tuple[str, charts.Chart]] = []
    for i, b in enumerate(loaded.benches):
        suffix = f"-{i + 1}" if len(loaded.benches) > 1 else ""
        out += [(f"{name}{suffix}", c) for name, c in bench_charts(b.levels, b.name, capacity_block(b))]
    session = [r for g in loaded.groups for r in g.records]
    ok = [r for r in session if r.status == "ok"]
    if ok:
        ttft = [r.metrics.ttft_ms for r in ok if r.metrics.ttft_ms is not None]
        tpot = [r.metrics.tpot_ms for r in ok if r.metrics.tpot_ms is not None]
        out.append(("ttft-distribution", chart_builders.hist_chart(ttft, "TTFT distribution", "TTFT ms")))
        out.append(("tpot-distribution", chart_builders.hist_chart(tpot, "TPOT distribution", "TPOT ms")))
    if session:
        chosen = _chosen(session, turns)
        out.append(("timeline", chart_builders.timeline_chart(chosen, "Timeline of chosen turns")))
    return out


# --- output ------------------------------------------------------------------------------
def report_text(loaded: Loaded, chart_list: list[tuple[str, charts.Chart]], width: int) -> str:
    out: list[str] = []
    for b in loaded.benches:
        out += [f"== bench: {b.name} =="]
        if b.meta.get("merged_from"):
            out.append("merged from runs " + ", ".join(map(str, b.meta["merged_from"])))
        rows = [
            [level_row(lv), *(line for line in (probe_line(lv), agent_line(lv)) if line is not None)] for lv in b.levels
        ]
        out += [HEADER, *(line for row in rows for line in row), ""]
    if loaded.groups:
        out += ["== turns ==", groups_table(loaded.groups), ""]
    for _, c in chart_list:
        out += [c.terminal(width, 16 if c.kind == "hist" else 18), ""]
    out += [f"{b.name}: {b.conclusion}" for b in loaded.benches]
    return "\n".join(out)


def print_report(loaded: Loaded, chart_list: list[tuple[str, charts.Chart]], width: int) -> None:
    # names, models and conclusions come from files: their control characters are shown, never run
    print(visible_controls(report_text(loaded, chart_list, width)))


PROBE_HEADER = ["one user", "user TTFT p50", "user TTFT p90", "user TPOT p50", "user err"]


def probe_cells(lv: dict[str, Any]) -> list[str]:
    """The one user beside a level's load (``--probe-rate``) as the HTML table's last cells."""
    p = read_probe(lv)
    if p is None:
        return ["-"] * len(PROBE_HEADER)
    rate = f"{p['rate']:g}/s" if p["rate"] else "-"
    t = p["ttft_ms"]
    return [
        f"{rate}, {p['requests']} req",
        ms(t["p50"]),
        ms(t["p90"]),
        ms(p["tpot_ms"]["p50"]),
        str(p["errors"]),
    ]


def html_page(loaded: Loaded, chart_list: list[tuple[str, charts.Chart]], version: str = "") -> str:
    """The report as one self-contained HTML page (laid out by ``tui.report.html``)."""
    tables: list[tuple[str, list[str], list[list[str]], str]] = []
    for b in loaded.benches:
        header = [name for name, _ in COLUMNS] + ["client"]
        rows = [level_cells(lv) for lv in b.levels]
        if any(read_probe(lv) is not None for lv in b.levels):  # --probe-rate: the one user beside each level
            header += PROBE_HEADER
            rows = [[*row, *probe_cells(lv)] for row, lv in zip(rows, b.levels, strict=True)]
        tables.append((f"Bench: {b.name}", header, rows, b.conclusion))
    if loaded.groups:
        rows = [[g.name, *group_row(g)] for g in loaded.groups]
        tables.append(("Turns", ["turns of", *GROUP_COLUMNS], rows, ""))
    info = report_html.page_info(loaded, version or "unknown")
    return report_html.html_page(chart_list, info, tables)


def report_json(loaded: Loaded) -> dict[str, Any]:
    """``--json``: the figures the tables show, as ``ttft.report/1``."""

    def group(g: Group) -> dict[str, Any]:
        st = pane_stats(g.name, g.records)
        metrics = {k: {"n": m.n, "median": m.median, "p90": m.p90} for k, m in st.metrics.items()}
        return {"name": g.name, "turns": st.turns, "ok": st.ok, "failed": st.failed, "cancelled": st.cancelled,
                "metrics": metrics}  # fmt: skip

    return {
        "schema": "ttft.report/1",
        "benches": [
            {"name": b.name, "levels": b.levels, "conclusion": b.conclusion}
            | ({"merged_from": b.meta["merged_from"]} if b.meta.get("merged_from") else {})
            for b in loaded.benches
        ],
        "groups": [group(g) for g in loaded.groups],
        "problems": loaded.problems,
    }


def _wrote(args: ReportArgs, text: str) -> None:
    """Which files were written: with the report on stdout, on stderr (and not at all with -q) beside JSON."""
    if args.json:
        note(args.quiet, text.strip())
    elif not args.quiet:
        print(text)


def run(args: ReportArgs) -> int:
    if args.merge:
        try:
            loaded = load_merged(list(args.files))
        except MergeRefused as exc:  # not one load (or nothing to merge): said, exit 2, no report
            print(visible_controls(f"ttft report: cannot merge: {exc}"), file=sys.stderr)
            return Exit.USAGE
    else:
        loaded = load(list(args.files), args.turns)
    for p in loaded.problems:
        print(visible_controls(f"ttft report: {p}"), file=sys.stderr)
    if not loaded.benches and not loaded.groups:
        return Exit.FAILED
    chart_list = report_charts(loaded, args.turns)
    page_to_stdout = args.html == STDOUT  # --html -: standard output holds the page alone
    if page_to_stdout and args.json:
        print("ttft report: --json and --html - both write to stdout; give --html FILE with --json", file=sys.stderr)
        return Exit.USAGE
    if args.json:
        print_json(report_json(loaded))
    elif not page_to_stdout:
        print_report(loaded, chart_list, args.width)
    rc = Exit.OK
    if args.html:
        try:
            if not page_to_stdout:
                args.html.parent.mkdir(parents=True, exist_ok=True)
            from ....backends.version import package_version

            with open_private(args.html) as f:  # the user's data, like an export: 0600
                f.write(html_page(loaded, chart_list, package_version()))
        except OSError as exc:  # a read-only folder, a full disk: the report above stands, the file does not
            print(f"ttft report: could not write {args.html}: {exc.strerror or exc}", file=sys.stderr)
            rc = Exit.NOT_SAVED
        else:
            if not page_to_stdout:
                _wrote(args, f"\nwrote {args.html}")
    for fmt, folder in (("svg", args.svg), ("png", args.png)):
        if folder is None:
            continue
        if fmt == "png" and not charts.png_available():
            print("ttft report: PNG needs matplotlib (pip install matplotlib); writing SVG instead", file=sys.stderr)
        try:
            folder.mkdir(parents=True, exist_ok=True)
            written = [charts.write_chart(c, folder / name, fmt) for name, c in chart_list]
        except OSError as exc:
            print(f"ttft report: could not write the charts to {folder}/: {exc.strerror or exc}", file=sys.stderr)
            rc = Exit.NOT_SAVED
        else:
            _wrote(args, f"wrote {len(written)} charts to {folder}/")
    return rc
