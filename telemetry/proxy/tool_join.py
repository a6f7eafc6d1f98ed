"""The app's steps split by its own telemetry: each tool span joined to the tool step it timed.

:mod:`telemetry.proxy.sessions` makes a ``tool`` step of each tool an answer asked for, spanning the
app's whole step: from that answer's end to the call that carried the results. Where the app sent its
own spans (:class:`~telemetry.proxy.app_spans.AppToolSpan`), :func:`join` matches each to one such step,
in this order of trust:

1. by the API's call id (the span's ``gen_ai.tool.call.id``, Claude Code's ``tool_use_id``): among
   steps with that id, the one whose session shares the span's trace, then the one whose gap it
   overlaps most, then the nearest;
2. by trace: a span of a trace that some session's calls carried (their ``traceparent``) joins only
   that session's steps, of the same tool name, whose gap it overlaps;
3. by time: any other span joins a step of the same tool name whose gap it overlaps, in any session.

A span's name must be the step's where it has one; overlap allows :data:`SLACK_NS` either side (the
app's clock and the proxy's are one machine's, read by two processes). Each step takes at most one
span and each span times at most one step; a span whose call id belongs to a step that already has
one (the same run said twice: a span and an event) is left out. The step then runs for the span's
time, kept inside its gap (a tool can neither start before it was asked for nor end after its result
was sent): the rest of the gap is the app's own time.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..agent.steps import ToolStep
from ..metrics import NS_PER_MS
from .app_spans import AppToolSpan

MatchedBy = Literal["call_id", "trace_id", "time"]
SLACK_NS = int(50 * NS_PER_MS)
_FIRST = {"execute_tool": 0, "claude_code.tool_result": 1}  # a span is the better witness of the two

Place = tuple[int, int]  # (session, tool step) in join's input


@dataclass(frozen=True, slots=True)
class Gaps:
    """One session as the join sees it: the trace ids its calls carried, and its tool steps (each
    spanning its app step's gap), in the session's order."""

    traces: frozenset[str]
    tools: Sequence[ToolStep]


@dataclass(frozen=True, slots=True)
class Timed:
    """A tool step timed by the app's span: the step with the span's times (inside its gap), the span,
    and how the two were matched."""

    step: ToolStep
    span: AppToolSpan
    matched_by: MatchedBy


def _overlap(span: AppToolSpan, step: ToolStep) -> int:
    """How much of the span falls in the step's gap widened by the slack (-1: none at all)."""
    a, b = max(span.start_ns, step.start_ns - SLACK_NS), min(span.end_ns, step.end_ns + SLACK_NS)
    return b - a if b >= a else -1


def _distance(span: AppToolSpan, step: ToolStep) -> int:
    return max(0, step.start_ns - span.end_ns, span.start_ns - step.end_ns)


def timed(step: ToolStep, span: AppToolSpan, matched_by: MatchedBy) -> Timed:
    """``step`` run for the span's duration, placed where the span says as far as its gap allows."""
    gap_a, gap_b = step.start_ns, step.end_ns
    took = max(0, min(span.end_ns - span.start_ns, gap_b - gap_a))
    start = min(max(span.start_ns, gap_a), gap_b - took)
    status = step.status if span.ok is None else ("ok" if span.ok else "error")
    return Timed(dataclasses.replace(step, start_ns=start, end_ns=start + took, status=status), span, matched_by)


class _Window:
    """The untaken steps by their gaps' starts, for the spans matched by time (a span looks only at the
    gaps that could overlap it, not at every step of every session)."""

    def __init__(self, sessions: Sequence[Gaps], places: Iterable[Place]) -> None:
        self.sessions = sessions
        keyed = sorted((sessions[i].tools[j].start_ns, i, j) for i, j in places)
        self.starts = [k[0] for k in keyed]
        self.places = [(i, j) for _, i, j in keyed]
        self.longest = max((sessions[i].tools[j].end_ns - s for s, i, j in keyed), default=0)

    def best(self, span: AppToolSpan, taken: set[Place], within: set[int] | None) -> Place | None:
        """The untaken step of the span's tool whose gap it overlaps most (the earliest of equals)."""
        hi = bisect.bisect_right(self.starts, span.end_ns + SLACK_NS)
        lo = bisect.bisect_left(self.starts, span.start_ns - SLACK_NS - self.longest)
        best: tuple[int, Place] | None = None
        for k in range(lo, hi):
            i, j = self.places[k]
            if (i, j) in taken or (within is not None and i not in within):
                continue
            step = self.sessions[i].tools[j]
            if span.name and step.name != span.name:
                continue
            got = _overlap(span, step)
            if got >= 0 and (best is None or got > best[0]):
                best = (got, (i, j))
        return best[1] if best is not None else None


def join(sessions: Sequence[Gaps], spans: Sequence[AppToolSpan]) -> list[list[Timed | None]]:
    """Each session's tool steps, each with the span that timed it or None (see the module doc)."""
    out: list[list[Timed | None]] = [[None] * len(s.tools) for s in sessions]
    by_id: dict[str, list[Place]] = {}
    by_trace: dict[str, set[int]] = {}
    for i, s in enumerate(sessions):
        for j, t in enumerate(s.tools):
            if t.call_id:
                by_id.setdefault(t.call_id, []).append((i, j))
        for trace in s.traces:
            by_trace.setdefault(trace, set()).add(i)
    taken: set[Place] = set()

    def take(place: Place, span: AppToolSpan, how: MatchedBy) -> None:
        i, j = place
        taken.add(place)
        out[i][j] = timed(sessions[i].tools[j], span, how)

    later: list[AppToolSpan] = []
    for span in sorted(spans, key=lambda s: (_FIRST[s.source], s.start_ns, s.end_ns, s.call_id)):
        known = by_id.get(span.call_id) if span.call_id else None
        if not known:
            later.append(span)  # no step has its id (or it said none): matched by trace or time below
            continue
        free = [p for p in known if p not in taken]
        if free:  # else: that run was timed already (a span and an event of one tool run)
            take(min(free, key=lambda p: _id_rank(span, sessions, p)), span, "call_id")
    if not later:
        return out
    window = _Window(sessions, [(i, j) for i, s in enumerate(sessions) for j in range(len(s.tools))])
    for span in later:
        within = by_trace.get(span.trace_id) if span.trace_id else None
        place = window.best(span, taken, within)
        if place is not None:
            take(place, span, "trace_id" if within is not None else "time")
    return out


def _id_rank(span: AppToolSpan, sessions: Sequence[Gaps], place: Place) -> tuple[int, int, int, int, int]:
    """Which of the steps with the span's call id it timed: its trace's session first, then the gap it
    overlaps most, then the nearest, then the first."""
    i, j = place
    step = sessions[i].tools[j]
    same_trace = 0 if span.trace_id and span.trace_id in sessions[i].traces else 1
    return same_trace, -_overlap(span, step), _distance(span, step), i, j
