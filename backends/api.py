"""The library's front door: ttft from Python, through the same core as the CLI.

``resolve`` turns a spec into the registry's typed Target; ``run_turn`` (and its async twin
``arun_turn``), ``Client`` and its ``Conversation`` run turns, tools and attachments included, through the
core ``ttft ask`` runs (:mod:`backends.ask.client`, written to the session log unless ``log=False``) and
return their ``TurnRecord``; ``run_probe`` runs :func:`backends.probe.orchestrate.run_probe`, as ``ttft
probe`` does; ``run_bench`` runs :func:`backends.load.bench.run_bench` on a ``BenchPlan``, as ``ttft
bench`` does; ``run_compare`` runs :func:`backends.compare.run.run_compare` on a ``ComparePlan``
(``compare_plan`` builds one), as ``ttft compare --headless`` does; ``turns_frame`` gives records as
a pandas DataFrame typed as the exports are; ``read_log`` reads a session log back as typed records,
and ``log_frame`` as a pandas or polars DataFrame or a DuckDB relation (:mod:`telemetry.export.log_data`).
Nothing here is a second implementation: each function is the CLI's own, minus the printing.
Every failure ttft knows is a :class:`TtftError` (a bad spec: its ``ProviderError``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ..telemetry.errors import TtftError
from ..telemetry.export import formats
from ..telemetry.export.log_data import (
    LogReadError,
    LogRecords,
    MissingEngine,
    SkippedLinesWarning,
    log_frame,
    read_log,
)
from ..telemetry.record import TurnRecord
from ..telemetry.settings import TurnSettings
from ..telemetry.steps import AgentSummary, ApprovalStepRecord, ModelStepRecord, ToolStepRecord
from ..telemetry.values.checked import BadValue
from .agent.host import ToolHost, ToolResult
from .ask.arguments import resolve, turn_settings
from .ask.client import Client, Conversation, arun_turn, run_turn
from .ask.offer import ToolRequest
from .base import Message, ToolSpec
from .compare.panes import MAX_PANES
from .compare.run import ComparePlan, CompareResult
from .compare.run import run_compare as _run_compare
from .load import shared as _share
from .load.bench import BenchAbort, BenchResult
from .load.bench import run_bench as _run_bench
from .load.plan import BenchPlan, Level, Rate, Speedup, Users
from .mcp.config import McpServerConfig
from .probe.orchestrate import ProbePlan, ProbeResult
from .probe.orchestrate import run_probe as _run_probe
from .providers.registry import ProviderError, Target
from .spec import PaneSpec, parse_model

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "AgentSummary",
    "ApprovalStepRecord",
    "BadValue",
    "BenchAbort",
    "BenchPlan",
    "BenchResult",
    "Client",
    "ComparePlan",
    "CompareResult",
    "Conversation",
    "Level",
    "LogReadError",
    "LogRecords",
    "McpServerConfig",
    "Message",
    "MissingEngine",
    "ModelStepRecord",
    "ProbePlan",
    "ProbeResult",
    "ProviderError",
    "Rate",
    "SkippedLinesWarning",
    "Speedup",
    "Target",
    "ToolHost",
    "ToolRequest",
    "ToolResult",
    "ToolSpec",
    "ToolStepRecord",
    "TtftError",
    "TurnRecord",
    "TurnSettings",
    "Users",
    "aclose",
    "arun_bench",
    "arun_compare",
    "arun_probe",
    "arun_turn",
    "bench_plan",
    "compare_plan",
    "log_frame",
    "read_log",
    "resolve",
    "run_bench",
    "run_compare",
    "run_probe",
    "run_turn",
    "turn_settings",
    "turns_frame",
]

T = TypeVar("T")


async def aclose() -> None:
    """Close the clients the turns on the running event loop share (the next turn opens new ones).

    Optional: ``asyncio.run`` closes them as its loop ends, and the synchronous turns' at exit. Await it
    in a notebook to drop the pooled connections, or after changing a provider's settings mid-loop."""
    await _share.aclose()


async def arun_probe(
    plan: ProbePlan,
    *,
    on_plan: Callable[[str, Any], None] | None = None,
    on_turn: Callable[[int, Any, TurnRecord], None] | None = None,
) -> ProbeResult:
    """``ttft probe`` without the printing: the plan's schedule run and fitted. The fit is saved only
    when asked (``result.save_fit()``); ``result.save(dir)`` writes what ``--out DIR`` does."""
    return await _run_probe(plan, on_plan=on_plan, on_turn=on_turn)


def run_probe(plan: ProbePlan, **kwargs: Any) -> ProbeResult:
    """:func:`arun_probe`, synchronously."""
    return _sync(lambda: arun_probe(plan, **kwargs))


def turns_frame(records: Iterable[TurnRecord | dict[str, Any]]) -> pd.DataFrame:
    """The turns as a pandas DataFrame: the export's columns (telemetry.export.table), in its order and
    with its types as nullable pandas dtypes, base URLs without credentials. Needs pandas installed."""
    frame: pd.DataFrame = formats.turns_frame(records)
    return frame


def bench_plan(
    target: Target | str, *, levels: Iterable[Level], out: str | Path | None = None, **settings: Any
) -> BenchPlan:
    """What ``ttft bench``'s flags say, as a typed, immutable plan: ``levels`` all of one kind (``Users(n)``,
    ``Rate(r)``, ``Speedup(x)``); ``settings``: the load's (``requests``, ``warmup``, ``seed``,
    ``max_output_tokens``, ``input_tokens``, ...) and the plan's (``server_metrics``, ...). A Target gives
    its spec and base URL. Results go to ``out`` (default ``ttft-RUN_ID``)."""
    if isinstance(target, Target):
        settings.setdefault("base_url", target.base_url)
        target = target.spec
    return BenchPlan.of(target, levels=tuple(levels), out=None if out is None else Path(out), **settings)


async def arun_bench(plan: BenchPlan, **callbacks: Any) -> BenchResult:
    """``ttft bench`` without the printing (its charts too: they are drawn by the CLI). ``callbacks``:
    ``on_level`` (each level's figures as it ends), ``on_progress``, ``on_note``, ``on_warn``. BenchAbort
    (a TtftError) when a step cannot go on; the levels already run are in its folder."""
    return await _run_bench(plan, **callbacks)


def run_bench(plan: BenchPlan, **callbacks: Any) -> BenchResult:
    """:func:`arun_bench`, synchronously."""
    return _sync(lambda: arun_bench(plan, **callbacks))


def compare_plan(
    targets: Iterable[Target | str],
    prompt: str,
    *,
    repeat: int = 1,
    sequential: bool = False,
    system: str | None = None,
    out: str | Path | None = None,
    timeout_s: float | None = None,
    **settings: Any,
) -> ComparePlan:
    """What ``ttft compare --headless``'s flags say, as a typed, immutable plan: one pane per target (1 to 4;
    a Target gives its spec and base URL), ``prompt`` sent to each ``repeat`` times, at the same instant
    or (``sequential``) one pane after another. ``settings``: TurnSettings' fields, every pane's."""
    panes = [(t.spec, t.base_url) if isinstance(t, Target) else parse_model(t, None) for t in targets]
    if not 1 <= len(panes) <= MAX_PANES:
        raise ValueError(f"compare takes 1 to {MAX_PANES} targets (got {len(panes)})")
    if repeat < 1:
        raise ValueError("repeat must be at least 1")
    return ComparePlan(
        panes=tuple(p if isinstance(p, PaneSpec) else PaneSpec(*p) for p in panes),
        prompt=prompt,
        repeat=repeat,
        mode="sequential" if sequential else "parallel",
        system=system,
        settings=turn_settings(**settings),
        timeout_s=timeout_s,
        out=None if out is None else Path(out),
    )


async def arun_compare(plan: ComparePlan, **callbacks: Any) -> CompareResult:
    """``ttft compare --headless`` without the printing: every pane's turns, logged to a session, and the
    comparison's figures and verdicts. ``callbacks``: ``on_turn`` (pane, trial, record, as each turn ends),
    ``on_tool_notice``, ``on_warn``, ``on_note``. ``result.save(dir)`` writes what ``--out DIR`` does
    (``plan.out`` is the CLI's; the API leaves saving to you)."""
    return await _run_compare(plan, **callbacks)


def run_compare(plan: ComparePlan, **callbacks: Any) -> CompareResult:
    """:func:`arun_compare`, synchronously."""
    return _sync(lambda: arun_compare(plan, **callbacks))


def _sync(make: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run a coroutine to its end from synchronous code: in this thread, or in a thread of its own when
    this one already runs an event loop (asyncio.run refuses to nest)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(make())
    with ThreadPoolExecutor(1, thread_name_prefix="ttft-api") as pool:
        return pool.submit(lambda: asyncio.run(make())).result()
