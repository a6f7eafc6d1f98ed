"""Rich renderables for a comparison: the summary table, the verdicts and each pane's status line.

Shared by ``ttft compare --headless`` (printed) and the compare screen (drawn); every number
comes from ``telemetry``: :mod:`telemetry.compare.stats`, the recorder's snapshots, typed ``TurnRecord``s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ...telemetry.compare.stats import RESAMPLES, Comparison, fmt_amount
from ...telemetry.cost import fmt_usd
from ...telemetry.duration import fmt_ms
from ...telemetry.record import TurnRecord
from ...telemetry.recorder import Snapshot
from ..format import PHASE_COLOR, short_spec_str, visible_controls

WIN = "★"
NAME_W = 32  # the summary's model column
PANE_COLORS = ("cyan", "magenta", "yellow", "green")


def pane_color(i: int) -> str:
    return PANE_COLORS[i % len(PANE_COLORS)]


def header_text(
    *, kept: str | None, panes: int, mode: str, blind: bool, trials: int, settings: str, comparison_id: str
) -> Text:
    """The compare screen's header: the panes (or the one kept), how prompts start, trials, settings, the id."""
    t = Text()
    t.append("ttft compare ", style="bold")
    if kept is not None:
        t.append(f"│ kept {kept} ", style="bold cyan")
    else:
        t.append(f"│ {panes} panes · {mode} ", style="bold cyan")
    if blind:
        t.append("· blind ", style="bold magenta")
    t.append(f"│ trials {trials} ")
    t.append(f"│ {settings} ")
    t.append(f"│ {comparison_id}", style="dim")
    return t


def mode_line(mode: str, trials: int, skew_ms: Sequence[float] = ()) -> str:
    if mode == "parallel":
        how = "parallel: every pane started at the same instant"
        if skew_ms:
            how += f" (first sends within {fmt_amount(max(skew_ms), 'ms')})"
    else:
        how = "sequential: one pane after another, order rotating per trial"
    return f"{how} · {trials} trial{'s' if trials != 1 else ''}"


def _bare(value: float, unit: str) -> str:
    """A cell's figure: a count's unit is the column's heading."""
    return fmt_amount(value, unit).replace(" tokens", "").replace(" steps", "")


def _cell(value: float | None, p90: float | None, unit: str, rank: int | None, winner: bool, trials: int) -> Text:
    if value is None:
        return Text("—", style="dim")
    t = Text(_bare(value, unit))
    if winner:
        t.append(f" {WIN}", style="bold green")
    elif rank is not None:
        t.append(f" ({rank})", style="dim")
    if trials > 1 and p90 is not None:
        t.append(f"\np90 {_bare(p90, unit)}", style="dim")
    return t


def summary_table(
    c: Comparison,
    names: Mapping[str, str] | None = None,
    *,
    title: str | None = None,
    colors: Mapping[str, str] | None = None,
) -> Table:
    """One row per pane, one column per metric; each column's winner starred, the others ranked."""
    multi = c.trials > 1
    table = Table(title=title, title_justify="left", expand=False, pad_edge=False, show_edge=False)
    table.add_column("pane", no_wrap=True)
    table.add_column("model", overflow="ellipsis", min_width=8, max_width=NAME_W)
    for m in c.metrics:
        head = "out tok" if m.key == "output_tokens" else m.label
        table.add_column(head + (" med" if multi else ""), justify="right", no_wrap=True)
    table.add_column("ok", justify="right", no_wrap=True)
    if c.priced:  # telemetry.cost: what each pane's turns cost, summed
        table.add_column("cost", justify="right", no_wrap=True)
    for p in c.panes:
        s = c.stats[p]
        cells: list[Text | str] = [
            Text(p, style=f"bold {(colors or {}).get(p, '')}".strip()),
            short_spec_str((names or {}).get(p, f"{s.provider}:{s.model}"), NAME_W),
        ]
        for m in c.metrics:
            ms = s.metrics[m.key]
            r = c.rankings[m.key]
            cells.append(_cell(ms.median, ms.p90, m.unit, r.rank[p], p in r.winners, c.trials))
        ok = Text(f"{s.ok}/{s.turns}")
        if s.failed or s.cancelled:
            ok.stylize("bold red")
        cells.append(ok)
        if c.priced:
            cost = fmt_usd(s.cost.total_usd) if s.cost.priced else "—"
            if s.cost.priced and s.cost.unpriced:  # a partial sum says so
                cost += f" ({s.cost.priced} of {s.cost.priced + s.cost.unpriced} priced)"
            cells.append(cost)
        table.add_row(*cells)
    return table


def verdict_text(c: Comparison, *, only_clear: bool = False) -> Text:
    out = Text()
    if c.trials > 1:
        out.append(
            f"95% bootstrap intervals of the difference of medians ({RESAMPLES} resamples, seeded)\n", style="dim"
        )
    shown = c.shown_verdicts(only_clear=only_clear)
    for v in shown:
        out.append("• ", style="green" if v.clear else "dim")
        out.append(v.text + "\n", style="" if v.clear else "dim")
    if not shown:
        out.append("no clear differences\n" if only_clear else "nothing to compare\n", style="dim")
    for p in c.panes:
        s = c.stats[p]
        if s.failed or s.cancelled:
            what = []
            if s.failed:
                what.append(f"{s.failed} failed")
            if s.cancelled:
                what.append(f"{s.cancelled} cancelled")
            out.append(f"{p}: {', '.join(what)} of {s.turns} (left out of its figures)", style="red")
            if s.errors:
                out.append(f": {visible_controls(s.errors[-1])}", style="red")  # the server's words, shown
            out.append("\n")
    out.rstrip()
    return out


def summary(
    c: Comparison,
    names: Mapping[str, str] | None = None,
    *,
    mode: str,
    skew_ms: Sequence[float] = (),
    only_clear: bool = False,
    colors: Mapping[str, str] | None = None,
) -> Group:
    return Group(
        Text(mode_line(mode, c.trials, skew_ms), style="dim"),
        summary_table(c, names, colors=colors),
        Text(""),
        verdict_text(c, only_clear=only_clear),
    )


def _ms(v: float | None) -> str:
    return fmt_ms(v, digits=None, s_digits=2, missing="—")


def pane_live_text(snap: Snapshot, trial: int = 0, trials: int = 1) -> Text:
    """One or two lines for a pane's turn in flight (from the recorder snapshot)."""
    t = Text()
    t.append(f" {snap.phase.upper()} ", style=f"bold reverse {PHASE_COLOR.get(snap.phase, '')}")
    t.append(f" {_ms(snap.elapsed_ms)}")
    if trials > 1:
        t.append(f" · trial {trial + 1}/{trials}", style="dim")
    if snap.attempt > 1:
        t.append(f" · attempt {snap.attempt}", style="red")
    if snap.ttft_ms is not None:
        t.append(f" · TTFT {_ms(snap.ttft_ms)}")
    if snap.reasoning_tokens:
        t.append(f" · thought {snap.reasoning_tokens} tok", style="magenta")
    if snap.visible_tokens:
        t.append(f" · {snap.visible_tokens} tok")
    if snap.tokens_per_s:
        t.append(f" · {snap.tokens_per_s:.0f} tok/s")
    return t


def pane_done_text(rec: TurnRecord, wins: Sequence[str] = ()) -> Text:
    """A finished turn in one line: the figures the summary ranks, and the columns this pane won."""
    m = rec.metrics
    status = rec.status or "?"
    t = Text()
    t.append(f" {status.upper()} ", style=f"bold reverse {PHASE_COLOR.get(status, '')}")
    if status == "error":
        err = rec.error
        code = f"HTTP {err.status_code} " if err is not None and err.status_code else ""
        kind = err.type if err is not None and err.type else "error"
        t.append(f" {code}{visible_controls(kind)}", style="red")  # the server's word
        return t
    t.append(f" TTFT {_ms(m.ttft_ms)} · TTFVT {_ms(m.ttfvt_ms)}")
    t.append(f" · TPOT {_ms(m.tpot_ms)} · E2E {_ms(m.e2e_ms)}")
    out = rec.tokens.output
    t.append(f" · {out if out is not None else '—'} tok")
    if (a := rec.agent) is not None:  # a tool-using turn: its steps and where its time went besides the model
        t.append(f" · {a.step_count} steps · tools {_ms(a.time_in_tools_ms)}")
    if rec.cost is not None:
        t.append(f" · {fmt_usd(rec.cost.total_usd)}")
    if wins:
        t.append(f"  {WIN} " + " ".join(wins), style="bold green")
    return t
