"""Charts for ``ttft bench`` and ``ttft report``: in the terminal (plotext) and as files (SVG, or PNG).

A chart is described once (:class:`Chart`) and drawn three ways: ``terminal()`` with plotext,
``svg()`` written here by hand (no plotting library needed), and ``png()`` through matplotlib
when it happens to be installed. The builders that turn telemetry's per-level aggregates and
turn records into charts are :mod:`tui.report.figures`; nothing here computes a metric.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

from ...telemetry.log import private_files
from ..format import visible_controls

PHASE_COLORS = {"waiting": "#9aa0a6", "reasoning": "#a142f4", "streaming": "#1a73e8"}
PALETTE = ("#1a73e8", "#e8710a", "#188038", "#d93025", "#a142f4", "#12b5cb")
PHASE_CHARS = {"waiting": "░", "reasoning": "▒", "streaming": "█"}
BAR_NAME_W = 28  # a timeline row's name: the turn and its provider:model
STOP_MARKS = {"error": ("✕", "#d93025"), "cancelled": ("■", "#e8710a")}  # timeline: where a turn stopped


@dataclass
class Series:
    name: str
    xs: list[float]
    ys: list[float]
    labels: list[str] = field(default_factory=list)  # one per point, drawn beside it
    style: Literal["both", "points", "line"] = "both"  # markers joined by a line, markers alone, or a line alone


@dataclass
class Bar:
    """One row of a timeline: consecutive (phase, start_ms, end_ms) segments, and how the turn ended."""

    name: str
    segments: list[tuple[str, float, float]]
    status: str = "ok"  # "ok" | "error" | "cancelled": the last two are marked where the turn stopped
    end_ms: float | None = None  # when it stopped (an error may come before any segment)
    note: str = ""  # why: the error's type and status, shown on hover

    @property
    def stop_ms(self) -> float:
        last = self.segments[-1][2] if self.segments else 0.0
        return max(last, self.end_ms or 0.0)


@dataclass
class Chart:
    kind: Literal["xy", "hist", "timeline"]
    title: str
    xlabel: str = ""
    ylabel: str = ""
    series: list[Series] = field(default_factory=list)
    values: list[float] = field(default_factory=list)  # hist
    bins: int = 20
    bars: list[Bar] = field(default_factory=list)  # timeline
    log_x: bool = False
    caption: str = ""
    x_whole: bool = False  # the x axis counts something (users): ticks on whole numbers only

    # --- terminal -----------------------------------------------------------------
    def terminal(self, width: int = 78, height: int = 18, color: bool = False) -> str:
        if self.kind == "timeline":
            return _timeline_text(self, width)
        if self.kind == "hist" and not self.values:
            return f"{self.title}: no data"
        if self.kind == "xy" and not any(s.xs for s in self.series):
            return f"{self.title}: no data"
        import plotext as plt

        f = plt.figure
        f.clear()
        if self.kind == "hist":
            f.draw(f.hist(self.values, bins=self.bins))
            ticks = whole_ticks(max(hist_counts(self.values, self.bins)))  # requests: never 0.5 of one
            f.ruler("y").ticks(ticks, [f"{t:g}" for t in ticks])
            _terminal_ticks(f, "x", min(self.values), max(self.values), width)
        else:
            xs_all = [x for s in self.series for x in s.xs]
            span = (max(xs_all) - min(xs_all)) or 1.0
            for s in self.series:
                if s.style != "points":
                    line = f.signal(s.xs, s.ys, marker="braille")
                    line.lines()
                    if s.style == "line":
                        line.label(s.name)
                    f.draw(line)
                if s.style != "line":
                    pts = f.signal(s.xs, s.ys, marker="●")
                    pts.label(s.name)
                    f.draw(pts)
                for x, y, lab in zip(s.xs, s.ys, s.labels, strict=False):
                    f.draw(f.text(x + span * 0.015, y, lab))
            if len(self.series) < 2:
                f.legend(False)
            ys_all = [y for s in self.series for y in s.ys]
            axes: list[tuple[str, list[float]]] = [("y", ys_all)]
            if self.x_whole:  # users: ticks at the levels, never 1.17 of one
                xt = sorted({x for s in self.series for x in s.xs})
                f.ruler("x").ticks(xt, [f"{x:g}" for x in xt])
            else:
                axes.insert(0, ("x", xs_all))
            for axis, vals in axes:
                _terminal_ticks(f, axis, min(vals), max(vals), width if axis == "x" else height * 8)
        f.title(self.title)
        f.label(self.xlabel, "x")
        f.label(self.ylabel, "y")
        f.plot_size(width, height)
        out = f.build()
        text = str(out) if color else plt.uncolorize(out)
        f.clear()
        return text.rstrip() + ("\n" + self.caption if self.caption else "")

    # --- SVG ----------------------------------------------------------------------
    def svg(self, width: int = 720, height: int = 420) -> str:
        return _svg(self, width, height)

    def png(self, path: Path) -> bool:
        """Write a PNG through matplotlib; False when matplotlib is not installed."""
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as mpl
        except ImportError:
            return False
        fig, ax = mpl.subplots(figsize=(7.2, 4.2), dpi=100)
        if self.kind == "hist":
            ax.hist(self.values, bins=self.bins, color=PALETTE[0])
        elif self.kind == "xy":
            for i, s in enumerate(self.series):
                ax.plot(s.xs, s.ys, marker="o", color=PALETTE[i % len(PALETTE)], label=s.name)
                for x, y, lab in zip(s.xs, s.ys, s.labels, strict=False):
                    ax.annotate(lab, (x, y), textcoords="offset points", xytext=(5, 5))
            if len(self.series) > 1:
                ax.legend()
        else:
            for row, b in enumerate(self.bars):
                for phase, a, z in b.segments:
                    ax.barh(row, z - a, left=a, color=PHASE_COLORS.get(phase, "#888"))
            ax.set_yticks(range(len(self.bars)), [b.name for b in self.bars])
        ax.set_title(self.title)
        ax.set_xlabel(self.xlabel)
        ax.set_ylabel(self.ylabel)
        fig.tight_layout()
        fig.savefig(path)
        mpl.close(fig)
        return True


def _terminal_ticks(f: Any, axis: str, lo: float, hi: float, cells: float) -> None:
    """Ticks of our choosing on a plotext axis: nice values inside the data's range, labelled with the
    decimals their step needs (plotext writes 19.698 19.714, 1.4e3, or noise for a single value)."""
    if hi - lo <= 1e-9 * max(1.0, abs(hi)):  # one value
        f.ruler(axis).ticks([lo], [f"{lo:,.1f}".rstrip("0").rstrip(".")])
        return
    for n in (5, 4, 3):
        ticks = [t for t in _nice_ticks(lo, hi, n) if lo - 1e-9 <= t <= hi + 1e-9]
        labels = tick_labels(ticks)
        if len(ticks) >= 2 and (max(map(len, labels)) + 2) * len(ticks) <= cells * 0.8:
            f.ruler(axis).ticks(ticks, labels)
            return


# --- terminal timeline (hand drawn: plotext has no gantt) ----------------------------------
def _timeline_text(chart: Chart, width: int) -> str:
    if not chart.bars:
        return f"{chart.title}: no turns"
    end = max((b.stop_ms for b in chart.bars), default=0.0) or 1.0
    name_w = min(BAR_NAME_W, max(len(b.name) for b in chart.bars))
    span = max(10, width - name_w - 12)
    lines = [chart.title]
    for b in chart.bars:
        cells = [" "] * span
        for phase, a, z in b.segments:
            i0, i1 = round(a / end * span), max(round(z / end * span), round(a / end * span) + 1)
            for i in range(i0, min(i1, span)):
                cells[i] = PHASE_CHARS.get(phase, "#")
        mark = STOP_MARKS.get(b.status)
        if mark:  # where the turn stopped
            cells[min(span - 1, round(b.stop_ms / end * span))] = mark[0]
        note = f" {mark[0]} {b.note}" if mark else ""
        lines.append(f"{b.name:<{name_w}} │{''.join(cells)}│ {b.stop_ms:,.0f} ms{note}")
    lines.append(f"{'':<{name_w}}  0{'':>{span - len(f'{end:,.0f} ms') - 1}}{end:,.0f} ms")
    legend = [f"{c} {p}" for p, c in PHASE_CHARS.items()]
    legend += [f"{m[0]} {st}" for st, m in STOP_MARKS.items() if any(b.status == st for b in chart.bars)]
    lines.append("  ".join(legend))
    return "\n".join(lines)


# --- SVG ----------------------------------------------------------------------------
def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """About ``n`` steps over [lo, hi] (the first tick at or below lo, the last at or past hi), each step
    1, 2 or 5 times a power of ten: a label then needs no more decimals than its step (2.5 would add one)."""
    if hi <= lo:
        hi = lo + 1.0
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw * (1 - 1e-9))  # 0.1 / 5 is 0.020000000000000004
    start = math.floor(lo / step) * step
    n = max(1, math.ceil((hi - start) / step - 1e-9))
    return [round(start + i * step, 10) for i in range(n + 1)]  # the last tick is at or past hi


def whole_ticks(hi: float, n: int = 5) -> list[float]:
    """Ticks from 0 for a count (requests, users): whole numbers only, in steps of 1, 2, 5, 10, ..."""
    top = max(1, math.ceil(hi))
    raw = top / n
    mag = 10 ** math.floor(math.log10(raw)) if raw >= 1 else 1
    step = max(1, next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw))
    return [float(i * step) for i in range(math.ceil(top / step) + 1)]


def hist_counts(values: Sequence[float], bins: int) -> list[int]:
    """How many values fall in each of ``bins`` equal bins from the smallest value to the largest."""
    if not values:
        return [0] * bins
    lo, hi = min(values), max(values)
    w = ((hi - lo) or 1.0) / bins
    counts = [0] * bins
    for v in values:
        counts[min(int((v - lo) / w), bins - 1)] += 1
    return counts


def _esc(text: str) -> str:
    """Text for SVG: names and models come from files, so control characters are shown (XML cannot
    even hold most of them) and markup is escaped."""
    return html.escape(visible_controls(text), quote=True)


def _tip(text: str) -> str:
    """Hover details for one SVG element: a ``<title>`` (any SVG viewer) and ``data-tip`` (the report's
    own tooltip, which also works on touch)."""
    return f' data-tip="{_esc(text)}"><title>{_esc(text)}</title'


def tick_decimals(ticks: Sequence[float]) -> int:
    """The fewest decimals that write every tick exactly (to a millionth of their step): 19.7, 19.72,
    19.74 need two, 0, 2.5, 5 one, 0, 500, 1000 none. So neighbours never share a label."""
    if len(ticks) < 2:
        return 0 if not ticks or float(ticks[0]).is_integer() else 2
    step = min(b - a for a, b in pairwise(ticks)) or 1.0
    for d in range(10):
        if all(abs(round(t, d) - t) <= abs(step) * 1e-6 for t in ticks):
            return d
    return 10


def tick_labels(ticks: Sequence[float]) -> list[str]:
    """Each tick with the same decimals, the fewest that tell them apart (:func:`tick_decimals`)."""
    d = tick_decimals(ticks)
    return [f"{0.0 if round(t, d) == 0 else t:,.{d}f}" for t in ticks]  # never "-0.0"


def axis_ticks(lo: float, hi: float, px: float, chars_px: float = 7.0) -> list[float]:
    """Nice ticks over [lo, hi] for an axis ``px`` long: as many as 5, fewer when their labels would
    not fit side by side (a phone's chart, long numbers)."""
    for n in (5, 4, 3, 2):
        ticks = _nice_ticks(lo, hi, n)
        widest = max(len(x) for x in tick_labels(ticks)) * chars_px + 12
        if widest * len(ticks) <= px:
            return ticks
    return ticks


LABEL_CHAR_PX, LABEL_H = 7.2, 14.0  # a 12 px sans-serif label: a generous width per character, its height
Box = tuple[float, float, float, float]  # x0, y0, x1, y1


def _overlaps(a: Box, b: Box) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def place_labels(
    wanted: Sequence[tuple[float, float, str]], plot: Box, taken: Sequence[Box] = ()
) -> list[tuple[float, float, str]]:
    """Where each point's label goes: ``(x, y, text)`` of a text baseline, for the points ``(px, py, text)``.

    Beside its point (above right, below right, above left, below left, then farther out), inside the
    plot, over no other label, no other point and nothing in ``taken`` (the legend). A label with no
    free place is left off: its point's hover details carry it, so nothing is lost, and no two labels
    ever collide, however many levels a chart has."""
    points = [(px - 6, py - 6, px + 6, py + 6) for px, py, _ in wanted]
    placed: list[Box] = list(taken)
    out = []
    for i, (px, py, text) in enumerate(wanted):
        w = len(text) * LABEL_CHAR_PX
        others = points[:i] + points[i + 1 :]
        for dx, dy in (
            (7, -7), (7, 17), (-7 - w, -7), (-7 - w, 17),  # beside it, above and below: the four corners
            (-w / 2, -10), (-w / 2, 21),  # centred over it, under it
            (7, -21), (7, 31), (-7 - w, -21), (-7 - w, 31),  # a line farther out
        ):  # fmt: skip
            x, y = px + dx, py + dy  # the baseline's start: the box runs from y - LABEL_H + 3 to y + 3
            box = (x, y - LABEL_H + 3, x + w, y + 3)
            inside = box[0] >= plot[0] and box[2] <= plot[2] and box[1] >= plot[1] and box[3] <= plot[3]
            if inside and not any(_overlaps(box, b) for b in (*placed, *others)):
                placed.append(box)
                out.append((x, y, text))
                break
    return out


def timeline_row_px(bars: int) -> float:
    """One timeline row's height: 24 px, 18 past a dozen turns."""
    return 24.0 if bars <= 12 else 18.0


def _svg(chart: Chart, width: int, height: int) -> str:
    left, right, top, bottom = 70, 20, 40, 55
    if chart.kind == "timeline":
        left = 20 + 6 * max((len(b.name) for b in chart.bars), default=10)
        top = 60
        # as tall as its rows, whatever it was offered: two turns are not drawn in a card for twenty
        height = round(top + bottom + max(1, len(chart.bars)) * timeline_row_px(len(chart.bars)))
    pw, ph = width - left - right, height - top - bottom
    esc = _esc
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12" role="img" '
        f'aria-label="{esc(chart.title)}">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15" font-weight="bold">'
        f"{esc(chart.title)}</text>",
    ]
    if chart.kind == "timeline":
        out += _svg_timeline(chart, left, top, pw, ph)
    else:
        if chart.kind == "hist":
            vals = chart.values or [0.0]
            lo, hi = min(vals), max(vals)
            if hi == lo:
                hi = lo + 1
            w = (hi - lo) / chart.bins
            counts = hist_counts(vals, chart.bins)
            xt, yt = axis_ticks(lo, hi, pw), whole_ticks(max(counts))  # counts of requests: whole ticks
        else:
            xs = [x for s in chart.series for x in s.xs] or [0.0]
            ys = [y for s in chart.series for y in s.ys] or [0.0]
            # room for the point labels; users counted in whole numbers
            xt = whole_ticks(max(xs) * 1.08) if chart.x_whole else axis_ticks(min(0.0, min(xs)), max(xs) * 1.08, pw)
            yt = axis_ticks(min(0.0, min(ys)), max(ys) * 1.08, ph * 2.5)  # stacked: a label's height, not width
        x0, x1, y0, y1 = xt[0], xt[-1], yt[0], yt[-1]

        def sx(v: float) -> float:
            return left + (v - x0) / ((x1 - x0) or 1) * pw

        def sy(v: float) -> float:
            return top + ph - (v - y0) / ((y1 - y0) or 1) * ph

        for t, label in zip(xt, tick_labels(xt), strict=True):
            out.append(f'<line x1="{sx(t):.1f}" y1="{top}" x2="{sx(t):.1f}" y2="{top + ph}" stroke="#eee"/>')
            out.append(f'<text class="tick x" x="{sx(t):.1f}" y="{top + ph + 16}" text-anchor="middle">{label}</text>')
        for t, label in zip(yt, tick_labels(yt), strict=True):
            out.append(f'<line x1="{left}" y1="{sy(t):.1f}" x2="{left + pw}" y2="{sy(t):.1f}" stroke="#eee"/>')
            out.append(f'<text class="tick y" x="{left - 6}" y="{sy(t) + 4:.1f}" text-anchor="end">{label}</text>')
        out.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#444"/>')
        if chart.kind == "hist":
            for i, c in enumerate(counts):
                a, z = sx(lo + i * w), sx(lo + (i + 1) * w)
                tip = f"{lo + i * w:,.4g} to {lo + (i + 1) * w:,.4g} {chart.xlabel}: {c} {chart.ylabel}"
                out.append(
                    f'<rect x="{a:.1f}" y="{sy(c):.1f}" width="{max(z - a - 1, 0.5):.1f}" '
                    f'height="{sy(0) - sy(c):.1f}" fill="{PALETTE[0]}"{_tip(tip)}></rect>'
                )
        else:
            wanted: list[tuple[float, float, str]] = []  # point labels, placed once every point is known
            for i, s in enumerate(chart.series):
                color = PALETTE[i % len(PALETTE)]
                pts = " ".join(f"{sx(x):.1f},{sy(y):.1f}" for x, y in zip(s.xs, s.ys, strict=True))
                if s.style == "line":  # a fitted line: its ends are the details
                    tip = f"{s.name}: {chart.ylabel} {s.ys[0]:,.4g} at {s.xs[0]:,.4g}, "
                    tip += f"{s.ys[-1]:,.4g} at {s.xs[-1]:,.4g}"
                    out.append(
                        f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="3"{_tip(tip)}></polyline>'
                    )
                elif s.style != "points":
                    out.append(f'<polyline points="{pts}" fill="none" stroke="{color}" stroke-width="2"/>')
                for j, (x, y) in enumerate(zip(s.xs, s.ys, strict=True)):
                    if s.style == "line":
                        break
                    tip = f"{s.name}{f' {s.labels[j]}' if j < len(s.labels) else ''}: {chart.xlabel} {x:,.4g}, "
                    tip += f"{chart.ylabel} {y:,.4g}"
                    out.append(f'<circle cx="{sx(x):.1f}" cy="{sy(y):.1f}" r="5" fill="{color}"{_tip(tip)}></circle>')
                    if j < len(s.labels) and s.labels[j]:
                        wanted.append((sx(x), sy(y), s.labels[j]))
            kept: list[Box] = []  # the legend's corner, when there is one
            if len(chart.series) > 1:
                names_w = LABEL_CHAR_PX * max(len(s.name) for s in chart.series)
                kept.append((left, top, left + 30 + names_w, top + 8 + 16 * len(chart.series)))
            for lx, ly, text in place_labels(wanted, (left, top, left + pw, top + ph), kept):
                out.append(f'<text class="point-label" x="{lx:.1f}" y="{ly:.1f}">{esc(text)}</text>')
            if len(chart.series) > 1:
                for i, s in enumerate(chart.series):
                    y = top + 14 + i * 16
                    color = PALETTE[i % len(PALETTE)]
                    out.append(f'<rect x="{left + 10}" y="{y - 9}" width="10" height="10" fill="{color}"/>')
                    out.append(f'<text x="{left + 26}" y="{y}">{esc(s.name)}</text>')
        ylab_y = top + ph / 2
        out.append(
            f'<text x="16" y="{ylab_y}" text-anchor="middle" transform="rotate(-90 16 {ylab_y})">'
            f"{esc(chart.ylabel)}</text>"
        )
    out.append(f'<text x="{left + pw / 2}" y="{height - 12}" text-anchor="middle">{esc(chart.xlabel)}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _svg_timeline(chart: Chart, left: int, top: int, pw: int, ph: int) -> list[str]:
    out: list[str] = []
    esc = _esc
    end = max((b.stop_ms for b in chart.bars), default=0.0) or 1.0
    ticks = axis_ticks(0, end, pw)
    scale = pw / (ticks[-1] or 1)
    row_h = timeline_row_px(len(chart.bars))
    for t, label in zip(ticks, tick_labels(ticks), strict=True):
        x = left + t * scale
        out.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{top + ph}" stroke="#eee"/>')
        out.append(f'<text class="tick x" x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle">{label}</text>')
    for i, b in enumerate(chart.bars):
        y = top + i * row_h
        mark = STOP_MARKS.get(b.status)
        fill = f' fill="{mark[1]}"' if mark else ""
        out.append(
            f'<text x="{left - 4}" y="{y + row_h * 0.65:.1f}" text-anchor="end" font-size="10"{fill}>'
            f"{esc(b.name)}</text>"
        )
        for phase, a, z in b.segments:
            out.append(
                f'<rect class="seg" x="{left + a * scale:.1f}" y="{y + 2:.1f}" width="{max((z - a) * scale, 0.5):.1f}" '
                f'height="{row_h - 4:.1f}" fill="{PHASE_COLORS.get(phase, "#888")}"'
                f"{_tip(f'{b.name}: {phase} {z - a:,.0f} ms (from {a:,.0f} to {z:,.0f} ms)')}></rect>"
            )
        if mark:  # where the turn stopped, and why
            cx, cy = left + b.stop_ms * scale, y + row_h / 2
            tip = f"{b.name}: {b.note or b.status} at {b.stop_ms:,.0f} ms"
            out.append(
                f'<text class="stop {b.status}" x="{cx + 2:.1f}" y="{cy + 5:.1f}" font-size="14" font-weight="bold" '
                f'fill="{mark[1]}"{_tip(tip)}>{mark[0]}</text>'
            )
    legend = list(PHASE_COLORS.items())
    shown = [st for st in STOP_MARKS if any(b.status == st for b in chart.bars)]
    n = len(legend) + len(shown)
    x0, step = (left, 100.0) if n * 100 <= pw else (10, min(100.0, (left + pw - 10) / n))  # fits a narrow chart
    for i, (phase, color) in enumerate(legend):
        x = x0 + i * step
        out.append(f'<rect x="{x:.1f}" y="{top - 16}" width="10" height="10" fill="{color}"/>')
        out.append(f'<text x="{x + 14:.1f}" y="{top - 7}">{phase}</text>')
    for k, st in enumerate(shown):
        x = x0 + (len(legend) + k) * step
        out.append(
            f'<text x="{x}" y="{top - 6}" font-weight="bold" fill="{STOP_MARKS[st][1]}">{STOP_MARKS[st][0]}</text>'
        )
        out.append(f'<text x="{x + 14}" y="{top - 7}">{st}</text>')
    return out


def write_chart(chart: Chart, path_stem: Path, fmt: str = "svg") -> Path:
    """Write ``path_stem.svg`` (or ``.png`` when matplotlib is there; SVG otherwise). Returns the path."""
    if fmt == "png":
        p = path_stem.with_suffix(".png")
        if chart.png(p):
            return p
    p = path_stem.with_suffix(".svg")
    private_files.replace(p, chart.svg().encode("utf-8"))  # 0600, as the run's other files
    return p


def png_available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True
