"""``ttft report --merge``: reading the bench runs that several machines made at once, to merge as one load.

Each argument is a bench folder (its ``turns.jsonl``, and its ``summary.json`` for the token
settings) or a ``turns.jsonl`` (a ``summary.json`` beside it is read too). The merging itself is
``telemetry.bench.merge``; this module only reads the files, from disk and so untrusted: a line
that does not read is counted and said, a path that holds no requests refuses the merge.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ....telemetry import json_guard
from ....telemetry.bench.merge import MergeRefused, Run, merge, merged_levels, split_runs
from ....telemetry.bench.requests import read_bench
from ....telemetry.log.turns import Skipped, read_records
from ....telemetry.log.urls import redact_url


def _summaries(folder: Path) -> dict[str, dict[str, Any]]:
    """The folder's summary.json by its run id (none when absent or unreadable: only a check is lost)."""
    try:
        data = json_guard.loads((folder / "summary.json").read_bytes(), str(folder / "summary.json"))
    except (OSError, ValueError):  # ValueError: not JSON, or past the guard (telemetry.json_guard)
        return {}
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        return {}
    return {data["run_id"]: data}


def _records_file(p: Path) -> Path:
    if p.is_dir():
        if (p / "turns.jsonl").is_file():
            return p / "turns.jsonl"
        raise MergeRefused(f"{p}: no turns.jsonl inside; --merge needs each run's requests")
    if p.suffix == ".json":
        raise MergeRefused(f"{p}: a summary holds no requests to merge; give its folder or its turns.jsonl")
    if not p.is_file():
        raise MergeRefused(f"{p}: no such file or folder")
    return p


def read_runs(paths: list[str]) -> tuple[list[Run], list[str], list[str]]:
    """The runs in those paths, what did not read (one line each), and the files read."""
    runs: list[Run] = []
    problems: list[str] = []
    sources: list[str] = []
    for item in paths:
        path = _records_file(Path(item))
        skipped = Skipped()
        try:
            # the figures never read the texts: each request is kept without them
            dicts = [
                {**r, "prompt": None, "answer": None, "reasoning": None}
                for r in read_records(path, skipped)
                if (r.get("extra") or {}).get("bench")
            ]
        except OSError as exc:
            raise MergeRefused(f"{path}: {exc.strerror or exc}") from None
        if skipped:
            problems.append(str(skipped.message()))
        read = read_bench(dicts)
        if (problem := read.message()) is not None:
            problems.append(f"{path}: {problem}")
        if not read.turns:
            raise MergeRefused(f"{path}: no bench requests to merge")
        runs += split_runs(item, read.turns, _summaries(path.parent))
        sources.append(str(path))
    return runs, problems, sources


@dataclass
class MergedBench:
    """The merged runs as the report shows one bench."""

    name: str
    levels: list[dict[str, Any]]
    meta: dict[str, Any]
    problems: list[str]  # lines that did not read, what was left out, and the warnings
    sources: list[str]


def merged_bench(paths: list[str]) -> MergedBench:
    """The runs in those paths merged as one load; ``MergeRefused`` when they cannot be one."""
    runs, problems, sources = read_runs(paths)
    merged = merge(runs)
    first = next(r for r in runs if r.run_id == merged.merged_from[0]).turns[0].record
    meta: dict[str, Any] = {"provider": first.provider or None, "model": first.model or None}
    meta |= {
        "base_url": redact_url(first.base_url),
        "started_at": first.started_at or None,
        "merged_from": merged.merged_from,
    }
    meta["model_spec"] = f"{meta['provider']}:{meta['model']}" if meta["provider"] else None
    name = f"{meta['model'] or 'bench'} (merged from {len(merged.merged_from)} runs)"
    problems += merged.notes + [f"warning: {w}" for w in merged.warnings]
    return MergedBench(name, merged_levels(merged), meta, problems, sources)
