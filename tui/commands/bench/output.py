"""What ``ttft bench`` shows: the per-level table (also the report's; its ``queue`` column is the server's
own count of waiting requests, ``--server-metrics``), its server-reported, server-gauge, wait-split and
workload lines, the live progress line on stderr, and the charts of a run's levels."""

from __future__ import annotations

import sys
from typing import Any

from ....backends.load.outcome import Progress
from ....telemetry.bench.agent import agent_sentence
from ....telemetry.bench.probe import probe_sentence
from ....telemetry.bench.requests import level_label
from ....telemetry.cost import fmt_usd
from ....telemetry.server.gauges import read_level
from ....telemetry.server.histograms import read_latency
from ...format import visible_controls
from ...report import charts
from ...report import figures as chart_builders


def _n(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


COLUMNS = (
    ("level", 9), ("req/s", 6), ("tok/s", 7), ("user t/s", 8), ("TTFT p50", 8), ("p90", 6), ("p99", 6),
    ("queue", 5), ("TTFVT50", 7), ("TPOT p50", 8), ("p90", 6), ("p99", 6), ("ITL p99", 7), ("E2E p50", 7), ("p99", 6),
    ("err", 4), ("goodput", 7),
)  # fmt: skip
HEADER = " ".join(f"{name:>{w}}" for name, w in COLUMNS) + "  client"


def level_cells(a: dict[str, Any]) -> list[str]:
    """One level as table cells (the columns of COLUMNS, then the client's health: on a cluster, the
    busiest node's, named)."""
    label = level_label(a["mode"], a["level"])
    client = a.get("client") or {}
    busiest = client.get("busiest") if isinstance(client.get("busiest"), dict) else None
    shown = busiest or client
    lag = (shown.get("loop_lag_ms") or {}).get("p99")
    health = "-" if not client else f"lag {_n(lag, 1)}ms cpu {_n(shown.get('cpu_percent'))}%"
    if busiest is not None:
        health += " busiest " + visible_controls(str(busiest.get("label") or busiest.get("host")))  # a node's name
    flag = a.get("client_bottleneck") or ""
    if flag:
        health += " CLIENT-BOUND" if flag.startswith("client") else " HOST-BUSY"
    t, p, e = a["ttft_ms"], a["tpot_ms"], a["e2e_ms"]
    gp = "-" if a.get("goodput") is None else f"{a['goodput']:.2f}"
    g = read_level(a)
    queue = _n(g.waiting.mean if g is not None and g.waiting is not None else None, 1)  # the server's own count
    return [
        label, _n(a["request_throughput"], 2), _n(a["output_throughput"], 1), _n(a["per_user_tokens_per_s"]["p50"], 1),
        _n(t["p50"]), _n(t["p90"]), _n(t["p99"]), queue, _n(a["ttfvt_ms"]["p50"]), _n(p["p50"], 1), _n(p["p90"], 1),
        _n(p["p99"], 1), _n(a["itl_ms"]["p99"], 1), _n(e["p50"]), _n(e["p99"]), str(a["failed"]), gp, health,
    ]  # fmt: skip


def level_row(a: dict[str, Any]) -> str:
    cells = level_cells(a)
    return " ".join(f"{c:>{w}}" for c, (_, w) in zip(cells, COLUMNS, strict=False)) + "  " + cells[-1]


def probe_line(a: dict[str, Any]) -> str | None:
    """What the one user beside the level's load felt (``--probe-rate``; telemetry.bench.probe), or None."""
    sentence = probe_sentence(a)
    return None if sentence is None else "          " + sentence


def agent_line(a: dict[str, Any]) -> str | None:
    """The level's tool-using turns (``--tool-latency``, ``--mcp``; telemetry.bench.agent), or None."""
    sentence = agent_sentence(a)
    return None if sentence is None else "          " + sentence


def server_line(a: dict[str, Any]) -> str | None:
    """Server-reported figures for a level (llama-server ``timings`` and ``/metrics``), or None."""
    parts = []
    srv = a.get("server") or {}
    prompt = (srv.get("prompt_ms") or {}).get("p50")
    per_tok = (srv.get("predicted_ms_per_token") or {}).get("p50")
    if prompt is not None:
        parts.append(f"prompt p50 {prompt:.0f} ms")
    if per_tok is not None:
        parts.append(f"decode p50 {per_tok:.1f} ms/token")
    m = a.get("server_metrics") or {}
    if m.get("server_decode_tokens_per_s"):
        parts.append(f"/metrics decode {m['server_decode_tokens_per_s']:.1f} tok/s per stream")
    if m.get("n_busy_slots_per_decode"):
        parts.append(f"busy slots per decode {m['n_busy_slots_per_decode']:.2f}")
    if m.get("tokens_predicted_total"):
        parts.append(f"{m['tokens_predicted_total']:.0f} tokens predicted")
    return ("          server-reported: " + ", ".join(parts)) if parts else None


def gauges_line(a: dict[str, Any]) -> str | None:
    """The server's own gauges over a level (``--server-metrics``: its /metrics every 250 ms), or None."""
    g = read_level(a)
    if g is None:
        return None
    parts = []
    for name, st in (("waiting", g.waiting), ("running", g.running)):
        if st is not None:
            parts.append(f"{name} mean {st.mean:.1f} max {st.max:.0f}")
    if g.kv_cache_usage is not None:
        parts.append(f"KV cache mean {g.kv_cache_usage.mean:.0%} max {g.kv_cache_usage.max:.0%}")
    if g.prefix_cache_hit_rate is not None:
        parts.append(f"prefix cache {g.prefix_cache_hit_rate:.0%} of prompt tokens")
    if not parts:
        parts.append("no read during the level (shorter than one interval)")
    reads = f"{g.samples} read{'' if g.samples == 1 else 's'}"
    return f"          server gauges ({g.server or 'server'} /metrics, {reads}): " + ", ".join(parts)


LATENCY_LABELS = (("ttft", "TTFT"), ("queue", "queue"), ("prefill", "prefill"), ("decode", "decode"),
                  ("itl", "ITL"), ("e2e", "e2e"))  # fmt: skip


def _within(v: float | None, bucket: tuple[float, float | None] | None) -> str:
    """A percentile read from a histogram: its value, or what its bucket says where a straight line within
    the bucket would only guess (the first bucket, from 0: "<300"; the +Inf bucket: ">60000")."""
    if v is None or bucket is None:
        return _n(v)
    lo, hi = bucket
    if hi is None:
        return f">{lo:.0f}"
    return f"<{hi:.0f}" if lo <= 0 else _n(v)


def server_latency_line(a: dict[str, Any]) -> str | None:
    """The server's own latency percentiles over a level (its histograms' deltas, ``--server-metrics``), or
    the one line saying why there are none; None without them (not asked for, an older summary)."""
    lat = read_latency(a)
    if lat is None:
        return None
    parts = []
    n = 0
    for key, label in LATENCY_LABELS:
        q = lat.kinds.get(key)
        if q is None or q.count == 0:
            continue
        n = max(n, q.count) if key != "itl" else n  # ITL counts tokens, not requests
        figs = " ".join(f"{key} {_within(v, q.buckets.get(key))}" for key, v in (("p50", q.p50), ("p90", q.p90),
                                                                                  ("p99", q.p99)))  # fmt: skip
        parts.append(f"{label} {figs}")
    if lat.acceptance_rate is not None:
        tokens = f", {lat.mean_acceptance_length:.2f} tokens per step" if lat.mean_acceptance_length else ""
        parts.append(f"drafts accepted {lat.acceptance_rate:.0%}{tokens}")
    pad = "          "
    if not parts:
        return pad + "server latency: " + (lat.note or "no request finished between the reads")
    line = pad + f"server latency ms ({n} requests, its histograms): " + " · ".join(parts)
    return line + (f" ({lat.note})" if lat.note else "")


def wait_line(a: dict[str, Any]) -> str | None:
    """The level's wait split (``telemetry.wire.split_summary``): a growing server part is the server's queue."""
    w = a.get("wait_ms")
    if not isinstance(w, dict):
        return None
    parts = [
        f"{label} p50 {_n(w[key]['p50'])} ms p90 {_n(w[key]['p90'])} ms"
        for key, label in (("network", "network"), ("server_part", "server"), ("pool", "pool"))
        if isinstance(w.get(key), dict)
    ]
    return "          wait split: " + ", ".join(parts)


def ttft_split_line(a: dict[str, Any]) -> str | None:
    """The level's TTFT by the server's own figures (``telemetry.bench.ttft_split``): queue, prefill, rest."""
    s = a.get("ttft_split")
    if not isinstance(s, dict) or not isinstance(s.get("prefill_share"), int | float):
        return None

    def pct(v: object) -> str:
        return f"{v:.0%}" if isinstance(v, int | float) else "?"

    queue = "queue not reported (in the rest)" if s.get("queue_share") is None else f"{pct(s['queue_share'])} queue"
    return (
        f"          TTFT by the server ({s.get('source')}, {s.get('requests')} requests): {queue}, "
        f"{pct(s['prefill_share'])} prefill, {pct(s.get('rest_share'))} rest (network, HTTP, client)"
    )


def workload_lines(a: dict[str, Any]) -> list[str]:
    """What the level's workload shows (``telemetry.bench.workload.figures``): lengths with spread, the
    prefix cache's hits against its misses, the cost of each turn, how late scheduled sends left."""
    out = []
    pad = "          "
    lengths = a.get("lengths") or {}
    drawn = [
        f"{label} {_n(d.get('mean'))} +- {_n(d.get('std'))} ({_n(d.get('min'))}-{_n(d.get('max'))})"
        for key, label in (("input_tokens", "input"), ("output_tokens", "max_tokens"))
        if isinstance(d := lengths.get(key), dict) and d.get("std")
    ]
    if drawn:
        got = lengths.get("output_tokens_received") or {}
        out.append(pad + "lengths drawn: " + ", ".join(drawn) + f"; output received mean {_n(got.get('mean'))}")
    cache = a.get("prefix_cache")
    if cache and cache.get("with_prefix") and not cache.get("cached_input_tokens"):
        out.append(pad + "prefix cache: the server reported no cached input tokens (none, or it does not say)")
    elif cache and cache.get("cached_input_tokens"):
        hit, miss = cache["ttft_hit_ms"], cache["ttft_miss_ms"]
        out.append(
            pad + f"prefix cache: {cache['hits']}/{cache['requests']} hits, {_n(cache['cached_input_tokens_mean'])} "
            f"cached tokens per request; TTFT p50 hit {_n(hit['p50'])} ms ({hit_n(cache, 'hit')}) vs miss "
            f"{_n(miss['p50'])} ms ({hit_n(cache, 'miss')})"
        )
    turns = a.get("by_turn") or []
    if turns:
        cells = []
        for t in turns:
            prefill = t["server_prefill_ms"]["p50"]
            cells.append(
                f"{t['turn']}: TTFT {_n(t['ttft_ms']['p50'])} ms"
                + (f", prefill {_n(prefill)} ms" if prefill is not None else "")
                + f", {_n(t['input_tokens']['p50'])} in"
            )
        out.append(pad + "by turn (p50): " + "; ".join(cells))
    convs = a.get("conversations")
    if convs and convs.get("cut_short"):
        out.append(
            pad + f"conversations: {convs['cut_short']} of {convs['conversations']} cut short by a failed turn "
            "(their later turns were not sent)"
        )
    arr = a.get("arrivals")
    if arr:
        late = arr["late_ms"]
        out.append(
            pad + f"arrivals: sent late p50 {_n(late['p50'], 1)} ms, p99 {_n(late['p99'], 1)} ms, max "
            f"{_n(late['max'], 1)} ms; {arr['on_time_fraction']:.0%} within {arr['on_time_ms']:g} ms of the schedule"
        )
    return out


def hit_n(cache: dict[str, Any], kind: str) -> str:
    n = cache["hits"] if kind == "hit" else cache["requests"] - cache["hits"]
    return f"{n} request{'s' if n != 1 else ''}"


def bench_charts(
    levels: list[dict[str, Any]], title: str, capacity: dict[str, Any] | None = None
) -> list[tuple[str, charts.Chart]]:
    out = [
        ("tradeoff", chart_builders.tradeoff_chart(levels, f"Batching trade-off: {title}", capacity)),
        ("ttft", chart_builders.ttft_chart(levels)),
    ]
    if any(read_level(lv) is not None for lv in levels):  # --server-metrics: the queue beside TTFT
        out.append(("queue", chart_builders.queue_chart(levels)))
    if any((lat := read_latency(lv)) is not None and "ttft" in lat.kinds for lv in levels):
        out.append(("server-ttft", chart_builders.server_ttft_chart(levels)))  # its own histograms
    return out


class ProgressLine:
    """The live one-line progress on stderr: rewritten in place on a terminal, once per level otherwise."""

    def __init__(self, quiet: bool, search: bool = False) -> None:
        self.quiet = quiet
        self.search = search  # --find-capacity: batches of an open-ended search, not "level 2/1"
        self.tty = sys.stderr.isatty()
        self.last = 0.0
        self._finished: tuple[bool, int] | None = None  # the batch whose "N/N done" line is out

    def __call__(self, p: Progress) -> None:
        key = (p.warmup, p.level_index)
        if self.quiet or key == self._finished:
            # With --workers the parent keeps polling until every process has exited: more "N/N done"
            # lines, each with a lower tok/s (the same tokens over a longer time).
            return
        if p.done == p.total:
            self._finished = key
        what = "warm-up" if p.warmup else level_label(p.mode, p.level)
        if p.warmup:
            pos = ""
        elif self.search:
            pos = f" probe batch {p.level_index + 1}"
        else:
            pos = f" level {p.level_index + 1}/{p.levels}"
        tps = p.output_tokens / p.elapsed_s if p.elapsed_s > 0 else 0.0
        flight = "" if p.in_flight < 0 else f", {p.in_flight} in flight"
        if p.nodes:
            flight += f" on {p.nodes} node{'s' if p.nodes != 1 else ''}"
        ttft = "" if p.last_ttft_ms is None else f", last TTFT {p.last_ttft_ms:.0f} ms"
        line = (
            f"[{what}{pos}] {p.done}/{p.total} done{flight}, {p.errors} errors, "
            f"{tps:,.0f} tok/s{ttft}, {p.elapsed_s:.1f} s"
        )
        if self.tty:
            print("\r\033[K" + line, end="", file=sys.stderr, flush=True)
        elif p.done == p.total:
            print(line, file=sys.stderr, flush=True)

    def end(self) -> None:
        if self.tty and not self.quiet:
            print("\r\033[K", end="", file=sys.stderr, flush=True)


def token_line(a: dict[str, Any]) -> str | None:
    """The aggregate's word on the level's token counts (``telemetry.bench.aggregate.token_note``), or None."""
    note = a.get("token_note")
    return f"          tokens: {note}" if isinstance(note, str) and note else None


def cost_line(a: dict[str, Any]) -> str | None:
    """What the level's requests cost (``telemetry.cost``, summed by the aggregate), or None when none was priced."""
    c = a.get("cost_usd")
    if not isinstance(c, dict) or not c.get("priced"):
        return None
    each = c["total_usd"] / c["priced"]
    unpriced = f"; {c['unpriced']} more not priced" if c.get("unpriced") else ""
    return f"          cost: {fmt_usd(c['total_usd'], 3)} for {c['priced']} requests ({fmt_usd(each)} each){unpriced}"
