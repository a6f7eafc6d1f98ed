"""The plain-words conclusion of a load run across its levels: where throughput stops growing
(the knee), what each user pays for it, queueing past it (and, with the server's own gauges, whether
its queue or the prefill took the time to the first token; with its histograms, whether the time
outside the engine grew with load), failures, goodput, a bound client.

It reads the per-level figures of ``telemetry.bench.aggregate.aggregate_level`` (or a summary's, read
back from disk by ``ttft report``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..server.gauges import read_level
from ..server.histograms import Quantiles, read_latency
from .probe import across_levels

# "Throughput stops growing" when the next level adds less than this.
PLATEAU_GAIN = 0.10
SAME_SPEED = 0.05  # per-user speed within 5% of the lightest level's: no price paid for the throughput
QUEUED = 0.5  # requests waiting on average past which a level had a queue (its /metrics, --server-metrics)
GAP_GROWTH_MS = 20.0  # the client-server TTFT gap grew with load when it grew by more than this ...
GAP_GROWTH_SHARE = 0.5  # ... and by more than this share of the lightest level's gap
MIN_READS = 4  # reads during a level (a second at 250 ms) before its gauges decide anything: one read may
# land in the level's last moments, when its queue has drained


def _lbl(agg: dict[str, Any]) -> str:
    lv = agg.get("level")
    if agg.get("mode") == "rate":
        return f"{lv:g} req/s"
    if agg.get("mode") == "trace":
        return f"the trace at {lv:g}x speed"
    return f"{int(lv)} concurrent" if lv is not None else "?"


def _f(v: float | None, unit: str = "", digits: int = 0) -> str:
    return "-" if v is None else f"{v:.{digits}f}{unit}"


def plateau(levels: Sequence[dict[str, Any]]) -> int | None:
    """Index of the level past which aggregate throughput grows by less than PLATEAU_GAIN, or None."""
    tps = [lv.get("output_throughput") or 0.0 for lv in levels]
    for i in range(len(tps) - 1):
        if tps[i] > 0 and max(tps[i + 1 :]) < tps[i] * (1 + PLATEAU_GAIN):
            return i
    return None


def _prefill_ms(lv: dict[str, Any]) -> float | None:
    """The level's prefill as the server timed it (llama-server's ``timings``), p50."""
    return ((lv.get("server") or {}).get("prompt_ms") or {}).get("p50")


def queue_or_prefill(levels: Sequence[dict[str, Any]]) -> str | None:
    """Where the time to the first token went at the heaviest level whose TTFT grew, by the server's own
    gauges: its queue (requests waited for a slot and the wait outgrew the prefill) or the prefill (TTFT
    grew with nothing waiting). None without gauges (or too few reads of them), or when no level's TTFT grew.

    The prefill is the server's own figure where it reports one, else TTFT at the lightest level
    (where nothing waited)."""
    levels = [lv for lv in levels if lv.get("completed")]
    if not levels:
        return None
    base = levels[0]["ttft_ms"]["p50"]
    for lv in reversed(levels):
        g = read_level(lv)
        ttft = lv["ttft_ms"]["p50"]
        if g is None or g.waiting is None or g.samples < MIN_READS or not ttft:
            continue
        server_prefill = _prefill_ms(lv)
        prefill = server_prefill if server_prefill is not None else (base if lv is not levels[0] else None)
        if prefill is None or ttft < 2 * prefill:
            continue  # the first token came about as fast as a prefill alone: nothing to explain
        how = "as the server timed it" if server_prefill is not None else f"TTFT p50 at {_lbl(levels[0])}"
        if g.waiting.mean >= QUEUED:
            return (
                f"At {_lbl(lv)} the server's queue, not the prefill, took the time to the first token: "
                f"{g.waiting.mean:.1f} requests waited for a slot on average (up to {g.waiting.max:.0f}, by its "
                f"own /metrics), and TTFT p50 was {ttft:.0f} ms against a prefill of {prefill:.0f} ms ({how})."
            )
        if g.waiting.max == 0:
            return (
                f"At {_lbl(lv)} no request waited in the server's queue (its own /metrics), yet TTFT p50 was "
                f"{ttft:.0f} ms against a prefill of {prefill:.0f} ms ({how}): the prefill itself took longer, "
                "sharing the server with the other requests' decoding."
            )
        return None
    return None


def _server_ttft(lv: dict[str, Any]) -> Quantiles | None:
    lat = read_latency(lv)
    q = lat.kinds.get("ttft") if lat is not None else None
    return q if q is not None and q.count and q.p50 is not None else None


def client_server_gap(levels: Sequence[dict[str, Any]]) -> str | None:
    """Whether the gap between ttft's TTFT p50 and the server's own (its histogram over the level, timed from
    the request's arrival) grew with load, from the lightest level to the heaviest with both.

    It grew when it grew by more than ``max(GAP_GROWTH_MS, GAP_GROWTH_SHARE * the lightest level's gap)``,
    and still does with each server p50 anywhere in its bucket (a percentile read from a histogram is good
    to its bucket, which can be wider than the gap): the time was then spent outside the engine. None with
    fewer than two levels that have both figures, or when the buckets are too coarse to tell."""
    both = [
        (lv, c, s)
        for lv in levels
        if lv.get("completed") and (c := lv["ttft_ms"].get("p50")) is not None and (s := _server_ttft(lv)) is not None
    ]
    if len(both) < 2:
        return None
    (lo, c0, q0), (hi, c1, q1) = both[0], both[-1]
    s0, s1 = q0.p50 or 0.0, q1.p50 or 0.0
    gap0, gap1 = c0 - s0, c1 - s1
    bar = max(GAP_GROWTH_MS, GAP_GROWTH_SHARE * max(gap0, 0.0))
    if gap1 - gap0 > bar:
        least_s0 = q0.p50_bucket[0] if q0.p50_bucket else s0  # the gap at the lightest level at its widest
        most_s1 = q1.p50_bucket[1] if q1.p50_bucket else s1  # ... and at the heaviest at its narrowest
        if most_s1 is None or (c1 - most_s1) - (c0 - least_s0) <= bar:
            return None  # within the buckets' resolution: no verdict
        return (
            f"The gap between ttft's TTFT and the server's own grew with load: p50 {gap0:.0f} ms at {_lbl(lo)} "
            f"({c0:.0f} ms against the server's {s0:.0f} ms, by its histograms), {gap1:.0f} ms at {_lbl(hi)} "
            f"({c1:.0f} against {s1:.0f}). That time passed before the server's clock started or after its first "
            "token left: the client, the network or the server's front end (HTTP, tokenizing) is the bottleneck "
            "there, not the engine."
        )
    return (
        f"The gap between ttft's TTFT p50 and the server's own (its histograms) did not grow with load "
        f"({gap0:.0f} ms at {_lbl(lo)}, {gap1:.0f} ms at {_lbl(hi)}): what load added to the first token, "
        "the server added."
    )


def conclusion(levels: Sequence[dict[str, Any]]) -> str:
    """Where throughput stops growing and what each user pays for it, in plain words."""
    levels = [lv for lv in levels if lv.get("completed")]
    if not levels:
        return "No request completed: nothing to conclude."
    first = levels[0]
    queue = queue_or_prefill(levels)
    tokens = _token_caveat(levels)
    user = across_levels(levels, _lbl)  # the one user beside the load (--probe-rate), when there was one
    if len(levels) == 1:
        return (
            f"At {_lbl(first)}: {_f(first['output_throughput'], ' tokens/s', 1)} in total, "
            f"{_f(first['per_user_tokens_per_s']['p50'], ' tokens/s', 1)} per user, "
            f"TTFT p50 {_f(first['ttft_ms']['p50'], ' ms')}."
            + (f" {queue}" if queue else "")
            + (f" {user}" if user else "")
            + tokens
        )
    best = max(levels, key=lambda lv: lv.get("output_throughput") or 0.0)
    lines: list[str] = []
    gain = (best["output_throughput"] or 0) / first["output_throughput"] if first["output_throughput"] else None
    knee = plateau(levels)
    if knee is not None and knee < len(levels) - 1:
        k = levels[knee]
        lines.append(
            f"Total throughput grows from {_f(first['output_throughput'], '', 1)} tokens/s at {_lbl(first)} to "
            f"{_f(k['output_throughput'], '', 1)} at {_lbl(k)}, then stops growing (under "
            f"{PLATEAU_GAIN:.0%} more up to {_lbl(levels[-1])}; best {_f(best['output_throughput'], '', 1)})."
        )
    else:
        lines.append(
            f"Total throughput grows from {_f(first['output_throughput'], '', 1)} tokens/s at {_lbl(first)} to "
            f"{_f(best['output_throughput'], '', 1)} at {_lbl(best)}"
            + (f" ({gain:.1f}x)" if gain else "")
            + ("; it had not stopped growing at the last level." if best is levels[-1] else ".")
        )
    ref = levels[knee] if knee is not None else best
    pu0, pu1 = first["per_user_tokens_per_s"]["p50"], ref["per_user_tokens_per_s"]["p50"]
    t0, t1 = first["ttft_ms"]["p50"], ref["ttft_ms"]["p50"]
    if pu0 and pu1 and pu0 / pu1 < 1 + SAME_SPEED:  # no price paid: do not say "1.0x slower"
        lines.append(
            f"Each user keeps their speed: at {_lbl(ref)} per-user speed is {pu1:.1f} tokens/s against {pu0:.1f} "
            f"(TPOT p50 {_f(first['tpot_ms']['p50'], ' ms', 1)} -> {_f(ref['tpot_ms']['p50'], ' ms', 1)}) and "
            f"TTFT p50 {_f(t1, ' ms')} against {_f(t0, ' ms')}."
        )
    elif pu0 and pu1:
        lines.append(
            f"Each user pays for it: at {_lbl(ref)} per-user speed is {pu1:.1f} tokens/s against {pu0:.1f} "
            f"({pu0 / pu1:.1f}x slower, TPOT p50 {_f(first['tpot_ms']['p50'], ' ms', 1)} -> "
            f"{_f(ref['tpot_ms']['p50'], ' ms', 1)}) and TTFT p50 {_f(t1, ' ms')} against {_f(t0, ' ms')}."
        )
    last = levels[-1]
    if last is not ref and last["ttft_ms"]["p50"] and t1 and last["ttft_ms"]["p50"] > 2 * t1:
        lines.append(
            f"Past that the extra load waits in a queue: TTFT p50 reaches {_f(last['ttft_ms']['p50'], ' ms')} at "
            f"{_lbl(last)} while throughput stays near {_f(last['output_throughput'], '', 1)} tokens/s."
        )
    if queue:
        lines.append(queue)
    if (gap := client_server_gap(levels)) is not None:
        lines.append(gap)
    if user:
        lines.append(user)
    failed = [f"{lv['failed']} at {_lbl(lv)}" for lv in levels if lv.get("failed")]
    if failed:
        lines.append("Failed requests: " + ", ".join(failed) + ".")
    if any(lv.get("goodput") is not None for lv in levels):
        gp = max(levels, key=lambda lv: lv.get("goodput") or 0.0)
        lines.append(
            f"Most requests/s within the SLOs: {_f(gp['goodput'], ' req/s', 2)} at {_lbl(gp)} "
            f"({_f((gp.get('goodput_fraction') or 0) * 100, '%')} of its requests met them)."
        )
    bound = [_lbl(lv) for lv in levels if (lv.get("client_bottleneck") or "").startswith("client-bound")]
    if bound:
        lines.append(
            "The client itself was a bottleneck at " + ", ".join(bound) + ": those figures understate the server."
        )
    starved = [_lbl(lv) for lv in levels if (lv.get("client_bottleneck") or "").startswith("host-bound")]
    if starved:
        lines.append(
            "Other programs kept the machine busy at " + ", ".join(starved) + ": the client woke late "
            "(see loop lag), so small timings there carry that delay."
        )
    return " ".join(lines) + tokens


def _token_caveat(levels: Sequence[dict[str, Any]]) -> str:
    """ " Token counts at c=4: ..." for the levels whose tokens/s rest on estimates or implausible counts
    (``telemetry.bench.aggregate.token_note``), so no throughput above stands without it."""
    noted = [lv for lv in levels if lv.get("token_note")]
    if not noted:
        return ""
    return f" Token counts at {', '.join(_lbl(lv) for lv in noted)}: {noted[0]['token_note']}."
