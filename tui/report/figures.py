"""The app's figures as :class:`tui.report.charts.Chart` descriptions: the bench's levels (the batching
trade-off, TTFT by load), the probe's fit, histograms, and turn timelines. Each builder only
picks and labels what telemetry already computed; drawing them is left to :mod:`tui.report.charts`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...telemetry.bench.capacity import Objective
from ...telemetry.bench.requests import level_label
from ...telemetry.probe.result import ProbeFit, ProbePoint
from ...telemetry.record import TurnRecord
from ...telemetry.server.gauges import LevelGauges, read_level
from ...telemetry.server.histograms import read_latency
from ...telemetry.typed_read import RecordError, build
from ...telemetry.view.timeline import phase_spans
from ..format import short_spec, turn_label
from .charts import BAR_NAME_W, Bar, Chart, Series


def _label(lv: dict[str, Any]) -> str:
    return level_label(str(lv.get("mode") or "concurrency"), float(lv["level"]))


def tradeoff_chart(
    levels: Sequence[dict[str, Any]], title: str = "Batching trade-off", capacity: dict[str, Any] | None = None
) -> Chart:
    """Aggregate output tokens/s against per-user tokens/s (1/TPOT p50), a point per level.

    With a capacity search's summary (``summary.json``'s ``capacity``): its TPOT objective as the
    per-user speed it allows (a vertical line at 1000 / bound) and the capacity level's point.
    """
    pts = [
        (lv["per_user_tokens_per_s"]["p50"], lv["output_throughput"], _label(lv))
        for lv in levels
        if lv.get("per_user_tokens_per_s", {}).get("p50") and lv.get("output_throughput")
    ]
    series = [Series("levels", [p[0] for p in pts], [p[1] for p in pts], [p[2] for p in pts])]
    caption = "Each point is a level: right = faster for each user, up = more for the server."
    if capacity and pts:
        top = max(p[1] for p in pts) * 1.05
        for obj in _objectives(capacity):
            speed = obj.per_user_tokens_per_s
            if speed is not None:
                name = f"SLO: {obj.describe()} ({speed:.3g} tok/s per user)"
                series.append(Series(name, [speed, speed], [0.0, top]))
        at = next((lv for lv in levels if lv.get("level") == capacity.get("capacity")), None)
        if at is not None and at.get("per_user_tokens_per_s", {}).get("p50") and at.get("output_throughput"):
            label = f"capacity {_label(at)}"
            series.append(Series(label, [at["per_user_tokens_per_s"]["p50"]], [at["output_throughput"]], [label]))
        caption += " The line is the TPOT objective; the capacity point is the most load that met every objective."
    return Chart(
        "xy", title, "per-user tokens/s (1 / TPOT p50)", "total output tokens/s", series, caption=caption,
    )  # fmt: skip


def _objectives(capacity: dict[str, Any]) -> list[Objective]:
    """The capacity summary's objectives, typed; one that does not read (a hand-edited summary) is left out."""
    out = []
    for i, d in enumerate(capacity.get("objectives") or ()):
        try:
            out.append(build(Objective, d, f"capacity.objectives[{i}]"))
        except RecordError:
            continue
    return [o for o in out if o.metric in ("ttft", "tpot", "e2e")]


def _xlabel(levels: Sequence[dict[str, Any]]) -> tuple[str, bool]:
    """The level axis's name, and whether its values are continuous (a rate or a trace's speedup)."""
    rate = any(lv.get("mode") == "rate" for lv in levels)
    trace = any(lv.get("mode") == "trace" for lv in levels)
    return ("requests/s offered" if rate else "trace speedup" if trace else "concurrent users"), rate or trace


def ttft_chart(levels: Sequence[dict[str, Any]]) -> Chart:
    """TTFT p50 and p99 against the level (concurrency, rate or a trace's speedup). With the server's gauges
    (``--server-metrics``) each p50 point is labelled with the requests waiting in its queue."""
    xlabel, rate = _xlabel(levels)
    series = []
    for key in ("p50", "p99"):
        pts = [(float(lv["level"]), lv["ttft_ms"][key], lv) for lv in levels if lv["ttft_ms"].get(key) is not None]
        labels = [_queue_label(lv) for _, _, lv in pts] if key == "p50" else []
        series.append(Series(f"TTFT {key}", [p[0] for p in pts], [p[1] for p in pts], labels if any(labels) else []))
    caption = ""
    if any(read_level(lv) is not None for lv in levels):
        caption = "Labels: requests waiting in the server's queue (mean, by its /metrics); none where none waited."
    return Chart("xy", "TTFT by load", xlabel, "TTFT ms", series, x_whole=not rate, caption=caption)


def _queue_label(lv: dict[str, Any]) -> str:
    g = read_level(lv)
    if g is None or g.waiting is None or g.waiting.mean < 0.05:
        return ""  # an empty queue: a label at each light level would only crowd the chart
    return f"{g.waiting.mean:.1f} waiting"


def queue_chart(levels: Sequence[dict[str, Any]]) -> Chart:
    """The server's own queue and batch against the level (``--server-metrics``): requests waiting (mean
    and most) and running (mean); the caption gives the KV cache's mean use at each level."""
    xlabel, rate = _xlabel(levels)
    read = [(float(lv["level"]), g) for lv in levels if (g := read_level(lv)) is not None]
    picks: list[tuple[str, Callable[[LevelGauges], float | None]]] = [
        ("waiting (mean)", lambda g: g.waiting.mean if g.waiting else None),
        ("waiting (most)", lambda g: g.waiting.max if g.waiting else None),
        ("running (mean)", lambda g: g.running.mean if g.running else None),
    ]
    series = []
    for name, pick in picks:
        pts = [(x, v) for x, g in read if (v := pick(g)) is not None]
        series.append(Series(name, [p[0] for p in pts], [p[1] for p in pts]))
    server = next((g.server for _, g in read if g.server), "server")
    caption = "Requests the server held waiting for a slot, and in its running batch, read every 250 ms."
    kv = [f"{_label(lv)} {g.kv_cache_usage.mean:.0%}" for lv in levels if (g := read_level(lv)) and g.kv_cache_usage]
    if kv:
        caption += " KV cache in use (mean): " + ", ".join(kv) + "."
    return Chart(
        "xy", f"The server's queue by load ({server} /metrics)", xlabel, "requests", series, x_whole=not rate,
        caption=caption,
    )  # fmt: skip


def server_ttft_chart(levels: Sequence[dict[str, Any]]) -> Chart:
    """ttft's TTFT p50 and p99 against the server's own (its histogram's deltas over each level,
    ``--server-metrics``), by level: a gap that widens with load is time spent outside the engine."""
    xlabel, rate = _xlabel(levels)
    series = []
    for key in ("p50", "p99"):
        pts = [(float(lv["level"]), v) for lv in levels if (v := lv["ttft_ms"].get(key)) is not None]
        series.append(Series(f"client TTFT {key}", [p[0] for p in pts], [p[1] for p in pts]))
    for key in ("p50", "p99"):
        srv = []
        for lv in levels:
            lat = read_latency(lv)
            q = lat.kinds.get("ttft") if lat is not None else None
            v = getattr(q, key) if q is not None and q.count else None
            if v is not None:
                srv.append((float(lv["level"]), float(v)))
        series.append(Series(f"server TTFT {key}", [p[0] for p in srv], [p[1] for p in srv]))
    caption = (
        "The server's TTFT is its own histogram over each level (from the request's arrival), good to its "
        "bucket; the distance between the lines is the network, the client and the server's front end."
    )
    return Chart("xy", "Client against server TTFT", xlabel, "TTFT ms", series, x_whole=not rate, caption=caption)


def probe_chart(fit: ProbeFit, title: str = "TTFT by input tokens") -> Chart:
    """``ttft probe``: each measured TTFT against the input tokens the server prefilled, the fitted line,
    and the second sends of a shared prefix at their whole input (their distance below the line is what
    a cache saved). ``fit`` is a telemetry ProbeFit; its line comes from ``fit.prefill_at``."""

    def points(kind: str, x: Callable[[ProbePoint], int | None]) -> list[tuple[float, float]]:
        out = []
        for p in fit.points:
            v = x(p)
            if p.kind == kind and p.status == "ok" and p.ttft_ms is not None and v is not None:
                out.append((float(v), float(p.ttft_ms)))
        return out

    series = []
    for kind, name, x in (
        ("input", "measured", lambda p: p.fresh_input_tokens),
        ("cache_warm", "prefix sent again", lambda p: p.input_tokens),
    ):
        pts = points(kind, x)
        if pts:
            series.append(Series(name, [a for a, _ in pts], [b for _, b in pts], style="points"))
    xs = [x for s in series for x in s.xs]
    ends = [0.0, max(xs, default=0.0)]
    line = [fit.prefill_at(x) for x in ends]
    if xs and line[0] is not None and line[1] is not None:
        series.insert(0, Series("fit", ends, [float(line[0]), float(line[1])], style="line"))
    return Chart("xy", title, "input tokens (uncached)", "TTFT ms", series)


def hist_chart(values: Sequence[float], title: str, xlabel: str, bins: int = 20) -> Chart:
    return Chart("hist", title, xlabel, "requests", values=[float(v) for v in values], bins=bins)


def timeline_chart(records: Sequence[TurnRecord], title: str = "Timeline") -> Chart:
    """One bar per turn: waiting, reasoning, streaming, from its own send (``telemetry.view.timeline.phase_spans``);
    a failed or cancelled turn is marked where it stopped."""
    bars = []
    for r in records:
        segs = [(s.phase, s.start_ms, s.end_ms) for s in phase_spans(r.metrics)]
        turn = turn_label(r.turn_index)
        who = short_spec(r.provider, r.model, BAR_NAME_W - len(turn) - 1)
        bars.append(Bar(f"{turn} {who}", segs, *_stop(r)))
    return Chart("timeline", title, "ms since send", bars=bars)


def _stop(rec: TurnRecord) -> tuple[str, float | None, str]:
    """How a turn ended, when, and why (for the timeline's mark)."""
    status = rec.status or "ok"
    err = rec.error
    note = ""
    if status == "error":
        code = err.status_code if err is not None else None
        note = f"{(err.type if err is not None else None) or 'error'}{f' (HTTP {code})' if code else ''}"
    elif status == "cancelled":
        note = "cancelled"
    return status, rec.metrics.total_ms, note
