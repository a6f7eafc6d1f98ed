"""The steps of a tool-using turn, joined into one record: each step's times, the turn's split, its diagnosis.

A turn with tools is several model calls with tool calls between them (``backends.agent.loop``).
Each model step is recorded as a turn of its own (its TTFT, TPOT, tokens, wait split and server
figures); each tool call as a :class:`ToolStep`. :func:`join_turn` makes the one record the log
keeps: its top-level figures keep their meaning (TTFT and the wait split are the first model
step's, E2E runs to the last token of the final answer, tokens and cost are summed over the model
steps), and it adds ``steps`` (in order, ``start_ms``/``end_ms`` on the turn's clock, 0 at the first
send) and ``agent``: ``time_in_model_ms``, ``time_in_tools_ms``, ``time_in_ttft_ms`` (the rest of
the turn: ttft's own work between steps), ``step_count``, and how the loop ended (``stopped``).

Where someone was asked before a call ran (the chat's consent dialog), each wait for the answer is an
``approval`` step, and ``agent`` adds ``time_in_approval_ms`` and ``approval_steps``: a person's time
to decide is neither the model's, the tools' nor ttft's. A turn nobody was asked about has neither.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..cost import Cost
from ..metrics import NS_PER_MS, TokenCounts
from ..record import ErrorInfo, Status, TurnRecord
from ..recorder import TurnRecorder
from ..steps import (
    RUNNING,
    AgentSummary,
    ApprovalStepRecord,
    ModelStepRecord,
    StepRecord,
    Stopped,
    ToolStepRecord,
)

# "refused": ttft did not run the call, its arguments being past the untrusted-JSON guard's limits.
ToolStatus = Literal["ok", "error", "denied", "cancelled", "refused"]
# The person's answer to a call they were asked about; "cancelled": the turn stopped while they were asked.
ApprovalAnswer = Literal["once", "always", "deny", "cancelled"]

MAX_STEPS_NOTICE = "max_steps"
TRUNCATED_NOTICE = "tool_result_truncated"
ARGUMENTS_REFUSED_NOTICE = "tool_arguments_refused"


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One tool call as run: its name, its server, when it ran (monotonic ns), how it ended, and the size
    of its result before any cut (``truncated``: the text the model got was cut to the host's cap)."""

    name: str
    server: str
    start_ns: int
    end_ns: int
    status: ToolStatus
    result_bytes: int = 0
    truncated: bool = False
    call_id: str = ""


@dataclass(frozen=True, slots=True)
class ApprovalStep:
    """The wait for a person's answer before a call (monotonic ns), and the answer."""

    name: str
    server: str
    start_ns: int
    end_ns: int
    answer: ApprovalAnswer
    call_id: str = ""


def _ms(t: int | None, origin: int) -> float | None:
    return None if t is None else round((t - origin) / NS_PER_MS, 3)


def _model_span(rec: TurnRecord) -> tuple[int | None, int | None]:
    ts = rec.timestamps
    start = ts.sent if ts.sent is not None else ts.end
    return start, ts.end


def model_step(rec: TurnRecord, origin: int) -> ModelStepRecord:
    """One model step as the record lists it: its span on the turn's clock and its own figures."""
    start, end = _model_span(rec)
    m = rec.metrics
    return ModelStepRecord(
        start_ms=_ms(start, origin),
        end_ms=_ms(end, origin),
        duration_ms=_ms(end, start) if start is not None else None,
        status=rec.status,
        stop_reason=rec.stop_reason,
        attempts=len(rec.attempts),
        ttft_ms=m.ttft_ms,
        ttfvt_ms=m.ttfvt_ms,
        tpot_ms=m.tpot_ms,
        e2e_ms=m.e2e_ms,
        wait_ms=m.wait_ms,
        server_queue_ms=m.server_queue_ms,
        server_ttft_ms=m.server_ttft_ms,
        server_rest_ms=m.server_rest_ms,
        server_timing_source=m.server_timing_source,
        tokens=rec.tokens,
        tool_calls=len(rec.tool_calls),
    )


def _call_span(step: ToolStep | ApprovalStep, origin: int) -> dict[str, Any]:
    """What a tool step and a wait for approval both list: the call's span on the turn's clock, its names."""
    return {
        "start_ms": _ms(step.start_ns, origin),
        "end_ms": _ms(step.end_ns, origin),
        "name": step.name,
        "server": step.server,
        "call_id": step.call_id,
        "duration_ms": round((step.end_ns - step.start_ns) / NS_PER_MS, 3),
    }


def tool_step(step: ToolStep, origin: int) -> ToolStepRecord:
    """One tool call as the record lists it: its span on the turn's clock, how it ended, its result's size."""
    return ToolStepRecord(
        **_call_span(step, origin), status=step.status, result_bytes=step.result_bytes, truncated=step.truncated
    )


def approval_step(step: ApprovalStep, origin: int) -> ApprovalStepRecord:
    """One wait for a person's answer as the record lists it."""
    return ApprovalStepRecord(**_call_span(step, origin), answer=step.answer)


def _union_ms(spans: Sequence[tuple[int, int]]) -> float:
    """The time covered by these spans (parallel tool calls overlap: their time counts once)."""
    total = 0
    end_so_far: int | None = None
    for a, b in sorted(spans):
        if end_so_far is None or a > end_so_far:
            total += b - a
            end_so_far = b
        elif b > end_so_far:
            total += b - end_so_far
            end_so_far = b
    return total / NS_PER_MS


def split(
    models: Sequence[TurnRecord], tools: Sequence[ToolStep], approvals: Sequence[ApprovalStep] = ()
) -> tuple[float, float, float, float | None]:
    """The turn's time from the first send to the last step's end: in the model, in tools, and the
    rest (ttft's own work between steps: reading the calls, starting the next request). With
    ``approvals``, the time a person took to answer (else None), which is not ttft's."""
    model_spans = [(a, b) for a, b in map(_model_span, models) if a is not None and b is not None]
    tool_spans = [(t.start_ns, t.end_ns) for t in tools]
    asked = [(w.start_ns, w.end_ns) for w in approvals]
    every = model_spans + tool_spans + asked
    in_model = in_tools = own = 0.0
    if every:
        span = (max(b for _, b in every) - min(a for a, _ in every)) / NS_PER_MS
        in_model = round(_union_ms(model_spans), 3)
        in_tools = round(_union_ms(tool_spans), 3)
        own = round(max(0.0, span - _union_ms(every)), 3)
    return in_model, in_tools, own, round(_union_ms(asked), 3) if approvals else None


def _s(ms: float) -> str:
    return f"{ms / 1000:.1f} s" if ms >= 1000 else f"{ms:.0f} ms"


def _of(part: float, total: float) -> str:
    """``2.9 of 4.1 s`` (one unit said once where both are seconds), else ``270 ms of 530 ms``."""
    if part >= 1000 and total >= 1000:
        return f"{part / 1000:.1f} of {total / 1000:.1f} s"
    return f"{_s(part)} of {_s(total)}"


def diagnose(agent: AgentSummary, tools: Sequence[ToolStep], total_ms: float | None) -> str:
    """One sentence naming the part that took the most of the turn: a tool (the one that took longest,
    by name and server), or the model's own steps; then how the loop ended when not with an answer."""
    in_model, in_tools, own = agent.time_in_model_ms, agent.time_in_tools_ms, agent.time_in_ttft_ms
    total = total_ms if total_ms is not None else in_model + in_tools + own
    by_tool: dict[tuple[str, str], float] = {}
    for t in tools:
        key = (t.name, t.server)
        by_tool[key] = by_tool.get(key, 0.0) + (t.end_ns - t.start_ns) / NS_PER_MS
    n = agent.step_count
    if by_tool and in_tools > in_model:
        (name, server), took = max(by_tool.items(), key=lambda kv: kv[1])
        where = f" on server `{server}`" if server else ""
        others = f" (all tools {_s(in_tools)})" if len(by_tool) > 1 else ""
        text = (
            f"{_of(took, total)} went to the tool `{name}`{where}{others}; the model's own steps took {_s(in_model)}."
        )
    else:
        tools_part = f"; tools took {_s(in_tools)}" if tools else ""
        text = f"{_of(in_model, total)} went to the model's own steps ({n} steps in all){tools_part}."
    if own >= 50:
        text += f" ttft's own work between steps took {_s(own)}."
    if agent.time_in_approval_ms:
        text += f" Waiting for your approval took {_s(agent.time_in_approval_ms)}."
    match agent.stopped:
        case "max_steps":
            text += f" The loop stopped at --max-steps ({agent.max_steps}) before a final answer."
        case "denied":
            text += " It stopped at a tool call that was not allowed (--allow-tool NAME or --allow-tools)."
        case "cancelled":
            text += " Cancelled: every step that arrived is kept."
    return text


def _sum(values: Sequence[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _tokens(models: Sequence[TurnRecord]) -> TokenCounts:
    ts = [r.tokens for r in models]
    source = ts[0].source if all(t.source == ts[0].source for t in ts) else "estimated"
    return TokenCounts(
        input=_sum([t.input for t in ts]),
        cached_input=_sum([t.cached_input for t in ts]),
        output=_sum([t.output for t in ts]),
        reasoning=_sum([t.reasoning for t in ts]),
        source=source,
        cache_write_input=_sum([t.cache_write_input for t in ts]),
    )


def _cost(models: Sequence[TurnRecord]) -> Cost | None:
    costs = [r.cost for r in models]
    if not costs or any(c is None for c in costs):
        return None  # one step unpriced: a sum would say less than the turn cost
    first = costs[0]
    assert first is not None
    return Cost(
        input_usd=sum(c.input_usd for c in costs if c),
        output_usd=sum(c.output_usd for c in costs if c),
        total_usd=sum(c.total_usd for c in costs if c),
        priced_as=first.priced_as,
        source=first.source,
    )


def join_turn(
    models: Sequence[TurnRecord],
    tools: Sequence[ToolStep],
    *,
    stopped: Stopped,
    max_steps: int,
    error: ErrorInfo | None = None,
    notices: dict[str, Any] | None = None,
    approvals: Sequence[ApprovalStep] = (),
) -> TurnRecord:
    """The one record of a tool-using turn (see the module doc). ``models``: at least one step's record,
    in order; ``tools``: the tool steps in the order they began. ``error``: the turn's own failure where
    no model step failed (a call that was not allowed). ``approvals``: the waits for a person's answer."""
    first, last = models[0], models[-1]
    origin = first.timestamps.sent
    if origin is None:
        origin = first.timestamps.end or 0
    order: list[tuple[int, int, StepRecord]] = []
    for i, rec in enumerate(models):
        start, _ = _model_span(rec)
        order.append((start if start is not None else origin, i, model_step(rec, origin)))
    for j, t in enumerate(tools):
        order.append((t.start_ns, len(models) + j, tool_step(t, origin)))
    for k, w in enumerate(approvals):  # a wait begins before the call it asks about: ordered by its start
        order.append((w.start_ns, len(models) + len(tools) + k, approval_step(w, origin)))
    steps = tuple(d for _, _, d in sorted(order, key=lambda o: (o[0], o[1])))
    in_model, in_tools, own, asked = split(models, tools, approvals)
    agent = AgentSummary(
        time_in_model_ms=in_model,
        time_in_tools_ms=in_tools,
        time_in_ttft_ms=own,
        time_in_approval_ms=asked,
        step_count=len(models) + len(tools),
        model_steps=len(models),
        tool_steps=len(tools),
        max_steps=max_steps,
        stopped=stopped,
        approval_steps=len(approvals) if approvals else None,
    )
    status: Status = last.status
    if stopped == "cancelled":
        status = "cancelled"
    elif error is not None:
        status = "error"
    err = error if error is not None else last.error
    ts = first.timestamps
    ends = [r.timestamps for r in models]
    last_token = next((t.last_token for t in reversed(ends) if t.last_token is not None), None)
    first_visible = next((t.first_visible for t in ends if t.first_visible is not None), None)
    # The turn ends with its last step: a call cancelled mid-run (Esc) ends after the model step that asked for it.
    end = last.timestamps.end
    later = [t.end_ns for t in tools] + [w.end_ns for w in approvals]
    if later and end is not None:
        end = max(end, *later)
    timestamps = dataclasses.replace(ts, first_visible=first_visible, last_token=last_token, end=end)
    sent = ts.sent
    e2e = (last_token - sent) / NS_PER_MS if last_token is not None and sent is not None else None
    total = (end - sent) / NS_PER_MS if end is not None and sent is not None else None
    tokens = _tokens(models)
    metrics = dataclasses.replace(
        first.metrics,
        ttfvt_ms=(first_visible - sent) / NS_PER_MS if first_visible is not None and sent is not None else None,
        e2e_ms=e2e,
        total_ms=total,
        output_tokens_per_s=tokens.output / (e2e / 1000) if e2e and tokens.output else None,
    )
    merged_notices: dict[str, Any] = {}
    for r in models:
        merged_notices.update(r.notices)
    merged_notices.update(notices or {})
    calls: list[dict[str, str]] = []
    for r in models:
        calls += r.tool_calls
    rec = dataclasses.replace(
        first,
        status=status,
        error=err,
        answer="\n\n".join(r.answer for r in models if r.answer),
        reasoning="\n\n".join(r.reasoning for r in models if r.reasoning),
        timestamps=timestamps,
        metrics=metrics,
        tokens=tokens,
        chunks=tuple(c for r in models for c in r.chunks),
        stop_reason=last.stop_reason,
        tool_calls=tuple(calls),
        notices=merged_notices,
        cost=_cost(models),
        steps=steps,
        agent=agent,
    )
    # A model step's own failure is said as that step's diagnosis says it; any other end, by the split.
    # A turn that called no tool reads as any turn does.
    own = (status == "error" and error is None) or (not tools and len(models) == 1 and stopped != "max_steps")
    object.__setattr__(rec, "diagnosis", last.diagnosis if own else diagnose(agent, tools, total))
    return rec


def live_steps(
    recorders: Sequence[TurnRecorder],
    tools: Sequence[ToolStep],
    approvals: Sequence[ApprovalStep],
    running: Sequence[ToolStep],
    now_ns: int,
    asking: ApprovalStep | None = None,
) -> tuple[StepRecord, ...]:
    """A turn in flight's steps so far, in the record's form (kind, ``start_ms``/``end_ms`` on the turn's
    clock; a model step's ``ttft_ms``/``ttfvt_ms``), for a live view: the model step still streaming, the
    calls still running (``status`` ``running``) and the call being ``asking`` about (``answer`` None)
    end at ``now_ns``. Empty until the first send."""
    sent = [(r, r.attempts[0].sent_ns) for r in recorders if r.attempts]
    if not sent:
        return ()
    origin = sent[0][1]
    order: list[tuple[int, int, StepRecord]] = []
    for i, (r, start) in enumerate(sent):
        first = r.chunks[0].t_ns if r.chunks else None
        vis = r.first_visible_ns
        end = r.end_ns if r.end_ns is not None else now_ns
        step = ModelStepRecord(
            start_ms=_ms(start, origin),
            end_ms=_ms(end, origin),
            duration_ms=_ms(end, start),
            status=r.status or RUNNING,
            ttft_ms=_ms(first, start),
            ttfvt_ms=_ms(vis, start),
        )
        order.append((start, i, step))
    n = len(order)
    for j, t in enumerate(tools):
        order.append((t.start_ns, n + j, tool_step(t, origin)))
    n = len(order)
    for j, t in enumerate(running):
        step_so_far = tool_step(dataclasses.replace(t, end_ns=max(now_ns, t.start_ns)), origin)
        order.append((t.start_ns, n + j, dataclasses.replace(step_so_far, status=RUNNING)))
    n = len(order)
    for j, w in enumerate(approvals):
        order.append((w.start_ns, n + j, approval_step(w, origin)))
    if asking is not None:
        wait = approval_step(dataclasses.replace(asking, end_ns=max(now_ns, asking.start_ns)), origin)
        order.append((asking.start_ns, n + len(approvals), dataclasses.replace(wait, answer=None)))
    return tuple(d for _, _, d in sorted(order, key=lambda o: (o[0], o[1])))
