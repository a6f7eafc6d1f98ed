"""Side-by-side comparison of panes: rankings, medians/p90, and bootstrap verdicts.

Input is, per pane, the list of typed ``TurnRecord``s that pane produced for the
same prompt (one per trial; a logged dict reads back through ``TurnRecord.from_dict``).
Failed and cancelled turns stay in their pane's counts but never enter a metric: a
fast error is not a fast answer.

A pair of panes is declared different in a metric only when the 95% bootstrap
interval of the difference of their medians excludes zero, and only with at
least ``MIN_TRIALS`` good turns each; with fewer, the verdict reports what was
seen and says it cannot be told from noise.

A comparison of tool-using turns (any record with ``agent``: ``backends.agent.loop``) adds
:data:`AGENT_METRICS`: steps per turn, time in tools and ttft's own time between steps, and E2E is
then said as the time to the final answer. A comparison without them is exactly as it was.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from ..cost import CostSum, sum_costs
from ..duration import fmt_ms, unit_for
from ..export.formats import write_csv, write_jsonl
from ..log.secrets import mask, masked_record
from ..metrics import percentiles
from ..record import TurnRecord

RESAMPLES = 2000
SEED = 20240607
CONFIDENCE = 0.95
MIN_TRIALS = 3  # below this a bootstrap interval of a median is meaningless


@dataclass(frozen=True, slots=True)
class MetricSpec:
    key: str  # column id, also the CSV prefix
    label: str  # column heading
    unit: str  # "ms" or "tokens"
    get: Callable[[TurnRecord], float | None]
    # Verdict phrases, for "A <faster> <amount> <than> B".
    better: str  # e.g. "reaches the first token {amount} sooner than"
    lower_is_better: bool = True


@dataclass(frozen=True, slots=True)
class _Metric:
    """A record's figure by name (a class, not a closure, so a comparison pickles)."""

    name: str

    def __call__(self, rec: TurnRecord) -> float | None:
        v = getattr(rec.metrics, self.name)
        return float(v) if v is not None else None


def _output_tokens(rec: TurnRecord) -> float | None:
    v = rec.tokens.output
    return float(v) if v is not None else None


METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("ttft", "TTFT", "ms", _Metric("ttft_ms"), "reaches the first token {amount} sooner than"),
    MetricSpec("ttfvt", "TTFVT", "ms", _Metric("ttfvt_ms"), "shows the first visible text {amount} sooner than"),
    MetricSpec("tpot", "TPOT", "ms", _Metric("tpot_ms"), "spends {amount} less per output token than"),
    MetricSpec("e2e", "E2E", "ms", _Metric("e2e_ms"), "finishes {amount} sooner than"),
    # Fewest wins: output length dominates latency, so this column explains E2E.
    MetricSpec("output_tokens", "output tokens", "tokens", _output_tokens, "writes {bare} fewer output tokens than"),
)


@dataclass(frozen=True, slots=True)
class _Agent:
    """A tool-using turn's figure from its ``agent`` split, by name."""

    name: str

    def __call__(self, rec: TurnRecord) -> float | None:
        v = getattr(rec.agent, self.name) if rec.agent is not None else None
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


# A tool-using turn's E2E runs from the first send to the last token of the final answer (telemetry.agent.steps).
ANSWER = MetricSpec("e2e", "E2E", "ms", _Metric("e2e_ms"), "reaches the final answer {amount} sooner than")
AGENT_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("steps", "steps", "steps", _Agent("step_count"), "takes {bare} fewer steps to the answer than"),
    MetricSpec("tools", "tool time", "ms", _Agent("time_in_tools_ms"), "spends {amount} less in tools than"),
    MetricSpec("own", "ttft's own", "ms", _Agent("time_in_ttft_ms"), "spends {amount} less in ttft's own work than"),
)
METRIC_BY_KEY = {m.key: m for m in (*METRICS, *AGENT_METRICS)}


def metrics_for(records: Iterable[TurnRecord]) -> tuple[MetricSpec, ...]:
    """The columns of a comparison of these turns: :data:`METRICS`, and where any turn used tools, E2E as
    the time to the final answer and :data:`AGENT_METRICS` after it."""
    if not any(r.agent for r in records):
        return METRICS
    return tuple(ANSWER if m.key == "e2e" else m for m in METRICS) + AGENT_METRICS


@dataclass(frozen=True, slots=True)
class MetricStats:
    n: int
    median: float | None
    p90: float | None
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class PaneStats:
    pane: str
    provider: str | None
    model: str | None
    turns: int
    ok: int
    failed: int
    cancelled: int
    errors: tuple[str, ...]  # one line per failed turn
    metrics: dict[str, MetricStats]
    # What the pane's turns cost, all of them (a failed turn's tokens are billed too; telemetry.cost).
    cost: CostSum = field(default_factory=lambda: sum_costs(()))


@dataclass(frozen=True, slots=True)
class Ranking:
    metric: str
    order: tuple[str, ...]  # best first; panes with no value last
    winners: tuple[str, ...]  # ties share the win; empty when nobody has a value
    rank: dict[str, int | None]  # 1 = best; None = no value


@dataclass(frozen=True, slots=True)
class Verdict:
    metric: str
    a: str
    b: str
    diff: float | None  # median(a) - median(b)
    low: float | None  # 95% interval of diff
    high: float | None
    n_a: int
    n_b: int
    clear: bool  # the interval excludes zero (and both have MIN_TRIALS good turns)
    better: str | None  # the pane with the lower median when clear
    text: str


@dataclass(frozen=True)
class Comparison:
    panes: tuple[str, ...]
    stats: dict[str, PaneStats]
    rankings: dict[str, Ranking]
    verdicts: tuple[Verdict, ...]
    trials: int
    extra: dict[str, Any] = field(default_factory=dict)
    metrics: tuple[MetricSpec, ...] = METRICS  # the columns, in order (metrics_for)

    def clear_verdicts(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.clear]

    def shown_verdicts(self, *, only_clear: bool = False) -> list[Verdict]:
        """The verdicts a summary lists: those between two panes that each have a good turn (a pane with
        none is one failure line, not one "nothing to compare" per metric and pair), clear ones only if asked."""
        return [v for v in self.verdicts if self.stats[v.a].ok and self.stats[v.b].ok and (v.clear or not only_clear)]

    @property
    def priced(self) -> bool:
        """Whether any pane's turn was priced (a front end shows a cost column then)."""
        return any(s.cost.priced for s in self.stats.values())

    def wins(self, pane: str) -> tuple[str, ...]:
        """The metric keys ``pane`` ranks first in (ties included), in ``METRICS`` order; none for a
        pane compared with nobody, where every column would be a trivial win."""
        if len(self.panes) < 2:
            return ()
        return tuple(m.key for m in self.metrics if pane in self.rankings[m.key].winners)

    def rows(self) -> list[dict[str, Any]]:
        """One flat row per pane (the CSV summary)."""
        out = []
        for p in self.panes:
            s = self.stats[p]
            row: dict[str, Any] = {
                "pane": p,
                "provider": s.provider,
                "model": s.model,
                "turns": s.turns,
                "ok": s.ok,
                "failed": s.failed,
                "cancelled": s.cancelled,
                "cost_usd": s.cost.total_usd if s.cost.priced else None,
                "cost_priced_turns": s.cost.priced,
                "cost_unpriced_turns": s.cost.unpriced,
            }
            for m in self.metrics:
                ms = s.metrics[m.key]
                r = self.rankings[m.key]
                row[f"{m.key}_median"] = ms.median
                row[f"{m.key}_p90"] = ms.p90
                row[f"{m.key}_n"] = ms.n
                row[f"{m.key}_rank"] = r.rank[p]
                row[f"{m.key}_winner"] = p in r.winners
            out.append(row)
        return out


# --- statistics ----------------------------------------------------------------------
def pane_stats(pane: str, records: Sequence[TurnRecord], specs: Sequence[MetricSpec] = METRICS) -> PaneStats:
    good = [r for r in records if r.status == "ok"]
    metrics: dict[str, MetricStats] = {}
    for m in specs:
        vals = [v for v in (m.get(r) for r in good) if v is not None]
        pct = percentiles(vals)
        metrics[m.key] = MetricStats(len(vals), pct.p50, pct.p90, tuple(vals))
    errors = tuple(_error_line(r) for r in records if r.status == "error")
    first = records[0] if records else None
    return PaneStats(
        pane=pane,
        provider=first.provider if first else None,
        model=first.model if first else None,
        turns=len(records),
        ok=len(good),
        failed=sum(1 for r in records if r.status == "error"),
        cancelled=sum(1 for r in records if r.status == "cancelled"),
        errors=errors,
        metrics=metrics,
        cost=sum_costs(r.cost for r in records),
    )


def _error_line(rec: TurnRecord) -> str:
    e = rec.error
    if e is None:
        return "error:"
    status = f"HTTP {e.status_code} " if e.status_code else ""
    return f"{status}{e.type}: {mask(e.message)}".strip()


def rank(metric: str, stats: Mapping[str, PaneStats]) -> Ranking:
    """Order panes by their median (lower is better); ties share a rank and the win."""
    meds = {p: s.metrics[metric].median for p, s in stats.items()}
    valued = sorted((p for p in stats if meds[p] is not None), key=lambda p: meds[p])  # type: ignore[arg-type,return-value]
    order = tuple(valued) + tuple(p for p in stats if meds[p] is None)
    ranks: dict[str, int | None] = dict.fromkeys(stats)
    prev: float | None = None
    for i, p in enumerate(valued):
        v = meds[p]
        ranks[p] = ranks[valued[i - 1]] if i and prev is not None and _tied(v, prev) else i + 1
        prev = v
    winners = tuple(p for p in valued if ranks[p] == 1)
    return Ranking(metric, order, winners, ranks)


def _tied(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b))


def bootstrap_median_diff(
    a: Sequence[float], b: Sequence[float], *, resamples: int = RESAMPLES, seed: int = SEED
) -> tuple[float, float, float]:
    """median(a) - median(b) and its percentile-bootstrap 95% interval (seeded: same data, same answer)."""
    xa = np.asarray(a, dtype=float)
    xb = np.asarray(b, dtype=float)
    rng = np.random.default_rng(seed)
    ma = np.median(xa[rng.integers(0, len(xa), size=(resamples, len(xa)))], axis=1)
    mb = np.median(xb[rng.integers(0, len(xb), size=(resamples, len(xb)))], axis=1)
    tail = (1 - CONFIDENCE) / 2 * 100
    low, high = np.percentile(ma - mb, [tail, 100 - tail])
    return float(np.median(xa) - np.median(xb)), float(low), float(high)


def verdict(
    metric: str | MetricSpec, a: PaneStats, b: PaneStats, *, seed: int = SEED, resamples: int = RESAMPLES
) -> Verdict:
    spec = metric if isinstance(metric, MetricSpec) else METRIC_BY_KEY[metric]
    metric = spec.key
    va, vb = a.metrics[metric].values, b.metrics[metric].values
    if not va or not vb:
        missing = " and ".join(p.pane for p in (a, b) if not p.metrics[metric].values)
        text = f"{spec.label}: no value for {missing}, nothing to compare"
        return Verdict(metric, a.pane, b.pane, None, None, None, len(va), len(vb), False, None, text)
    if len(va) < MIN_TRIALS or len(vb) < MIN_TRIALS:
        diff = float(np.median(va) - np.median(vb))
        if _tied(diff, 0.0):
            text = f"{a.pane} and {b.pane} were level in {spec.label}"
        else:
            fast, slow = (a.pane, b.pane) if diff < 0 else (b.pane, a.pane)
            text = (
                f"{fast} {_phrase(spec, abs(diff))} {slow} in this run"
                f"; too few turns to tell from noise (repeat {MIN_TRIALS}+ times)"
            )
        return Verdict(metric, a.pane, b.pane, diff, None, None, len(va), len(vb), False, None, text)
    diff, low, high = bootstrap_median_diff(va, vb, resamples=resamples, seed=seed)
    clear = low > 0 or high < 0
    if clear:
        # Say it from the better pane's side, with a positive amount and interval.
        if diff < 0:
            fast, slow, amt, lo, hi = a.pane, b.pane, -diff, -high, -low
        else:
            fast, slow, amt, lo, hi = b.pane, a.pane, diff, low, high
        unit = _unit_for(spec.unit, amt, lo, hi)
        text = (
            f"{fast} {_phrase(spec, amt, unit)} {slow} "
            f"({int(CONFIDENCE * 100)}% interval {fmt_amount(lo, spec.unit, unit, bare=True)} "
            f"to {fmt_amount(hi, spec.unit, unit)})"
        )
        better: str | None = fast
    else:
        unit = _unit_for(spec.unit, low, high)
        text = (
            f"no clear difference between {a.pane} and {b.pane} in {spec.label} "
            f"(interval {fmt_amount(low, spec.unit, unit, bare=True)} to {fmt_amount(high, spec.unit, unit)})"
        )
        better = None
    return Verdict(metric, a.pane, b.pane, diff, low, high, len(va), len(vb), clear, better, text)


def compare(
    per_pane: Mapping[str, Sequence[TurnRecord]],
    *,
    seed: int = SEED,
    resamples: int = RESAMPLES,
    metrics: Sequence[str] | None = None,
) -> Comparison:
    """Everything a summary shows: per-pane stats, a ranking per metric, a verdict per pair and metric."""
    specs = metrics_for(r for recs in per_pane.values() for r in recs)
    stats = {p: pane_stats(p, recs, specs) for p, recs in per_pane.items()}
    by_key = {m.key: m for m in specs}
    keys = [by_key.get(k) or METRIC_BY_KEY[k] for k in metrics] if metrics is not None else list(specs)
    rankings = {m.key: rank(m.key, stats) for m in specs}
    verdicts = tuple(
        verdict(k, stats[a], stats[b], seed=seed, resamples=resamples)
        for a, b in combinations(list(per_pane), 2)
        for k in keys
    )
    trials = max((len(r) for r in per_pane.values()), default=0)
    return Comparison(tuple(per_pane), stats, rankings, verdicts, trials, metrics=specs)


# --- words ---------------------------------------------------------------------------
def _phrase(spec: MetricSpec, amount: float, unit: str | None = None) -> str:
    return spec.better.format(
        amount=fmt_amount(amount, spec.unit, unit), bare=fmt_amount(amount, spec.unit, unit, bare=True)
    )


def _unit_for(kind: str, *values: float) -> str:
    return unit_for(*values) if kind == "ms" else kind


def fmt_amount(value: float, kind: str, unit: str | None = None, *, bare: bool = False) -> str:
    """180 ms / 1.24 s / 3.2 ms / 40 tokens; ``bare`` drops the unit (the low end of a range).

    Durations are written by ``telemetry.duration`` (two decimals in seconds: verdicts compare them)."""
    unit = unit or _unit_for(kind, value)
    if unit in ("s", "ms"):
        return fmt_ms(value, digits=None, s_digits=2, unit="s" if unit == "s" else "ms", bare=bare)
    s = f"{value:.1f}" if abs(value - round(value)) > 1e-9 and abs(value) < 10 else f"{value:.0f}"
    return s if bare else f"{s} {unit}"


# --- export --------------------------------------------------------------------------
def write_comparison(
    records: Sequence[dict[str, Any]],
    parts: Comparison | Sequence[tuple[Mapping[str, Any], Comparison]],
    out_dir: Path,
    name: str,
) -> tuple[Path, Path, Path]:
    """``NAME.jsonl`` (every turn, raw), ``NAME-summary.csv`` (one row per pane and prompt), ``NAME-verdicts.csv``.

    ``parts``: one comparison, or several (e.g. one per prompt), each with the columns that tell them
    apart (``{"prompt_index": 0, "mode": "parallel"}``).
    """
    if isinstance(parts, Comparison):
        parts = [({}, parts)]
    out_dir.mkdir(parents=True, exist_ok=True)
    jsonl = out_dir / f"{name}.jsonl"
    summary = out_dir / f"{name}-summary.csv"
    verdicts = out_dir / f"{name}-verdicts.csv"
    write_jsonl((masked_record(r) for r in records), jsonl)  # raw, but no secret in an error's words
    write_csv([{**common, **row} for common, c in parts for row in c.rows()], summary)
    vrows = [
        {
            **common,
            "metric": v.metric,
            "a": v.a,
            "b": v.b,
            "median_diff": v.diff,
            "low": v.low,
            "high": v.high,
            "n_a": v.n_a,
            "n_b": v.n_b,
            "clear": v.clear,
            "better": v.better,
            "verdict": v.text,
        }
        for common, c in parts
        for v in c.verdicts
    ]
    write_csv(vrows, verdicts)
    return jsonl, summary, verdicts
