"""The user under load (``ttft bench --probe-rate R``): one extra chat user beside each level's load,
when it sends and what it felt (pure: no I/O).

The probe user sends one plain chat request at a time, ``1 / R`` seconds apart: its first at half a
gap into the level (not in the load's opening burst, which a real user would rarely hit), each next
one a gap after the one before it, or as soon as that one's answer ends if it took longer (one user
never waits on their own earlier question). It stops sending when the load's requests end. Its
requests are tagged ``extra.bench.probe`` and kept out of every figure of the load; their own
percentiles are the level's ``probe`` block, read back here from a summary on disk as untrusted.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from ..metrics import percentiles

MAX_RATE = 1000.0  # requests/s past which a "user" is a second load, not one person
# Probe requests are numbered apart from the load's and the warm-up's (their synthetic text is drawn
# from the number): PROBE_INDEX + level * PER_LEVEL + k.
PROBE_INDEX = 10**9
PER_LEVEL = 10**6


def check_rate(rate: float) -> str | None:
    """Why ``rate`` cannot be a probe user's requests/s (a phrase for ``--probe-rate``'s error), or None."""
    if math.isnan(rate) or rate <= 0:
        return f"expected requests/s above 0, got {rate:g}"
    if rate > MAX_RATE:
        return f"{rate:g}/s is a load, not one user: at most {MAX_RATE:g}/s"
    return None


def first_at_s(rate: float) -> float:
    """When the first probe leaves, in seconds from the level's start: half a gap in."""
    return 0.5 / rate


def next_at_s(previous_at_s: float, ended_at_s: float, rate: float) -> float:
    """When the next probe leaves: a gap after the previous one left, or when its answer ended if later."""
    return max(previous_at_s + 1.0 / rate, ended_at_s)


def probe_index(level_index: int, k: int) -> int:
    """The run-wide number of level ``level_index``'s ``k``-th probe request."""
    return PROBE_INDEX + max(level_index, 0) * PER_LEVEL + k


def _dist(values: Sequence[float]) -> dict[str, float | None]:
    p = percentiles(values)
    return {"p50": p.p50, "p90": p.p90, "p99": p.p99, "mean": p.mean, "max": p.max}


def probe_figures(recs: Sequence[Any], rate: float | None, users: int = 1) -> dict[str, Any]:
    """The probe user's figures over one level, from its ``TurnRecord``s: ``rate``, ``requests``, ``ok``,
    ``errors``, TTFT/TPOT/E2E percentiles (ms) over the completed ones; ``users``: the probe streams the
    records came from (several when runs are merged)."""
    ok = [r for r in recs if r.status == "ok"]
    out: dict[str, Any] = {
        "rate": rate,
        "users": users,
        "requests": len(recs),
        "ok": len(ok),
        "errors": len(recs) - len(ok),
        "ttft_ms": _dist([v for r in ok if (v := r.metrics.ttft_ms) is not None]),
        "tpot_ms": _dist([v for r in ok if (v := r.metrics.tpot_ms) is not None]),
        "e2e_ms": _dist([v for r in ok if (v := r.metrics.e2e_ms) is not None]),
    }
    if not recs and rate:
        out["note"] = f"no probe was sent: the load ended before the first one's moment ({first_at_s(rate):g} s in)"
    return out


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def read_probe(level: dict[str, Any]) -> dict[str, Any] | None:
    """A level's ``probe`` block as the tables print it, or None: absent, or not of its shape (a summary
    from disk is untrusted: a figure that is not a number reads as none, never a traceback)."""
    p = level.get("probe")
    if not isinstance(p, dict):
        return None
    users = _num(p.get("users"))
    out: dict[str, Any] = {
        "rate": _num(p.get("rate")),
        "users": int(users) if users is not None and users >= 1 else 1,
        "requests": int(_num(p.get("requests")) or 0),
        "ok": int(_num(p.get("ok")) or 0),
        "errors": int(_num(p.get("errors")) or 0),
    }
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        d = p.get(key)
        out[key] = (
            {q: _num(d.get(q)) for q in ("p50", "p90", "p99")}
            if isinstance(d, dict)
            else dict.fromkeys(("p50", "p90", "p99"))
        )
    return out


def ms(v: float | None) -> str:
    """A latency as people say it: ``812 ms``, ``1.4 s``."""
    if v is None:
        return "-"
    if v < 10:
        return f"{v:.1f} ms"
    return f"{v:.0f} ms" if v < 1000 else f"{v / 1000:.1f} s"


def who(p: dict[str, Any]) -> str:
    """``one user at 0.5 req/s`` (``3 probe users at 0.5 req/s each`` for merged runs)."""
    rate = f"{p['rate']:g} req/s" if p.get("rate") else "its rate"
    return f"one user at {rate}" if p["users"] <= 1 else f"{p['users']} probe users at {rate} each"


def probe_sentence(level: dict[str, Any]) -> str | None:
    """ "one user at 0.5 req/s beside this load: TTFT p50 812 ms (p90 1.4 s), TPOT p50 41 ms (5 requests)",
    or None for a level without a probe user."""
    p = read_probe(level)
    if p is None:
        return None
    head = f"{who(p)} beside this load: "
    if not p["requests"]:
        return head + "no probe was sent (the load ended before the first one's moment)"
    n = f"{p['requests']} request{'s' if p['requests'] != 1 else ''}"
    errors = f", {p['errors']} failed" if p["errors"] else ""
    if not p["ok"]:
        return head + f"every request failed ({n})"
    t, tp = p["ttft_ms"], p["tpot_ms"]
    return head + f"TTFT p50 {ms(t['p50'])} (p90 {ms(t['p90'])}), TPOT p50 {ms(tp['p50'])} ({n}{errors})"


def csv_cells(level: dict[str, Any]) -> dict[str, float | int | None]:
    """The probe user's columns of ``levels.csv`` (empty without one)."""
    p = read_probe(level)
    if p is None:
        return dict.fromkeys(CSV_COLUMNS)
    return {
        "probe_rate": p["rate"],
        "probe_requests": p["requests"],
        "probe_errors": p["errors"],
        "probe_ttft_p50_ms": p["ttft_ms"]["p50"],
        "probe_ttft_p90_ms": p["ttft_ms"]["p90"],
        "probe_ttft_p99_ms": p["ttft_ms"]["p99"],
        "probe_tpot_p50_ms": p["tpot_ms"]["p50"],
        "probe_tpot_p90_ms": p["tpot_ms"]["p90"],
        "probe_e2e_p50_ms": p["e2e_ms"]["p50"],
        "probe_e2e_p90_ms": p["e2e_ms"]["p90"],
    }


CSV_COLUMNS = (
    "probe_rate",
    "probe_requests",
    "probe_errors",
    "probe_ttft_p50_ms",
    "probe_ttft_p90_ms",
    "probe_ttft_p99_ms",
    "probe_tpot_p50_ms",
    "probe_tpot_p90_ms",
    "probe_e2e_p50_ms",
    "probe_e2e_p90_ms",
)


def across_levels(levels: Sequence[dict[str, Any]], label: Any) -> str | None:
    """The conclusion's sentence: what the one user felt from the lightest level to the heaviest, or None
    without a probe user. ``label`` names a level (the conclusion's own wording)."""
    felt = [(lv, p) for lv in levels if (p := read_probe(lv)) is not None and p["ttft_ms"]["p50"] is not None]
    if not felt:
        return None
    (lo, p0), (hi, p1) = felt[0], felt[-1]
    head = f"{who(p0)[0].upper()}{who(p0)[1:]} beside the load"
    if lo is hi:
        return f"{head} waited TTFT p50 {ms(p0['ttft_ms']['p50'])} at {label(lo)}, TPOT p50 {ms(p0['tpot_ms']['p50'])}."
    return (
        f"{head} waited TTFT p50 {ms(p0['ttft_ms']['p50'])} at {label(lo)} and {ms(p1['ttft_ms']['p50'])} at "
        f"{label(hi)} (TPOT p50 {ms(p0['tpot_ms']['p50'])} -> {ms(p1['tpot_ms']['p50'])})."
    )
