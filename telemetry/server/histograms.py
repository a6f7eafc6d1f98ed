"""The server's own latency histograms over a bench level: percentiles from bucket deltas, as Prometheus reads them.

vLLM, SGLang and TGI publish request latencies as Prometheus histograms: cumulative counts of
observations at or under each bucket bound (``le``), since the server started. Read just before a
level and just after it, the difference of each bucket is that level's histogram alone, and
:func:`quantile` reads a percentile from it the way Prometheus' ``histogram_quantile`` does: the
bucket that holds the rank, and a straight line within it (the ``+Inf`` bucket gives the highest
finite bound). A percentile is therefore good to one bucket, and ``count`` is exact.

:data:`TABLE` maps each server's names onto six kinds ttft reports (``ttft``, ``queue``,
``prefill``, ``decode``, ``itl``, ``e2e``), and its speculative-decoding counters onto drafts, draft
tokens and accepted tokens (vLLM). A server that publishes no histogram of a kind (llama-server
none at all) is said in the level's ``latency_note``, never left a silent blank. So is a level whose
counters went backwards between the reads (a restarted server): no figures for it then.

Everything read is untrusted: NaN, negative or non-monotonic counts, unknown bounds and text that
is not Prometheus give a note, never an exception. Pure: the HTTP is ``backends``'.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import TtftError

KINDS = ("ttft", "queue", "prefill", "decode", "itl", "e2e")
QUANTILES = (("p50", 0.50), ("p90", 0.90), ("p99", 0.99))
MAX_BUCKETS = 512  # more bounds than any server uses: the rest of a hostile text is not read


@dataclass(frozen=True, slots=True)
class Names:
    """One server's names: per kind, its histograms (the first one present is read), in seconds."""

    server: str
    latency: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    spec_drafts: tuple[str, ...] = ()
    spec_draft_tokens: tuple[str, ...] = ()
    spec_accepted: tuple[str, ...] = ()
    why_none: str = ""  # said when the server publishes no latency histogram at all

    def histogram_names(self) -> tuple[str, ...]:
        return tuple(n for names in self.latency.values() for n in names)

    def counter_names(self) -> tuple[str, ...]:
        return (*self.spec_drafts, *self.spec_draft_tokens, *self.spec_accepted)


# Each server's names, checked against its source: vLLM's v1 metrics (``vllm/v1/metrics/loggers.py``; the
# older ``time_per_output_token_seconds`` before it was renamed ITL), SGLang's ``srt/metrics/collector.py``
# (its queue histogram is ``queue_time_seconds``), TGI's router (``tgi_request_*_duration``, seconds; its
# per-token figure is each request's mean time per token, so its ITL percentiles are of request means).
TABLE: Mapping[str, Names] = {
    "vllm": Names(
        "vllm",
        latency={
            "ttft": ("vllm:time_to_first_token_seconds",),
            "queue": ("vllm:request_queue_time_seconds",),
            "prefill": ("vllm:request_prefill_time_seconds",),
            "decode": ("vllm:request_decode_time_seconds",),
            "itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
            "e2e": ("vllm:e2e_request_latency_seconds",),
        },
        spec_drafts=("vllm:spec_decode_num_drafts_total",),
        spec_draft_tokens=("vllm:spec_decode_num_draft_tokens_total",),
        spec_accepted=("vllm:spec_decode_num_accepted_tokens_total",),
    ),
    "sglang": Names(
        "sglang",
        latency={
            "ttft": ("sglang:time_to_first_token_seconds",),
            "queue": ("sglang:queue_time_seconds",),
            "itl": ("sglang:inter_token_latency_seconds", "sglang:time_per_output_token_seconds"),
            "e2e": ("sglang:e2e_request_latency_seconds",),
        },
    ),
    "tgi": Names(
        "tgi",
        latency={
            "queue": ("tgi_request_queue_duration",),
            "itl": ("tgi_request_mean_time_per_token_duration",),
            "e2e": ("tgi_request_duration",),
        },
    ),
    "llama-server": Names(
        "llama-server", why_none="llama-server publishes no latency histograms (its counters are read instead)"
    ),
}
_WANTED = sorted(
    {n for names in TABLE.values() for n in (*names.histogram_names(), *names.counter_names())}, key=len, reverse=True
)
# The lines of those names only (a sample with its suffix, or its HELP/TYPE line), found from the newline
# before each, as ``telemetry.server.gauges`` finds its own: the parser then reads a few hundred lines.
_LINES = re.compile(
    r"\n(?:# (?:HELP|TYPE) )?(?:"
    + "|".join(re.escape(n) for n in _WANTED)
    + r")(?:_bucket|_count|_sum)?(?:[{ \t][^\n]*)?(?=\n)"
)


class Unreadable(TtftError, ValueError):
    """The histogram lines are not Prometheus text."""


@dataclass(frozen=True, slots=True)
class Histogram:
    """Cumulative counts at each bound (ascending; ``inf`` last when the server sent its ``+Inf`` bucket),
    and the sum of the observations (seconds; None when not sent)."""

    buckets: tuple[tuple[float, float], ...]
    total: float | None = None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One read's histograms by kind, and its speculative-decoding counters by name."""

    latency: Mapping[str, Histogram] = field(default_factory=dict)
    counters: Mapping[str, float] = field(default_factory=dict)
    note: str = ""  # what could not be read, in words


def _families(text: str) -> Any:
    from prometheus_client.parser import text_string_to_metric_families  # see telemetry.server.gauges._families

    return text_string_to_metric_families(text)


def _ours(labels: Mapping[str, str], ranks: Sequence[str]) -> bool:
    return all(labels.get(r, "0") == "0" for r in ranks)


def _bound(le: str) -> float | None:
    try:
        b = float(le)
    except ValueError:
        return None
    return None if math.isnan(b) or b < 0 else b  # a latency has no bound below zero (nor does -Inf read)


def snapshot(text: str, server: str, ranks: Sequence[str] = ()) -> Snapshot:
    """The histograms and counters of ``server``'s names in one ``/metrics`` text, summed over label sets
    (engines, models) but for other ranks than 0 (``ranks``: tensor-parallel copies of one scheduler).
    Never raises: what does not read is said in the snapshot's ``note``."""
    names = TABLE.get(server)
    if names is None or not names.latency:
        return Snapshot()
    kept = "".join(m.group(0) for m in _LINES.finditer(f"\n{text}\n"))
    if not kept:
        return Snapshot()
    buckets: dict[str, dict[float, float]] = {}
    sums: dict[str, float] = {}
    scalars: dict[str, float] = {}
    bad = 0
    try:
        for family in _families(kept[1:] + "\n"):
            for s in family.samples:
                v = float(s.value)
                if not math.isfinite(v) or v < 0 or not _ours(s.labels, ranks):
                    bad += not math.isfinite(v) or v < 0
                    continue
                if s.name.endswith("_bucket") and "le" in s.labels:
                    b = _bound(s.labels["le"])
                    base = s.name.removesuffix("_bucket")
                    got = buckets.setdefault(base, {})
                    if b is None or (b not in got and len(got) >= MAX_BUCKETS):
                        bad += 1
                        continue
                    got[b] = got.get(b, 0.0) + v
                elif s.name.endswith("_sum"):
                    base = s.name.removesuffix("_sum")
                    sums[base] = sums.get(base, 0.0) + v
                else:
                    scalars[s.name] = scalars.get(s.name, 0.0) + v
    except (ValueError, IndexError, KeyError) as exc:  # the parser's errors for malformed lines
        return Snapshot(note=f"its histograms are not Prometheus text ({str(exc)[:60]})")
    latency: dict[str, Histogram] = {}
    for kind in KINDS:
        for name in names.latency.get(kind, ()):
            if buckets.get(name):
                latency[kind] = Histogram(tuple(sorted(buckets[name].items())), sums.get(name))
                break
    counters = {n: scalars[n] for n in names.counter_names() if n in scalars}
    note = f"{bad} histogram sample(s) NaN, negative or with an unreadable bound were left out" if bad else ""
    return Snapshot(latency, counters, note)


# --- a level ------------------------------------------------------------------------------------
class Reset(TtftError, ValueError):
    """A bucket's count went backwards between the reads: the server restarted (or changed its buckets)."""


def delta(before: Histogram, after: Histogram) -> Histogram:
    """The observations between two reads. Raises :class:`Reset` when a count went down or the bounds
    differ (a restarted server: its counts began again, so the difference means nothing)."""
    b0 = dict(before.buckets)
    if [le for le, _ in before.buckets] != [le for le, _ in after.buckets]:
        raise Reset("its buckets changed between the reads")
    out = []
    for le, n in after.buckets:
        d = n - b0[le]
        if d < 0:
            raise Reset("its counts went down between the reads (a restart?)")
        out.append((le, d))
    total = after.total - before.total if after.total is not None and before.total is not None else None
    return Histogram(tuple(out), total if total is None or total >= 0 else None)


def count(h: Histogram) -> float:
    """Observations in the histogram: its ``+Inf`` bucket (its largest cumulative count)."""
    return max((n for _, n in h.buckets), default=0.0)


def _locate(q: float, h: Histogram) -> tuple[list[tuple[float, float]], int, float] | None:
    """The cumulative counts (dips lifted), the index of the bucket holding rank ``q * count``, and the rank."""
    if not 0 <= q <= 1 or math.isnan(q):
        return None
    bs = list(h.buckets)
    if len(bs) < 2 or bs[-1][0] != math.inf:
        return None
    fixed: list[tuple[float, float]] = []
    top = 0.0
    for le, n in bs:
        top = max(top, n)
        fixed.append((le, top))
    observations = fixed[-1][1]
    if observations <= 0:
        return None
    rank = q * observations
    return fixed, next(i for i, (_, n) in enumerate(fixed) if n >= rank), rank


def quantile(q: float, h: Histogram) -> float | None:
    """The ``q`` quantile (0-1) as Prometheus' ``histogram_quantile`` gives it, in the histogram's unit;
    None where it gives NaN (no observation, no ``+Inf`` bucket, fewer than two buckets).

    The rank ``q * count`` falls in the first bucket whose cumulative count reaches it; the value is read
    on a straight line between that bucket's lower bound (0 for the first one, when its bound is positive)
    and its upper bound. A rank in the ``+Inf`` bucket gives the highest finite bound. Cumulative counts
    that dip (a hostile text; float error) are lifted to the largest before them, as Prometheus does."""
    found = _locate(q, h)
    if found is None:
        return None
    fixed, i, rank = found
    if i == len(fixed) - 1:
        return fixed[-2][0]
    end, n_end = fixed[i]
    if i == 0 and end <= 0:
        return end
    start, n_start = (0.0, 0.0) if i == 0 else fixed[i - 1]
    in_bucket = n_end - n_start
    if in_bucket <= 0:
        return end
    return start + (end - start) * ((rank - n_start) / in_bucket)


def bucket(q: float, h: Histogram) -> tuple[float, float] | None:
    """The bounds of the bucket that holds the ``q`` quantile: the true value lies within them (the upper
    one ``inf`` for the ``+Inf`` bucket). What a percentile read from a histogram is good to."""
    found = _locate(q, h)
    if found is None:
        return None
    fixed, i, _ = found
    lower = min(0.0, fixed[0][0]) if i == 0 else fixed[i - 1][0]
    return lower, fixed[i][0]


def _figures(h: Histogram) -> dict[str, Any]:
    n = count(h)
    out: dict[str, Any] = {}
    for key, q in QUANTILES:
        v = quantile(q, h)
        out[key] = None if v is None else round(v * 1000, 3)
    for key, q in QUANTILES:  # what each is good to: the true value lies within its bucket (None: +Inf)
        b = bucket(q, h)
        out[f"{key}_bucket_ms"] = None if b is None else [b[0] * 1000, None if math.isinf(b[1]) else b[1] * 1000]
    out["mean"] = round(h.total / n * 1000, 3) if h.total is not None and n > 0 else None
    out["count"] = round(n)  # whole observations (a float only in the exposition's spelling)
    return out


def _speculative(before: Mapping[str, float], after: Mapping[str, float], names: Names) -> dict[str, float] | None:
    """Drafts, draft tokens and accepted tokens over the level, with the acceptance rate (accepted / draft
    tokens) and mean acceptance length (1 + accepted / drafts: the tokens each verifying step yields)."""

    def grew(candidates: tuple[str, ...]) -> float | None:
        for n in candidates:
            if n in after:  # a counter appears with its first increment
                return after[n] - before.get(n, 0.0)
        return None

    drafts, drafted, accepted = grew(names.spec_drafts), grew(names.spec_draft_tokens), grew(names.spec_accepted)
    if drafts is None or drafted is None or accepted is None:
        return None
    if min(drafts, drafted, accepted) < 0 or accepted > drafted:
        return None  # a restart, or counts that contradict each other
    out: dict[str, float] = {"drafts": drafts, "draft_tokens": drafted, "accepted_tokens": accepted}
    if drafted > 0:
        out["acceptance_rate"] = round(accepted / drafted, 4)
    if drafts > 0:
        out["mean_acceptance_length"] = round(1 + accepted / drafts, 4)
    return out


def level_latency(server: str, before: Snapshot | None, after: Snapshot | None) -> dict[str, Any]:
    """One level's ``latency`` (each kind's p50/p90/p99/mean in ms and its ``count``), ``speculative``
    where the server counts drafts, and ``latency_note``: one line saying what is missing and why."""
    names = TABLE.get(server)
    if names is None or not names.latency:
        why = names.why_none if names is not None else f"{server or 'this server'} publishes no latency histograms"
        return {"latency": {}, "latency_note": why}
    if before is None or after is None:
        return {"latency": {}, "latency_note": "the read before or after the level failed: no histograms for it"}
    out: dict[str, Any] = {}
    latency: dict[str, Any] = {}
    notes = [n for n in (before.note, after.note) if n]
    reset: list[str] = []
    for kind in KINDS:
        h0, h1 = before.latency.get(kind), after.latency.get(kind)
        if h1 is None:
            continue
        if h0 is None:  # its series appear with their first observation (prometheus-client's labelled ones)
            h0 = Histogram(tuple((le, 0.0) for le, _ in h1.buckets), 0.0)
        try:
            d = delta(h0, h1)
        except Reset as exc:
            reset.append(f"{kind} ({exc})")
            continue
        latency[kind] = _figures(d)
        if latency[kind]["count"] and latency[kind]["p50"] is None:
            notes.append(f"{kind} has no finite bucket to read a percentile in")
    if reset:
        notes.append("no figures for " + ", ".join(reset) + ": the counts began again during the level")
    absent = [k for k in KINDS if k not in latency and not any(r.startswith(k + " ") for r in reset)]
    if absent:
        mapped = [k for k in absent if k in names.latency]
        unmapped = [k for k in absent if k not in names.latency]
        if unmapped:
            notes.append(f"{server} publishes no {', '.join(unmapped)} histogram")
        if mapped:
            notes.append(f"its /metrics had no {', '.join(mapped)} histogram")
    out["latency"] = latency
    spec = _speculative(before.counters, after.counters, names)
    if spec is not None:
        out["speculative"] = spec
    if notes:
        out["latency_note"] = "; ".join(notes)
    return out


# --- read back (a summary from disk: untrusted) --------------------------------------------------
@dataclass(frozen=True, slots=True)
class Quantiles:
    p50: float | None
    p90: float | None
    p99: float | None
    count: int
    # the bounds each true value lies within (an upper None: the +Inf bucket), by "p50", "p90", "p99"
    buckets: Mapping[str, tuple[float, float | None]] = field(default_factory=dict)

    @property
    def p50_bucket(self) -> tuple[float, float | None] | None:
        return self.buckets.get("p50")


@dataclass(frozen=True, slots=True)
class LevelLatency:
    """A level's server latency as the summary line, the chart and the conclusion read it."""

    kinds: Mapping[str, Quantiles]
    note: str
    acceptance_rate: float | None = None
    mean_acceptance_length: float | None = None


def _number(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
        return None
    return float(v)


def _text(v: object, limit: int = 240) -> str:
    s = v[:limit] if isinstance(v, str) else ""
    return "".join(ch if ch.isprintable() else "\ufffd" for ch in s)


def _bounds(v: object) -> tuple[float, float | None] | None:
    if not isinstance(v, list | tuple) or len(v) != 2:
        return None
    lo, hi = _number(v[0]), _number(v[1])
    if lo is None or (hi is not None and hi < lo) or (hi is None and v[1] is not None):
        return None
    return lo, hi


def read_latency(level: Mapping[str, Any]) -> LevelLatency | None:
    """A level's server latency (``server_metrics.latency``), or None when it has none to read."""
    m = level.get("server_metrics")
    if not isinstance(m, Mapping) or "latency" not in m:
        return None
    lat = m.get("latency")
    kinds: dict[str, Quantiles] = {}
    for kind in KINDS:
        k = lat.get(kind) if isinstance(lat, Mapping) else None
        if not isinstance(k, Mapping):
            continue
        n = _number(k.get("count"))
        p50, p90, p99 = (_number(k.get(key)) for key in ("p50", "p90", "p99"))
        bounds = {key: b for key, _ in QUANTILES if (b := _bounds(k.get(f"{key}_bucket_ms"))) is not None}
        kinds[kind] = Quantiles(p50, p90, p99, int(n or 0), bounds)
    spec = m.get("speculative")
    rate = _number(spec.get("acceptance_rate")) if isinstance(spec, Mapping) else None
    length = _number(spec.get("mean_acceptance_length")) if isinstance(spec, Mapping) else None
    return LevelLatency(kinds, _text(m.get("latency_note")), rate if rate is None or rate <= 1 else None, length)
