"""Load runs made at once on several machines, read as one load: level k of every run together.

One machine's client runs out of CPU long before a serving cluster runs out of capacity, so a big
load is several ``ttft bench`` runs started together, each with its own ``extra.bench.run_id``.
:func:`merge` checks that they measured the same thing (provider, model, base URL, mode, token
settings), then makes level k of the merged bench the union of every run's level k: its level is
the sum of theirs (concurrent users add up; so do open-loop rates), and every figure is computed
over the union of the requests by ``telemetry.bench.aggregate``.

The machines' monotonic clocks share no origin, so each request is put back on the wall clock
(the record's ``sent_at``; ``started_at`` where an old record has none) before throughput is
taken over the union's span, from the earliest send to the latest end. Runs whose level k did not
run at the same time are still merged, with a warning: their union is not one load.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..errors import TtftError
from ..log.urls import redact_url
from ..metrics import NS_PER_MS
from .aggregate import aggregate_level
from .requests import BenchTurn, group_levels, level_label, measured, span_ms

# Below this share of the shortest run's span in common, the runs' level did not overlap enough
# to be one load.
MIN_OVERLAP = 0.8


class MergeRefused(TtftError, ValueError):
    """The runs cannot be one load (different targets or settings, fewer than two runs): says why."""


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What must be the same on every machine for their requests to be one load of one target."""

    provider: str
    model: str
    base_url: str | None
    mode: str
    input_tokens: int | None  # the prompt size asked for: in summary.json only, None where unknown
    max_output_tokens: int | None


SETTING_NAMES = {
    "provider": "provider",
    "model": "model",
    "base_url": "base URL",
    "mode": "mode",
    "input_tokens": "input tokens",
    "max_output_tokens": "max output tokens",
}


@dataclass(frozen=True, slots=True)
class Run:
    """One machine's run: its requests (warm-ups included; they are left out when merging)."""

    run_id: str
    source: str  # where it was read, for messages
    turns: tuple[BenchTurn, ...]
    input_tokens: int | None = None  # the run's summary.json settings, when one was read
    max_output_tokens: int | None = None
    clients: tuple[Mapping[str, Any] | None, ...] = ()  # its summary's client health, per level in run order

    @property
    def settings(self) -> RunSettings:
        first = self.turns[0].record if self.turns else None
        modes = sorted({t.bench.mode for t in measured(self.turns) if t.bench.level is not None})
        max_out = self.max_output_tokens
        if max_out is None and first is not None:
            max_out = first.settings.max_output_tokens
        return RunSettings(
            provider=first.provider if first else "",
            model=first.model if first else "",
            base_url=redact_url(first.base_url) if first else None,  # from disk: said in messages
            mode="+".join(modes) or "none",
            input_tokens=self.input_tokens,
            max_output_tokens=max_out,
        )

    def requests_key(self) -> tuple[str, int, str, str]:
        """What tells two copies of one run from two runs that drew the same id: its requests' sends."""
        sends = sorted(t.record.sent_at() or t.record.started_at for t in self.turns)
        return (self.run_id, len(sends), sends[0] if sends else "", sends[-1] if sends else "")

    def label(self) -> str:
        return f"run {self.run_id} ({self.source})"


def split_runs(
    source: str, turns: Iterable[BenchTurn], summaries: Mapping[str, Mapping[str, Any]] | None = None
) -> list[Run]:
    """The runs among one file's requests (a concatenated file holds several), by ``run_id``.

    ``summaries`` maps a run id to its ``summary.json``, whose token settings then join the check.
    """
    by_id: dict[str, list[BenchTurn]] = {}
    for t in turns:
        run_id = t.bench.run_id or t.record.session_id or source
        by_id.setdefault(run_id, []).append(t)
    out = []
    for run_id, ts in by_id.items():
        meta = (summaries or {}).get(run_id) or {}
        details = meta.get("details")
        clients = tuple(
            d.get("client") if isinstance(d, dict) and isinstance(d.get("client"), dict) else None
            for d in (details if isinstance(details, list) else ())
        )
        input_tokens, max_out = _whole(meta.get("input_tokens")), _whole(meta.get("max_output_tokens"))
        out.append(Run(run_id, source, tuple(ts), input_tokens, max_out, clients))
    return out


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def worst_client(clients: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """The machines' client health as one: the worst of each figure, since one lagging client
    makes late stamps in the merged load (``telemetry.bench.aggregate.client_bottleneck`` reads it)."""
    known = [c for c in clients if c is not None]
    if not known:
        return None

    def most(figure: str, sub: str | None = None) -> float | None:
        values = []
        for c in known:
            v = c.get(figure)
            if sub is not None:  # from disk: a figure that is not an object has no sub-figure
                v = v.get(sub) if isinstance(v, Mapping) else None
            if (n := _number(v)) is not None:
                values.append(n)
        return max(values) if values else None

    out: dict[str, Any] = {"loop_lag_ms": {"p99": most("loop_lag_ms", "p99")}, "machines": len(known)}
    for figure in ("cpu_percent", "cpu_percent_max_process", "host_cpu_percent"):
        if (v := most(figure)) is not None:
            out[figure] = v
    return out


def _whole(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


@dataclass(frozen=True, slots=True)
class RunLevel:
    """One run's part of a merged level."""

    run_id: str
    level: float
    requests: int
    span_ms: tuple[float, float] | None  # first send, last end, in ms since the epoch


@dataclass(frozen=True, slots=True)
class MergedLevel:
    mode: str
    level: float  # the sum of the runs' levels
    turns: list[BenchTurn]  # every run's requests of this level, on the wall clock
    parts: tuple[RunLevel, ...]
    overlap: float | None  # the time all runs had in common, as a share of the shortest run's span
    client: dict[str, Any] | None = None  # the worst of the machines' client health (worst_client)


@dataclass
class Merged:
    levels: list[MergedLevel]
    merged_from: list[str]  # the run ids, in the order given
    notes: list[str] = field(default_factory=list)  # what was left out or counted once
    warnings: list[str] = field(default_factory=list)  # why the union may not be one load


def _on_wall_clock(t: BenchTurn, level: float) -> BenchTurn:
    """The request with its send on the wall clock (ms since the epoch) and the merged level.

    Without a ``sent_at`` the send is left unset, and ``span_ms`` takes ``started_at`` (also the
    wall clock) instead: never the run's own monotonic ``sent_at_ms``, which no other run shares.
    """
    rec = t.record
    sent, offset = rec.timestamps.sent, rec.wall_offset_ns
    wall = (sent + offset) / NS_PER_MS if sent is not None and offset is not None else None
    return BenchTurn(rec, replace(t.bench, level=level, sent_at_ms=wall))


def _once(runs: Sequence[Run], notes: list[str]) -> list[Run]:
    """Each run once: the same run given twice (its folder and its turns.jsonl) is one machine's load."""
    seen: dict[tuple[str, int, str, str], Run] = {}
    ids: dict[str, Run] = {}
    for r in runs:
        key = r.requests_key()
        if key in seen:
            notes.append(f"run {r.run_id} was given twice ({seen[key].source}, {r.source}): counted once")
            continue
        if r.run_id in ids:  # two machines' runs that drew the same id (it has a random tail): both count
            notes.append(f"{ids[r.run_id].label()} and {r.label()} share a run id but not their requests: both merged")
        seen[key] = ids[r.run_id] = r
    return list(seen.values())


def _check_settings(runs: Sequence[Run], notes: list[str]) -> None:
    settings = [(r, r.settings) for r in runs]
    diffs = []
    for key, name in SETTING_NAMES.items():
        values = [(r, getattr(s, key)) for r, s in settings]
        if key == "input_tokens":  # only summary.json says it: compare the runs that have one
            unknown = [r for r, v in values if v is None]
            values = [(r, v) for r, v in values if v is not None]
            if unknown:
                notes.append(
                    "input tokens not checked for "
                    + ", ".join(r.label() for r in unknown)
                    + " (no summary.json of that run beside its turns)"
                )
        if len({v for _, v in values}) > 1:
            diffs.append(f"{name}: " + ", ".join(f"{r.label()} {v}" for r, v in values))
    if diffs:
        raise MergeRefused("these runs did not measure the same thing, so they are not one load; " + "; ".join(diffs))


def _overlap(spans: Sequence[tuple[float, float] | None]) -> float | None:
    """The time every run's level had in common, as a share of the shortest one (None: nothing to time)."""
    known = [s for s in spans if s is not None]
    if len(known) < len(spans) or not known:
        return None
    shortest = min(end - start for start, end in known)
    common = min(end for _, end in known) - max(start for start, _ in known)
    if shortest <= 0:
        return 1.0 if common >= 0 else 0.0
    return max(0.0, min(1.0, common / shortest))


@dataclass(frozen=True, slots=True)
class Part:
    """One machine's requests of one level, before the union: who ran them, at what load, and its client."""

    name: str  # a run id, or a cluster node
    level: float
    turns: Sequence[BenchTurn]
    client: Mapping[str, Any] | None = None


def union_level(mode: str, parts: Sequence[Part]) -> MergedLevel:
    """Several machines' share of one level as one level: its load the sum of theirs, every request put
    back on the wall clock (so throughput is taken over the union's span), and the worst machine's client."""
    total = sum(p.level for p in parts)
    turns: list[BenchTurn] = []
    runs = []
    for p in parts:
        walled = [_on_wall_clock(t, total) for t in p.turns]
        turns += walled
        load = [t for t in walled if not t.bench.probe]  # a --probe-rate user's requests are not the run's load
        runs.append(RunLevel(p.name, p.level, len(load), span_ms(load)))
    overlap = _overlap([r.span_ms for r in runs])
    return MergedLevel(mode, total, turns, tuple(runs), overlap, worst_client([p.client for p in parts]))


def merge(runs: Sequence[Run], *, min_overlap: float = MIN_OVERLAP) -> Merged:
    """Level k of every run as one level; ``MergeRefused`` when the runs cannot be one load."""
    notes: list[str] = []
    runs = _once(runs, notes)
    if len(runs) < 2:
        got = f"only {runs[0].label()}" if runs else "none"
        raise MergeRefused(f"merging needs at least two different bench runs; got {got}")
    per_run = [group_levels(measured(r.turns)) for r in runs]
    for r, levels in zip(runs, per_run, strict=True):
        if not levels:  # (warm-ups alone): said before its mode reads as different
            raise MergeRefused(f"{r.label()} has no measured requests to merge")
    _check_settings(runs, notes)
    common = min(len(levels) for levels in per_run)
    for r, levels in zip(runs, per_run, strict=True):
        extra = levels[common:]
        if extra:
            names = ", ".join(f"{common + i + 1} ({level_label(m, lv)})" for i, (m, lv, _) in enumerate(extra))
            notes.append(
                f"left out level{'s' if len(extra) > 1 else ''} {names} of {r.label()}: "
                f"the other runs have {common} level{'s' if common > 1 else ''}"
            )
    merged: list[MergedLevel] = []
    apart: list[str] = []
    for k in range(common):
        mode = per_run[0][k][0]
        parts = [
            Part(r.run_id, levels[k][1], levels[k][2], r.clients[k] if k < len(r.clients) else None)
            for r, levels in zip(runs, per_run, strict=True)
        ]
        lv = union_level(mode, parts)
        if lv.overlap is not None and lv.overlap < min_overlap:
            apart.append(f"{k + 1} ({level_label(mode, lv.level)}: {lv.overlap:.0%} in common)")
        merged.append(lv)
    warnings = []
    if apart:
        warnings.append(
            f"the runs did not run level{'s' if len(apart) > 1 else ''} {', '.join(apart)} at the same time "
            f"(under {min_overlap:.0%} of the shortest run's span in common): "
            "their union is not one load, and its throughput is low"
        )
    return Merged(merged, [r.run_id for r in runs], notes, warnings)


def merged_levels(m: Merged) -> list[dict[str, Any]]:
    """Each merged level's figures (``telemetry.bench.aggregate``), with the runs it was made from."""
    out = []
    for lv in m.levels:
        figures = aggregate_level(lv.turns, level=lv.level, mode=lv.mode, client=lv.client)
        figures["merged_from"] = [p.run_id for p in lv.parts]
        figures["runs"] = [
            {
                "run_id": p.run_id,
                "level": p.level,
                "requests": p.requests,
                "duration_s": (p.span_ms[1] - p.span_ms[0]) / 1000 if p.span_ms else None,
            }
            for p in lv.parts
        ]
        figures["overlap"] = lv.overlap
        out.append(figures)
    return out
