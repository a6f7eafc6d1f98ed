"""The server's own gauges: its queue, its batch and its KV cache, as its Prometheus ``/metrics`` says.

A serving engine knows things no client can measure: how many requests it is running, how many
wait for a slot, how full its KV cache is, how much of the prompts it served from its prefix cache.
vLLM, SGLang, llama-server (``--metrics``) and TGI each publish these under their own names; a
:class:`Dialect` maps each onto four names ttft uses everywhere:

- ``running``: requests in the running batch;
- ``waiting``: requests queued for a slot (what TTFT pays before any prefill starts);
- ``kv_cache_usage``: the share of the KV cache in use, 0-1 (llama-server and TGI publish none);
- ``prefix_cache_hit_rate``: the share of prompt tokens served from the prefix cache, from the
  server's counters over an interval (vLLM, llama-server) or its own running rate (SGLang).

The text is parsed by ``prometheus-client``'s parser. Before it, one regular expression keeps only
the lines of the names mapped here: a vLLM endpoint is mostly histograms, and parsing all of an
80 KB one takes ~20-30 ms of CPU (held under the GIL the load's event loop needs), the kept lines
~0.5 ms (tests/benchmarks/server_metrics_cost.py).

:func:`level_summary` turns one level's scrapes into ``summary.json``'s ``server_metrics``;
:func:`read_level` reads one back (from disk: untrusted) for the table, the charts and the
conclusion. A chat turn keeps one reading under its record's ``server[GAUGES_SOURCE]``
(:func:`turn_entry`, read back by :func:`turn_gauges`). Pure: the HTTP is ``backends``'.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from ..errors import TtftError
from . import histograms as hist

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

GAUGES_SOURCE = "gauges"  # the key of a turn's reading under its record's ``server``
GAUGE_NAMES = ("running", "waiting", "kv_cache_usage")
LLAMACPP_PREFIX = "llamacpp:"  # llama-server: every one of its names is kept, for its counters over a level
CHECK_CHARS = 65_536  # how much of an unmatched text is parsed to tell "not Prometheus" from "no known names"

Labels = Mapping[str, str]
Samples = dict[str, list[tuple[Labels, float]]]  # sample name -> (labels, value) of each series


class NotPrometheus(TtftError, ValueError):
    """The text is not Prometheus exposition (an HTML error page, JSON, a truncated body)."""


@dataclass(frozen=True, slots=True)
class Dialect:
    """One server's names for the gauges. For each gauge the first name the endpoint has is read."""

    name: str  # what ttft calls the server: "vllm", "sglang", "llama-server", "tgi"
    running: tuple[str, ...]
    waiting: tuple[str, ...]
    kv_cache_usage: tuple[str, ...] = ()  # 0-1
    prefix_hits: tuple[str, ...] = ()  # counters of prompt tokens found in the prefix cache
    prefix_queries: tuple[str, ...] = ()  # counters whose sum is the hits' denominator
    prefix_hit_rate: tuple[str, ...] = ()  # the server's own rate (0-1), where it has no counters
    # Series labelled with another rank than "0" repeat rank 0's figures (tensor-parallel workers of
    # one scheduler): left out, so a queue is not counted once per GPU.
    rank_labels: tuple[str, ...] = ()

    def names(self) -> tuple[str, ...]:
        return (
            *self.running,
            *self.waiting,
            *self.kv_cache_usage,
            *self.prefix_hits,
            *self.prefix_queries,
            *self.prefix_hit_rate,
        )


DIALECTS: tuple[Dialect, ...] = (
    Dialect(
        "vllm",
        running=("vllm:num_requests_running",),
        waiting=("vllm:num_requests_waiting",),
        kv_cache_usage=("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),  # the second: older releases
        prefix_hits=("vllm:prefix_cache_hits_total",),
        prefix_queries=("vllm:prefix_cache_queries_total",),
        prefix_hit_rate=("vllm:gpu_prefix_cache_hit_rate",),  # older releases, before the counters
    ),
    Dialect(
        "sglang",
        running=("sglang:num_running_reqs",),
        waiting=("sglang:num_queue_reqs",),
        kv_cache_usage=("sglang:token_usage",),
        prefix_hit_rate=("sglang:cache_hit_rate",),
        rank_labels=("tp_rank", "pp_rank"),
    ),
    Dialect(
        "llama-server",
        running=("llamacpp:requests_processing",),
        waiting=("llamacpp:requests_deferred",),
        kv_cache_usage=("llamacpp:kv_cache_usage_ratio",),  # older builds only; build 11434 has none
        prefix_hits=("llamacpp:prompt_tokens_cached_total",),
        # its prompt_tokens_total counts the tokens it prefilled, the cached ones excluded
        prefix_queries=("llamacpp:prompt_tokens_cached_total", "llamacpp:prompt_tokens_total"),
    ),
    Dialect("tgi", running=("tgi_batch_current_size",), waiting=("tgi_queue_size",)),
)
WANTED = frozenset(n for d in DIALECTS for n in d.names())
# A line of a mapped name (its sample, HELP or TYPE), found from the newline before it: a pattern that
# starts with a literal is searched from one newline to the next, three times as fast as ``^`` in
# MULTILINE mode (0.3 ms on an 80 KB vLLM endpoint here). The parser then reads the few kept lines.
_LINES = re.compile(
    r"\n(?:# (?:HELP|TYPE) )?(?:"
    + "|".join(re.escape(n) for n in sorted(WANTED, key=len, reverse=True))
    + "|"
    + re.escape(LLAMACPP_PREFIX)
    + r"[A-Za-z0-9_:]+)(?:[{ \t][^\n]*)?(?=\n)"
)


# --- one scrape ---------------------------------------------------------------------------------
def _families(text: str) -> Iterable[Metric]:
    # Imported here: prometheus_client's package imports its HTTP exposition too, ~100 ms, which only
    # a scrape should pay (a chat's backend pays it in its warm-up, the bench before it times anything).
    from prometheus_client.parser import text_string_to_metric_families

    return text_string_to_metric_families(text)


def parse(text: str) -> Samples:
    """The samples of the names this module reads (every ``llamacpp:`` one too), by ``prometheus-client``'s
    parser. Raises :class:`NotPrometheus` when the kept lines do not parse."""
    kept = "".join(m.group(0) for m in _LINES.finditer(f"\n{text}\n"))
    out: Samples = {}
    if not kept:
        return out
    try:
        for family in _families(kept[1:] + "\n"):
            for s in family.samples:
                name = s.name
                if family.type == "counter" and name.endswith("_total") and name not in kept:
                    # the parser names every counter sample *_total; llama-server types its largest sequence
                    # length (n_tokens_max) a counter without the suffix: it keeps the name it was given
                    name = name.removesuffix("_total")
                out.setdefault(name, []).append((s.labels, float(s.value)))
    except (ValueError, IndexError, KeyError) as exc:  # its errors for malformed lines
        raise NotPrometheus(f"not Prometheus text ({str(exc)[:80]})") from None
    return out


def check_text(text: str) -> None:
    """Raise :class:`NotPrometheus` unless the start of ``text`` parses as Prometheus exposition (asked
    once, of an endpoint that had none of the mapped names)."""
    head = text[:CHECK_CHARS]
    head = head[: head.rfind("\n") + 1] if len(text) > CHECK_CHARS else head  # no line cut in two
    if not head.strip():
        raise NotPrometheus("an empty page")
    try:
        for family in _families(head):
            for _ in family.samples:
                pass
    except (ValueError, IndexError, KeyError) as exc:
        raise NotPrometheus(f"not Prometheus text ({str(exc)[:80]})") from None


def dialect_of(samples: Samples) -> Dialect | None:
    """The server whose queue gauges the samples hold, or None."""
    for d in DIALECTS:
        if any(n in samples for n in (*d.running, *d.waiting)):
            return d
    return None


def _series(samples: Samples, names: Sequence[str], ranks: Sequence[str]) -> list[float] | None:
    """The values of the first of ``names`` present: finite, not negative, rank 0's alone."""
    for name in names:
        found = samples.get(name)
        if found is None:
            continue
        return [
            v for labels, v in found if math.isfinite(v) and v >= 0 and all(labels.get(r, "0") == "0" for r in ranks)
        ]
    return None


def _sum(values: list[float] | None) -> float | None:
    return math.fsum(values) if values else None


def _mean_share(values: list[float] | None) -> float | None:
    """The mean of shares (0-1) over series (several engines of one server); a value past 1 is no share."""
    shares = [v for v in values or () if v <= 1.0]
    return math.fsum(shares) / len(shares) if shares else None


@dataclass(frozen=True, slots=True)
class Reading:
    """One scrape, in ttft's names (None: the server does not publish it)."""

    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    prefix_hits: float | None = None  # cumulative counters, for a rate over an interval
    prefix_queries: float | None = None
    prefix_hit_rate: float | None = None  # the server's own rate, where it has no counters


def reading(samples: Samples, d: Dialect) -> Reading:
    """One scrape's samples in ttft's names: queue counts summed over the server's engines, the KV
    share averaged over them."""
    r = d.rank_labels
    queries = None
    if d.prefix_queries:
        parts = [_series(samples, (n,), r) for n in d.prefix_queries]
        queries = math.fsum(math.fsum(p) for p in parts if p) if all(p is not None for p in parts) else None
    return Reading(
        running=_sum(_series(samples, d.running, r)),
        waiting=_sum(_series(samples, d.waiting, r)),
        kv_cache_usage=_mean_share(_series(samples, d.kv_cache_usage, r)),
        prefix_hits=_sum(_series(samples, d.prefix_hits, r)),
        prefix_queries=queries,
        prefix_hit_rate=_mean_share(_series(samples, d.prefix_hit_rate, r)),
    )


def flat(samples: Samples) -> dict[str, float]:
    """Sample name -> its value summed over label sets (finite values only): the raw figures."""
    out: dict[str, float] = {}
    for name, series in samples.items():
        vals = [v for _, v in series if math.isfinite(v)]
        if vals:
            out[name] = math.fsum(vals)
    return out


@dataclass(frozen=True, slots=True)
class Scrape:
    """One read of the endpoint: when (monotonic ns), in ttft's names, and its raw figures."""

    t_ns: int
    reading: Reading
    values: Mapping[str, float]
    histograms: hist.Snapshot | None = None  # read at a level's edges only (None: not asked for)


def scrape(text: str, t_ns: int, d: Dialect, histograms: bool = False) -> Scrape:
    """One read; with ``histograms``, its latency histograms too (a level's first and last reads: their
    lines are most of a vLLM endpoint, and the reads during a level need none of them)."""
    samples = parse(text)
    snap = hist.snapshot(text, d.name, d.rank_labels) if histograms else None
    return Scrape(t_ns, reading(samples, d), flat(samples), snap)


# --- a level --------------------------------------------------------------------------------
def counter_deltas(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """llama-server's figures over a level: counters (``*_total``) as differences, gauges as last read,
    under its names without the ``llamacpp:`` prefix, plus the decode and prompt rates they give."""
    out: dict[str, float] = {}
    for k, v in after.items():
        if not k.startswith(LLAMACPP_PREFIX):
            continue
        short = k.removeprefix(LLAMACPP_PREFIX)
        out[short] = v - before.get(k, 0.0) if k.endswith("_total") else v
    if out.get("tokens_predicted_seconds_total"):
        out["server_decode_tokens_per_s"] = (
            out.get("tokens_predicted_total", 0.0) / out["tokens_predicted_seconds_total"]
        )
    if out.get("prompt_seconds_total"):
        out["server_prompt_tokens_per_s"] = out.get("prompt_tokens_total", 0.0) / out["prompt_seconds_total"]
    return out


def _median(values: list[int]) -> float:
    v = sorted(values)
    mid = len(v) // 2
    return float(v[mid]) if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def _stat(values: Iterable[float | None]) -> dict[str, float] | None:
    vals = [v for v in values if v is not None]
    return {"mean": math.fsum(vals) / len(vals), "max": max(vals)} if vals else None


def _hit_rate(before: Reading | None, after: Reading | None, during: Sequence[Reading]) -> float | None:
    """Prompt tokens from the prefix cache over the level: the counters' growth, or the server's own rate."""
    empty = Reading()
    h0, q0 = (before or empty).prefix_hits, (before or empty).prefix_queries
    h1, q1 = (after or empty).prefix_hits, (after or empty).prefix_queries
    if h0 is not None and q0 is not None and h1 is not None and q1 is not None:
        hits, queries = h1 - h0, q1 - q0
        if queries > 0 and 0 <= hits <= queries:  # a restarted server resets its counters: no rate then
            return hits / queries
        return None
    rates = [r.prefix_hit_rate for r in during if r.prefix_hit_rate is not None]
    return math.fsum(rates) / len(rates) if rates else None


@dataclass(frozen=True, slots=True)
class LevelScrapes:
    """One level's reads of the endpoint: just before it, every interval during it, just after it."""

    dialect: Dialect
    before: Scrape | None  # None: that read failed (then no counters over the level)
    during: tuple[Scrape, ...]
    after: Scrape | None
    failed: int = 0  # reads that got no answer or no text to parse: left out


def level_summary(level: LevelScrapes) -> dict[str, Any]:
    """One level's ``server_metrics``: each gauge's mean and max over the scrapes taken during the level,
    the prefix-cache hit rate between the scrapes just before and just after it, for llama-server
    its counters over the level (:func:`counter_deltas`), and, when those two reads took the histograms,
    the server's latency percentiles over the level (``telemetry.server.histograms.level_latency``).

    ``before`` and ``after`` frame the level and only give the counters: an idle server at its edges
    would pull the means down. A level shorter than one interval has no scrape during it, so no means.
    """
    d = level.dialect
    readings = [s.reading for s in level.during]
    times = [s.t_ns for s in level.during]
    out: dict[str, Any] = {
        "server": d.name,
        "samples": len(readings),
        "interval_ms": _median([b - a for a, b in pairwise(times)]) / 1e6 if len(times) > 1 else None,
    }
    for name in GAUGE_NAMES:
        out[name] = _stat(getattr(r, name) for r in readings)
    before, after = level.before, level.after
    out["prefix_cache_hit_rate"] = _hit_rate(
        before.reading if before else None, after.reading if after else None, readings
    )
    if level.failed:
        out["failed_reads"] = level.failed
    if d.name == "llama-server" and before is not None and after is not None:
        out.update(counter_deltas(before.values, after.values))
    if (before is not None and before.histograms is not None) or (after is not None and after.histograms is not None):
        out.update(
            hist.level_latency(d.name, before.histograms if before else None, after.histograms if after else None)
        )
    return out


# --- read back (a summary from disk, a record's server object: untrusted) ------------------------
def _number(v: object) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        return None
    return float(v)


@dataclass(frozen=True, slots=True)
class Stat:
    mean: float
    max: float


def _read_stat(v: object) -> Stat | None:
    if not isinstance(v, Mapping):
        return None
    mean, top = _number(v.get("mean")), _number(v.get("max"))
    return None if mean is None or top is None else Stat(mean, top)


def _text(v: object, limit: int = 24) -> str:
    s = str(v)[:limit] if isinstance(v, str) else ""
    return "".join(ch if ch.isprintable() else "\ufffd" for ch in s)


@dataclass(frozen=True, slots=True)
class LevelGauges:
    """A level's ``server_metrics`` as the table, the charts and the conclusion read it."""

    server: str
    samples: int
    running: Stat | None
    waiting: Stat | None
    kv_cache_usage: Stat | None
    prefix_cache_hit_rate: float | None


def read_level(level: Mapping[str, Any]) -> LevelGauges | None:
    """A level's gauges, or None when it has none (a run without ``--server-metrics``, an older summary)
    or they do not read as gauges (a hand-edited file)."""
    m = level.get("server_metrics")
    if not isinstance(m, Mapping) or ("running" not in m and "waiting" not in m):
        return None  # none, or only an older run's llama-server counters
    samples = _number(m.get("samples"))
    rate = _number(m.get("prefix_cache_hit_rate"))
    return LevelGauges(
        server=_text(m.get("server")),
        samples=int(samples) if samples is not None and samples >= 0 else 0,
        running=_read_stat(m.get("running")),
        waiting=_read_stat(m.get("waiting")),
        kv_cache_usage=_read_stat(m.get("kv_cache_usage")),
        prefix_cache_hit_rate=rate if rate is not None and 0 <= rate <= 1 else None,
    )


# --- a chat turn -----------------------------------------------------------------------------
def turn_entry(r: Reading, d: Dialect, read_ms: float) -> dict[str, Any]:
    """What a turn's record keeps of one reading taken as its request left (``server[GAUGES_SOURCE]``):
    ``read_ms`` is when the server answered, from the send."""
    return {
        "server": d.name,
        "running": r.running,
        "waiting": r.waiting,
        "kv_cache_usage": r.kv_cache_usage,
        "read_ms": round(read_ms, 3),
    }


@dataclass(frozen=True, slots=True)
class TurnGauges:
    """The server's queue and KV use at the moment of a turn, as its record kept them."""

    server: str
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None

    def describe(self) -> str:
        """ "3 requests waiting · 2 running · KV 71%": what the chat's pane shows."""
        parts = []
        if self.waiting is not None:
            n = round(self.waiting)
            parts.append(f"{n} request{'' if n == 1 else 's'} waiting")
        if self.running is not None:
            parts.append(f"{round(self.running)} running")
        if self.kv_cache_usage is not None:
            parts.append(f"KV {self.kv_cache_usage:.0%}")
        return " · ".join(parts)


def turn_gauges(server: object) -> TurnGauges | None:
    """A record's ``server`` object (any JSON, or None) -> its gauges reading, or None."""
    if not isinstance(server, Mapping):
        return None
    g = server.get(GAUGES_SOURCE)
    if not isinstance(g, Mapping):
        return None
    running, waiting = _number(g.get("running")), _number(g.get("waiting"))
    kv = _number(g.get("kv_cache_usage"))
    out = TurnGauges(
        server=_text(g.get("server")),
        running=running if running is not None and running >= 0 else None,
        waiting=waiting if waiting is not None and waiting >= 0 else None,
        kv_cache_usage=kv if kv is not None and 0 <= kv <= 1 else None,
    )
    return out if out.describe() else None
