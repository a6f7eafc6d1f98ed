"""A load run's tool-using turns, per level (``ttft bench --tool-latency MS`` or ``--mcp SPEC``; pure).

With tools each request is one agent turn (``telemetry.agent.steps``): model steps with tool calls
between them, joined into one record with ``steps`` and ``agent``. A level's ``agent`` block says
what the turns took as a whole: steps per turn, the time to the final answer (the record's E2E: the
first send to the final answer's last token), the time in tools and in the model, ttft's own time per
gap between steps (model to tools, tools to the next model step), and the tool calls and their errors.
The level's TTFT stays the first model step's; its TPOT and ITL are read within each model step
(:func:`model_tpots`, :func:`step_gaps_ms`), never across the tools between them.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise
from typing import Any

from ..metrics import NS_PER_MS, percentiles
from ..record import TurnRecord
from ..steps import AgentSummary, ModelStepRecord, ToolStepRecord, of_kind

CSV_COLUMNS = (
    "agent_steps_per_turn_p50",
    "agent_steps_per_turn_mean",
    "time_to_answer_p50_ms",
    "time_to_answer_p90_ms",
    "time_to_answer_p99_ms",
    "time_in_tools_p50_ms",
    "time_in_model_p50_ms",
    "ttft_overhead_p50_ms",
    "tool_calls",
    "tool_errors",
)


def _num(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def model_tpots(rec: TurnRecord) -> list[float]:
    """The record's TPOT samples: each model step's own, for a tool-using turn (a step that only called a
    tool may have none); the record's one TPOT otherwise."""
    if rec.agent is None:
        return [rec.metrics.tpot_ms] if rec.metrics.tpot_ms is not None else []
    return [s.tpot_ms for s in of_kind(rec.steps, ModelStepRecord) if s.tpot_ms is not None]


def step_gaps_ms(rec: TurnRecord, gaps: Sequence[float]) -> list[float]:
    """A tool-using turn's inter-token gaps within its model steps: ``gaps`` are those between each pair of
    consecutive chunks of the whole record (its chunks are every step's, in order), and a gap whose two
    chunks fall in different model steps (the tools' time between them) is left out."""
    if rec.agent is None or rec.timestamps.sent is None:
        return list(gaps)
    spans = [
        (s.start_ms, s.end_ms)
        for s in of_kind(rec.steps, ModelStepRecord)
        if s.start_ms is not None and s.end_ms is not None
    ]
    sent = rec.timestamps.sent

    def step_of(t_ns: int) -> int:
        t = (t_ns - sent) / NS_PER_MS
        return next((i for i, (a, b) in enumerate(spans) if a <= t <= b), -1)

    steps = [step_of(c.t_ns) for c in rec.chunks]
    return [g for g, (x, y) in zip(gaps, pairwise(steps), strict=False) if x == y and x >= 0]


def _dist(values: Sequence[float], *keys: str) -> dict[str, float | None]:
    d = percentiles(values).to_dict()
    return {k: d.get(k) for k in keys}


def per_gap_ms(agent: AgentSummary) -> float | None:
    """ttft's own time per gap between steps: ``time_in_ttft_ms`` over the gaps a turn of N model steps has
    (model to tools, tools to the next model: 2 (N - 1)); None for a turn of one model step."""
    n = agent.model_steps
    if n < 2:
        return None
    return agent.time_in_ttft_ms / (2 * (n - 1))


def agent_figures(recs: Sequence[TurnRecord]) -> dict[str, Any] | None:
    """The level's ``agent`` block over its load's records, or None when none was a tool-using turn.

    ``turns``: the records with an ``agent`` split; ``steps_per_turn``: their steps (model and tool) p50 and
    mean; ``time_to_answer_ms``: p50/p90/p99 of E2E over the turns that reached an answer; ``time_in_tools_ms``,
    ``time_in_model_ms``, ``ttft_overhead_ms`` (per gap between steps): p50 over every turn; ``tool_calls``:
    every tool step; ``tool_errors``: those that did not end ``ok``; ``stopped``: how many turns ended how.
    """
    agents = [r.agent for r in recs if r.agent is not None]
    if not agents:
        return None
    steps = [float(a.step_count) for a in agents]
    answered = [
        e2e
        for r in recs
        if r.status == "ok"
        and r.agent is not None
        and r.agent.stopped == "answer"
        and (e2e := r.metrics.e2e_ms) is not None
    ]
    tools = [s for r in recs if r.agent is not None for s in of_kind(r.steps, ToolStepRecord)]
    stopped: dict[str, int] = {}
    for a in agents:
        stopped[a.stopped] = stopped.get(a.stopped, 0) + 1
    return {
        "turns": len(agents),
        "answered": len(answered),
        "steps_per_turn": _dist(steps, "p50", "mean"),
        "time_to_answer_ms": _dist(answered, "p50", "p90", "p99"),
        "time_in_tools_ms": _dist([a.time_in_tools_ms for a in agents], "p50"),
        "time_in_model_ms": _dist([a.time_in_model_ms for a in agents], "p50"),
        "ttft_overhead_ms": _dist([v for a in agents if (v := per_gap_ms(a)) is not None], "p50"),
        "tool_calls": len(tools),
        "tool_errors": sum(1 for s in tools if s.status != "ok"),
        "stopped": stopped,
    }


def _count(v: object) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def _get(block: object, key: str, p: str) -> float | None:
    inner = block.get(key) if isinstance(block, dict) else None
    return _num(inner.get(p)) if isinstance(inner, dict) else None


def csv_cells(agg: dict[str, Any]) -> dict[str, Any]:
    """The level's ``agent`` block as the CSV's cells (empty without tools; read as untrusted: a summary on
    disk may be old or hand-edited)."""
    a = agg.get("agent")
    if not isinstance(a, dict):
        return dict.fromkeys(CSV_COLUMNS)
    return {
        "agent_steps_per_turn_p50": _get(a, "steps_per_turn", "p50"),
        "agent_steps_per_turn_mean": _get(a, "steps_per_turn", "mean"),
        "time_to_answer_p50_ms": _get(a, "time_to_answer_ms", "p50"),
        "time_to_answer_p90_ms": _get(a, "time_to_answer_ms", "p90"),
        "time_to_answer_p99_ms": _get(a, "time_to_answer_ms", "p99"),
        "time_in_tools_p50_ms": _get(a, "time_in_tools_ms", "p50"),
        "time_in_model_p50_ms": _get(a, "time_in_model_ms", "p50"),
        "ttft_overhead_p50_ms": _get(a, "ttft_overhead_ms", "p50"),
        "tool_calls": _count(a.get("tool_calls")),
        "tool_errors": _count(a.get("tool_errors")),
    }


def _ms(v: float | None, digits: int = 0) -> str:
    return "-" if v is None else f"{v:,.{digits}f} ms"


def agent_sentence(agg: dict[str, Any]) -> str | None:
    """The level's tool-using turns in one line, or None without them (or with a block that does not read)."""
    a = agg.get("agent")
    if not isinstance(a, dict) or not isinstance(a.get("turns"), int):
        return None
    steps = _get(a, "steps_per_turn", "p50")
    mean = _get(a, "steps_per_turn", "mean")
    calls, errors = _count(a.get("tool_calls")), _count(a.get("tool_errors"))
    shown_steps = "-" if steps is None else f"{steps:g}"
    shown_mean = "-" if mean is None else f"{mean:.1f}"
    text = (
        f"agent: {shown_steps} steps per turn p50 (mean {shown_mean}), "
        f"time to answer p50 {_ms(_get(a, 'time_to_answer_ms', 'p50'))} p90 {_ms(_get(a, 'time_to_answer_ms', 'p90'))} "
        f"p99 {_ms(_get(a, 'time_to_answer_ms', 'p99'))}; p50 in tools {_ms(_get(a, 'time_in_tools_ms', 'p50'))}, "
        f"in the model {_ms(_get(a, 'time_in_model_ms', 'p50'))}, ttft {_ms(_get(a, 'ttft_overhead_ms', 'p50'), 1)} "
        f"per gap; {calls or 0} tool calls, {errors or 0} errors"
    )
    answered, turns = a.get("answered"), a["turns"]
    if isinstance(answered, int) and answered < turns:
        text += f"; {turns - answered} of {turns} turns without an answer"
    return text
