"""What ``ttft report`` reads: bench folders and summaries, session and comparison logs, as typed groups.

A summary from disk is checked level by level (a level of the wrong shape is left out, not a
traceback); a log is read as figures, never texts (``UNREAD``), with chunk stamps kept only where a
chart draws them. ``--merge`` reads several runs as one bench (``tui.commands.report.merge``).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ....telemetry import json_guard
from ....telemetry.bench import aggregate as agg
from ....telemetry.bench.conclusion import conclusion as bench_conclusion
from ....telemetry.bench.requests import group_levels, measured, read_bench
from ....telemetry.json_guard import JsonRefused
from ....telemetry.log.sessions import resolve
from ....telemetry.log.turns import Skipped, read_records
from ....telemetry.record import TurnRecord, typed_records
from .merge import merged_bench


@dataclass
class Bench:
    name: str
    levels: list[dict[str, Any]]
    conclusion: str
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class Group:
    """Turns of one session, or of one comparison pane."""

    name: str
    records: list[TurnRecord]


@dataclass
class Loaded:
    benches: list[Bench] = field(default_factory=list)
    groups: list[Group] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)  # the files read, for the page's header


# --- reading ---------------------------------------------------------------------------
def _bench_from_records(name: str, records: list[dict[str, Any]], problems: list[str]) -> Bench:
    read = read_bench(records)
    if (problem := read.message()) is not None:
        problems.append(f"{name}: {problem}")
    groups = group_levels(measured(read.turns))
    levels = [agg.aggregate_level(turns, level=level, mode=mode) for mode, level, turns in groups]
    meta: dict[str, Any] = {"provider": None, "model": None, "base_url": None, "started_at": None}
    if read.turns:
        first = read.turns[0].record
        meta = {"provider": first.provider or None, "model": first.model or None}
        meta |= {"base_url": first.base_url, "started_at": first.started_at or None}
    meta["model_spec"] = f"{meta['provider']}:{meta['model']}" if meta["provider"] else None
    return Bench(name, levels, bench_conclusion(levels), meta)


def _bench_from_summary(path: Path) -> Bench:
    data = json_guard.loads(path.read_bytes(), str(path))  # deep or huge: a problem said, not a traceback
    if not isinstance(data, dict) or data.get("schema") != "ttft.bench/1":
        raise ValueError(f"{path} is not a ttft bench summary")
    details = data.get("details")
    levels = [lv for lv in map(_level, details) if lv is not None] if isinstance(details, list) else []
    name = str(data.get("model") or data.get("model_spec") or path.parent.name)
    conclusion = str(data.get("conclusion") or bench_conclusion(levels))
    capacity = data.get("capacity")
    if isinstance(capacity, dict) and capacity.get("conclusion"):  # a --find-capacity run: its answer too
        conclusion += " " + str(capacity["conclusion"])
    return Bench(name, levels, conclusion, data)


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _level(lv: Any) -> dict[str, Any] | None:
    """A summary's level as the tables and charts read it, or None when it is not one.

    The file is from disk: a key an older ttft did not write reads as an empty level's (no figure),
    and a level whose figures are of the wrong type (a hand-edited file) is left out, not a traceback."""
    if not isinstance(lv, dict):
        return None
    empty = agg.aggregate_level([], level=0, mode=str(lv.get("mode") or "concurrency"))
    for key, blank in empty.items():
        v = lv.get(key)
        if v is None or blank is None:
            continue
        if _is_number(blank) and not _is_number(v):
            return None
        distribution = isinstance(blank, dict) and all(b is None for b in blank.values())
        if distribution and not (isinstance(v, dict) and all(x is None or _is_number(x) for x in v.values())):
            return None
    if (lv.get("mode") or "concurrency") not in ("concurrency", "rate", "trace") or not _is_number(lv.get("level")):
        return None
    out = {**empty, **{k: v for k, v in lv.items() if v is not None or k not in empty}}
    for key, blank in empty.items():  # a distribution missing a percentile has no figure for it
        if isinstance(blank, dict) and blank and all(b is None for b in blank.values()):
            out[key] = {**blank, **out[key]}
    return out


def capacity_block(b: Bench) -> dict[str, Any] | None:
    """A --find-capacity run's summary block (drawn on its trade-off chart), if the bench is one."""
    capacity = b.meta.get("capacity")
    if not isinstance(capacity, dict):
        return None
    # from disk: an objective the chart cannot draw (no metric, a bound that is not a number) is left out
    objectives = capacity.get("objectives")
    drawable = [
        o
        for o in (objectives if isinstance(objectives, list) else ())
        if isinstance(o, dict)
        and isinstance(o.get("metric"), str)
        and all(_is_number(o.get(k)) for k in ("bound_ms", "target"))
    ]
    return {**capacity, "objectives": drawable}


TIMELINE_TURNS = 8  # the timeline's default: the last turns of each group
# What a session's tables and charts never read: texts, and the server's own and per-call details.
UNREAD = frozenset({"prompt", "answer", "reasoning", "tool_calls", "server", "notices", "diagnosis"})


def _group_key(r: dict[str, Any]) -> str:
    ex = r.get("extra") or {}
    if ex.get("bench"):
        return "bench"
    if ex.get("comparison_id"):
        label = ex.get("pane_label") or f"pane {ex.get('pane')}: {r.get('provider')}:{r.get('model')}"
        return f"{ex['comparison_id']} {label}"
    return ""


def _from_jsonl(path: Path, out: Loaded, want: set[int] | None = None) -> None:
    skipped = Skipped()
    # A report reads figures, never text: a session record is kept without its texts and the
    # server's details (UNREAD), a bench record without its texts. Chunk stamps (most of a record's
    # numbers) are kept only where they are drawn: bench records (re-aggregated), the turns asked
    # for, and the last turns of each group (the timeline's default).
    recs: list[dict[str, Any]] = []
    recent: dict[str, deque[tuple[int, Any]]] = {}
    for r in read_records(path, skipped):
        key = _group_key(r)
        if key == "bench":  # re-aggregated: the server's own figures are read too
            recs.append({**r, "prompt": None, "answer": None, "reasoning": None})
            continue
        slim = {k: v for k, v in r.items() if k not in UNREAD}
        if not (want and r.get("turn_index") in want):
            tail = recent.setdefault(key, deque(maxlen=TIMELINE_TURNS))
            tail.append((len(recs), slim.get("chunks")))
            slim["chunks"] = None
        recs.append(slim)
    for tail in recent.values():
        for i, chunks in tail:
            recs[i]["chunks"] = chunks
    if skipped:
        out.problems.append(str(skipped.message()))
    if not recs:
        out.problems.append(f"{path}: no ttft.turn records")
        return
    bench = [r for r in recs if (r.get("extra") or {}).get("bench")]
    if bench:
        out.benches.append(_bench_from_records(path.stem, bench, out.problems))
    # the edge: the session's dicts read once as records; a line that does not read is said, not drawn
    dicts = [r for r in recs if not (r.get("extra") or {}).get("bench")]
    rest = typed_records(dicts)
    if len(rest) < len(dicts):
        out.problems.append(f"{path}: {len(dicts) - len(rest)} turn(s) did not read as ttft.turn records, left out")
    comparisons: dict[str, dict[str, list[TurnRecord]]] = {}
    plain: list[TurnRecord] = []
    for t in rest:
        ex = t.extra
        if ex.get("comparison_id"):
            label = ex.get("pane_label") or f"pane {ex.get('pane')}: {t.provider}:{t.model}"
            comparisons.setdefault(str(ex["comparison_id"]), {}).setdefault(str(label), []).append(t)
        else:
            plain.append(t)
    for cid, panes in comparisons.items():
        for label, rs in panes.items():
            out.groups.append(Group(f"{cid} {label}", rs))
    if plain:
        out.groups.append(Group(path.stem, plain))


def load(paths: list[str], turns: str | None = None) -> Loaded:
    """Read bench folders, summaries and logs; ``turns`` (as people number them) keeps those turns' chunks."""
    want = wanted(turns)
    out = Loaded()
    for item in paths:
        p = Path(item)
        try:
            if p.is_dir():
                if (p / "summary.json").exists():
                    out.benches.append(_bench_from_summary(p / "summary.json"))
                    out.sources.append(str(p / "summary.json"))
                else:
                    files = sorted(p.glob("*.jsonl"))
                    if not files:
                        out.problems.append(f"{p}: no summary.json or .jsonl logs inside")
                    for f in files:
                        _from_jsonl(f, out, want)
                        out.sources.append(str(f))
            elif p.suffix == ".json":
                out.benches.append(_bench_from_summary(p))
                out.sources.append(str(p))
            else:
                path = resolve(item)
                _from_jsonl(path, out, want)
                out.sources.append(str(path))
        except (OSError, ValueError, FileNotFoundError) as exc:
            out.problems.append(str(exc) if isinstance(exc, JsonRefused) else f"{item}: {exc}")  # it names the file
    return out


def load_merged(paths: list[str]) -> Loaded:
    """``--merge``: the runs as one bench; ``MergeRefused`` when they cannot be one load."""
    m = merged_bench(paths)
    return Loaded([Bench(m.name, m.levels, bench_conclusion(m.levels), m.meta)], problems=m.problems, sources=m.sources)


def wanted(turns: str | None) -> set[int] | None:
    """``--turns 1,4`` as turn indices (people number turns from 1, as turn_label does)."""
    return {int(t) - 1 for t in turns.split(",") if t.strip()} if turns else None
