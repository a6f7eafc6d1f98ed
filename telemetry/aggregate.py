"""Per-level figures of a load run, from ``ttft.turn`` dicts (pure: no I/O, no drawing).

A bench run sends N requests at each level (a closed-loop concurrency or an
open-loop Poisson rate). This module turns the records of one level into the
numbers the metrics reference names (throughput, TTFT/TTFVT/TPOT/ITL/E2E
percentiles, per-user speed, goodput under SLOs), the vLLM bench summary keys,
and a conclusion in plain words across levels.

Timing across requests uses ``extra.bench.sent_at_ms``: the request's send time
in ms since the level started (the load driver stamps it from the same monotonic
clock as the record's own events), so throughput = output tokens / (last
response - first send).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from itertools import pairwise
from typing import Any

import numpy as np

from telemetry.metrics import percentiles
from telemetry.record import chunk_times_ms
from telemetry.wire import KEYS as WAIT_KEYS
from telemetry.wire import WaitSplit

# The client is said to distort what it measures past these (one process).
CLIENT_LAG_P99_MS = 5.0
CLIENT_CPU_PERCENT = 90.0
# "Throughput stops growing" when the next level adds less than this.
PLATEAU_GAIN = 0.10
SAME_SPEED = 0.05  # per-user speed within 5% of the lightest level's: no price paid for the throughput

_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m)?\s*$", re.IGNORECASE)


# --- SLOs ------------------------------------------------------------------------
def parse_duration_ms(text: str) -> float:
    """'500ms' -> 500, '10s' -> 10000, '1.5m' -> 90000, a bare number is ms."""
    m = _DURATION.match(text)
    if not m:
        raise ValueError(f"not a duration: {text!r} (use e.g. 500ms, 10s)")
    value, unit = float(m.group(1)), (m.group(2) or "ms").lower()
    return value * {"ms": 1.0, "s": 1000.0, "m": 60_000.0}[unit]


@dataclass(frozen=True, slots=True)
class SLO:
    """Service-level objectives for goodput; a None bound is not checked."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None

    @classmethod
    def parse(cls, text: str | None) -> SLO | None:
        """``ttft=500ms,tpot=50ms,e2e=10s`` (any subset)."""
        if not text:
            return None
        bounds: dict[str, float] = {}
        for part in text.split(","):
            if not part.strip():
                continue
            key, sep, value = part.partition("=")
            # a percentile (ttft_p90, as --find-capacity takes) does not change a request's own bound
            key = re.sub(r"_p\d{1,2}(\.\d+)?$", "", key.strip().lower())
            if not sep or key not in ("ttft", "tpot", "e2e", "e2el"):
                raise ValueError(f"bad SLO {part!r}: use ttft=500ms,tpot=50ms,e2e=10s")
            bounds["e2e" if key == "e2el" else key] = parse_duration_ms(value)
        return cls(bounds.get("ttft"), bounds.get("tpot"), bounds.get("e2e"))

    def met(self, rec: dict[str, Any]) -> bool:
        """True when the request succeeded and every bound holds; an error is a miss."""
        if rec.get("status") != "ok":
            return False
        m = rec.get("metrics") or {}
        for bound, key in ((self.ttft_ms, "ttft_ms"), (self.tpot_ms, "tpot_ms"), (self.e2e_ms, "e2e_ms")):
            if bound is None:
                continue
            v = m.get(key)
            # A one-token answer has no TPOT: nothing to violate.
            if v is None and key == "tpot_ms" and m.get("ttft_ms") is not None:
                continue
            if v is None or v > bound:
                return False
        return True

    def describe(self) -> str:
        named = (("ttft", self.ttft_ms), ("tpot", self.tpot_ms), ("e2e", self.e2e_ms))
        return ", ".join(f"{n}<={v:g}ms" for n, v in named if v is not None)

    def to_dict(self) -> dict[str, float | None]:
        return asdict(self)


# --- arrivals ----------------------------------------------------------------------
def poisson_schedule(rate: float, n: int, seed: int) -> list[float]:
    """Send offsets in seconds for ``n`` requests of a Poisson process at ``rate``/s.

    Inter-arrival gaps are exponential with mean 1/rate; the first request goes at 0.
    The same seed gives the same schedule.
    """
    if rate <= 0:
        raise ValueError("rate must be > 0")
    if n <= 0:
        return []
    rng = np.random.default_rng(seed)
    gaps = rng.exponential(1.0 / rate, size=n - 1)
    return [0.0, *np.cumsum(gaps).tolist()]


# --- one level -----------------------------------------------------------------------
def _bench(rec: dict[str, Any]) -> dict[str, Any]:
    return ((rec.get("extra") or {}).get("bench")) or {}


def measured(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Drop warm-up requests."""
    return [r for r in records if not _bench(r).get("warmup")]


def _iso_ms(text: str | None) -> float | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text).timestamp() * 1000
    except ValueError:
        return None


def span_ms(records: Sequence[dict[str, Any]]) -> tuple[float, float] | None:
    """(first send, last response) in ms on a common axis, or None with nothing to time."""
    starts: list[float] = []
    ends: list[float] = []
    for r in records:
        sent = _bench(r).get("sent_at_ms")
        if sent is None:
            sent = _iso_ms(r.get("started_at"))
        if sent is None:
            continue
        ev = r.get("events_ms") or {}
        end = ev.get("end") if ev.get("end") is not None else ev.get("last_token")
        starts.append(float(sent))
        ends.append(float(sent) + float(end or 0.0))
    if not starts:
        return None
    return min(starts), max(ends)


def chunk_gaps_ms(rec: dict[str, Any]) -> list[float]:
    """Gaps between consecutive token-bearing chunks (the ITL samples of one request)."""
    times = chunk_times_ms(rec)
    return [b - a for a, b in pairwise(times)]


def _vals(records: Iterable[dict[str, Any]], key: str) -> list[float]:
    return [float(v) for r in records if (v := (r.get("metrics") or {}).get(key)) is not None]


def _std(values: Sequence[float]) -> float | None:
    return float(np.std(values)) if values else None


def client_bottleneck(client: dict[str, Any] | None) -> str | None:
    """A plain sentence when the load generator was too busy, or starved, to time the server faithfully.

    Lag with a busy client process means the client is the bottleneck; lag while this process
    is mostly idle and the whole machine is busy means other programs took the CPU from it.
    Either way every timestamp can be late by about the lag.
    """
    if not client:
        return None
    lag = (client.get("loop_lag_ms") or {}).get("p99")
    cpu = client.get("cpu_percent_max_process")
    if cpu is None:
        cpu = client.get("cpu_percent")
    host = client.get("host_cpu_percent")
    lagging = lag is not None and lag > CLIENT_LAG_P99_MS
    busy = cpu is not None and cpu > CLIENT_CPU_PERCENT
    if not lagging and not busy:
        return None
    parts = []
    if lagging:
        parts.append(f"event-loop lag p99 {lag:.1f} ms > {CLIENT_LAG_P99_MS:g} ms")
    if cpu is not None:
        parts.append(f"client CPU {cpu:.0f}% of a core")
    if lagging and not busy and host is not None and host > CLIENT_CPU_PERCENT:
        return (
            "host-bound: " + "; ".join(parts) + f" while the machine is {host:.0f}% busy: other programs delay "
            "the client, so timings can be late by about the lag"
        )
    return "client-bound: " + "; ".join(parts) + " (timings include client delay; add --workers or lower the load)"


def aggregate_level(
    records: Sequence[dict[str, Any]],
    *,
    level: float | None = None,
    mode: str = "concurrency",
    slo: SLO | None = None,
    client: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """All figures for one level. Warm-up records are ignored."""
    recs = measured(records)
    ok = [r for r in recs if r.get("status") == "ok"]
    failed = len(recs) - len(ok)
    span = span_ms(recs)
    duration_s = (span[1] - span[0]) / 1000 if span else 0.0

    def tok(r: dict[str, Any], k: str) -> int:
        return int((r.get("tokens") or {}).get(k) or 0)

    out_tokens = sum(tok(r, "output") for r in ok)
    in_tokens = sum(tok(r, "input") for r in ok)

    ttft = _vals(ok, "ttft_ms")
    ttfvt = _vals(ok, "ttfvt_ms")
    tpot = _vals(ok, "tpot_ms")
    e2e = _vals(ok, "e2e_ms")
    itl = [g for r in ok for g in chunk_gaps_ms(r)]
    per_user = [1000.0 / t for t in tpot if t > 0]
    sources = sorted({(r.get("tokens") or {}).get("source") or "?" for r in ok})

    good = sum(1 for r in recs if slo.met(r)) if slo else None

    def rate(n: float) -> float | None:
        return n / duration_s if duration_s > 0 else None

    out: dict[str, Any] = {
        "mode": mode,
        "level": level,
        "requests": len(recs),
        "completed": len(ok),
        "failed": failed,
        "errors": _error_counts(recs),
        "duration_s": duration_s,
        "request_throughput": rate(len(ok)),
        "output_throughput": rate(out_tokens),  # completed requests' tokens, as vLLM counts them
        "total_input_tokens": in_tokens,
        "total_output_tokens": out_tokens,
        "token_source": ",".join(sources),
        "ttft_ms": {**percentiles(ttft), "std": _std(ttft)},
        "ttfvt_ms": {**percentiles(ttfvt), "std": _std(ttfvt)},
        "tpot_ms": {**percentiles(tpot), "std": _std(tpot)},
        "itl_ms": {**percentiles(itl), "std": _std(itl)},
        "e2e_ms": {**percentiles(e2e), "std": _std(e2e)},
        "per_user_tokens_per_s": percentiles(per_user),
        "slo": slo.to_dict() if slo else None,
        "good": good,
        "goodput": rate(good) if good is not None else None,
        "goodput_fraction": (good / len(recs)) if good is not None and recs else None,
        "client": client,
        "client_bottleneck": client_bottleneck(client),
        "server": _server_summary(ok),
        "wait_ms": split_summary(ok),  # telemetry.wire: the wait's parts per request, summarised
    }
    out["vllm"] = vllm_summary(out, mode=mode, level=level)
    return out


def split_summary(records: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Per-level wait parts of completed ``ttft.turn`` dicts: p50/p90/p99 of each key and of the
    network and server parts, and how many records had a split; None when none had one.

    Under load, a ``server`` part growing from level to level is the server's queue; a
    ``pool`` part growing is this client's own connection limit.
    """
    splits = [w for r in records if (w := WaitSplit.from_dict((r.get("metrics") or {}).get("wait_ms"))) is not None]
    if not splits:
        return None

    def pct(values: list[float]) -> dict[str, float | None]:
        p = percentiles(values)
        return {k: p[k] for k in ("p50", "p90", "p99")}

    out: dict[str, Any] = {"requests": len(splits)}
    for key in WAIT_KEYS:
        out[key] = pct([getattr(w, key) for w in splits])
    out["network"] = pct([w.network_ms for w in splits])
    out["server_part"] = pct([w.server_ms for w in splits])
    return out


def _error_counts(recs: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in recs:
        if r.get("status") == "ok":
            continue
        kind = ((r.get("error") or {}).get("type")) or r.get("status") or "error"
        counts[kind] = counts.get(kind, 0) + 1
    return counts


def _server_summary(ok: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """Server-reported per-request timings (llama-server ``timings``), kept apart from the client's."""
    prompt_ms: list[float] = []
    per_token_ms: list[float] = []
    for r in ok:
        for data in (r.get("server") or {}).values():
            if not isinstance(data, dict):
                continue
            if data.get("prompt_ms") is not None:
                prompt_ms.append(float(data["prompt_ms"]))
            n, t = data.get("predicted_n"), data.get("predicted_ms")
            if n and t is not None and n > 1:
                per_token_ms.append(float(t) / float(n))
    if not prompt_ms and not per_token_ms:
        return None
    return {"prompt_ms": percentiles(prompt_ms), "predicted_ms_per_token": percentiles(per_token_ms)}


VLLM_METRICS = (("ttft", "ttft_ms"), ("tpot", "tpot_ms"), ("itl", "itl_ms"), ("e2el", "e2e_ms"))


def vllm_summary(agg: dict[str, Any], *, mode: str, level: float | None) -> dict[str, Any]:
    """The level under vLLM ``bench serve`` result names, so existing tooling reads it."""
    dur = agg["duration_s"]
    s: dict[str, Any] = {
        "duration": dur,
        "completed": agg["completed"],
        "failed": agg["failed"],
        "total_input_tokens": agg["total_input_tokens"],
        "total_output_tokens": agg["total_output_tokens"],
        "request_throughput": agg["request_throughput"],
        "output_throughput": agg["output_throughput"],
        "total_token_throughput": ((agg["total_input_tokens"] + agg["total_output_tokens"]) / dur if dur > 0 else None),
        "max_concurrency": int(level) if mode == "concurrency" and level is not None else None,
        "request_rate": level if mode == "rate" else "inf",  # as vLLM writes an unbounded rate
    }
    if agg.get("goodput") is not None:
        s["request_goodput"] = agg["goodput"]
    for short, key in VLLM_METRICS:
        p = agg[key]
        s[f"mean_{short}_ms"] = p["mean"]
        s[f"median_{short}_ms"] = p["p50"]
        s[f"std_{short}_ms"] = p["std"]
        s[f"p90_{short}_ms"] = p["p90"]
        s[f"p99_{short}_ms"] = p["p99"]
    return s


# --- across levels --------------------------------------------------------------------
def _lbl(agg: dict[str, Any]) -> str:
    lv = agg.get("level")
    if agg.get("mode") == "rate":
        return f"{lv:g} req/s"
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


def conclusion(levels: Sequence[dict[str, Any]]) -> str:
    """Where throughput stops growing and what each user pays for it, in plain words."""
    levels = [lv for lv in levels if lv.get("completed")]
    if not levels:
        return "No request completed: nothing to conclude."
    first = levels[0]
    if len(levels) == 1:
        return (
            f"At {_lbl(first)}: {_f(first['output_throughput'], ' tokens/s', 1)} in total, "
            f"{_f(first['per_user_tokens_per_s']['p50'], ' tokens/s', 1)} per user, "
            f"TTFT p50 {_f(first['ttft_ms']['p50'], ' ms')}."
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
    return " ".join(lines)


def _wait_keys(lv: dict[str, Any]) -> dict[str, float | None]:
    """The wait's network and server parts (p50, p99) per level: server growth under load is queueing."""
    w = lv.get("wait_ms")
    if not isinstance(w, dict):
        return {}
    return {
        f"{name}_{p}_ms": w[key][p] for name, key in (("wait_network", "network"), ("wait_server", "server_part"))
        for p in ("p50", "p99")
    }  # fmt: skip


def summary(levels: Sequence[dict[str, Any]], *, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    """The run's summary JSON: metadata, one vLLM-keyed entry per level, and the conclusion.

    With a single level its vLLM keys are also at the top, as ``vllm bench serve`` writes them.
    """
    out: dict[str, Any] = {"schema": "ttft.bench/1", **(meta or {})}
    out["levels"] = [{**lv["vllm"], "mode": lv["mode"], "level": lv["level"], **_wait_keys(lv)} for lv in levels]
    out["details"] = [{k: v for k, v in lv.items() if k != "vllm"} for lv in levels]
    out["conclusion"] = conclusion(levels)
    if len(levels) == 1:
        out.update(levels[0]["vllm"])
    return out


CSV_COLUMNS = (
    "mode",
    "level",
    "requests",
    "completed",
    "failed",
    "duration_s",
    "request_throughput",
    "output_throughput",
    "per_user_tps_p50",
    "ttft_p50_ms",
    "ttft_p90_ms",
    "ttft_p99_ms",
    "ttfvt_p50_ms",
    "tpot_p50_ms",
    "tpot_p90_ms",
    "tpot_p99_ms",
    "itl_p99_ms",
    "e2e_p50_ms",
    "e2e_p99_ms",
    "good",
    "goodput",
    "client_loop_lag_p99_ms",
    "client_cpu_percent",
    "client_bottleneck",
)


def csv_row(agg: dict[str, Any]) -> dict[str, Any]:
    """One flat row per level for the CSV."""
    client = agg.get("client") or {}
    return {
        "mode": agg["mode"],
        # concurrency is a whole number of users (written 4, not 4.0); a rate may be fractional
        "level": agg["level"] if agg["mode"] == "rate" else int(agg["level"]),
        "requests": agg["requests"],
        "completed": agg["completed"],
        "failed": agg["failed"],
        "duration_s": agg["duration_s"],
        "request_throughput": agg["request_throughput"],
        "output_throughput": agg["output_throughput"],
        "per_user_tps_p50": agg["per_user_tokens_per_s"]["p50"],
        "ttft_p50_ms": agg["ttft_ms"]["p50"],
        "ttft_p90_ms": agg["ttft_ms"]["p90"],
        "ttft_p99_ms": agg["ttft_ms"]["p99"],
        "ttfvt_p50_ms": agg["ttfvt_ms"]["p50"],
        "tpot_p50_ms": agg["tpot_ms"]["p50"],
        "tpot_p90_ms": agg["tpot_ms"]["p90"],
        "tpot_p99_ms": agg["tpot_ms"]["p99"],
        "itl_p99_ms": agg["itl_ms"]["p99"],
        "e2e_p50_ms": agg["e2e_ms"]["p50"],
        "e2e_p99_ms": agg["e2e_ms"]["p99"],
        "good": agg["good"],
        "goodput": agg["goodput"],
        "client_loop_lag_p99_ms": (client.get("loop_lag_ms") or {}).get("p99"),
        "client_cpu_percent": client.get("cpu_percent"),
        "client_bottleneck": agg.get("client_bottleneck") or "",
    }


def group_levels(records: Iterable[dict[str, Any]]) -> list[tuple[str, float, list[dict[str, Any]]]]:
    """Split a bench's turn records back into (mode, level, records), in the order levels ran."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in records:
        b = _bench(r)
        if "level" not in b:
            continue
        groups.setdefault((b.get("mode", "concurrency"), float(b["level"])), []).append(r)
    return [(mode, level, recs) for (mode, level), recs in groups.items()]
