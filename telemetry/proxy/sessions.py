"""The app's sessions rebuilt from the proxy's traffic: its conversations, each as one agent turn.

``ttft proxy`` sees calls, not conversations. :func:`rebuild` joins each call's turn record and its
:class:`~telemetry.proxy.shape.CallShape` into the app's conversations and makes each one record in
the shape of the chat's tool-using turns (:func:`telemetry.agent.steps.join_turn`), so the pane, the
timeline, the exports, the spans and the diagnosis read it as they read the chat's.

How calls are joined, in this order of trust:

- a Responses call that names a ``previous_response_id`` continues the call whose answer had that id;
- a call that carries the results of tool calls an answer asked for (matched by call id) continues
  the conversation of that answer;
- a call whose message list starts with the last call's list (same system prompt) continues it: the
  message list only grows, by the answer and what the app adds. Only a call that began after that
  call ended continues it, so sub-agents started with the same words stay apart;
- a call under the app's session id header (``session_hint``) is only ever joined to a conversation
  under the same id; where its message list could not be read, it joins that id's latest one.

Anything else starts a conversation of its own: another system prompt (a sub-agent, a title call), a
message list that does not extend any. A call with ``retry_count`` above 0, or with the same message
list as a call that failed, is a retry of the same step: its own model step, marked ``retry``.

Each call is a model step (with its ``call_index``). The time from an answer that asked for tools to
the call that carries their results is the app's step: one ``tool`` step per tool named there, each
spanning that gap (so their time counts once in ``time_in_tools_ms``, as the chat's parallel calls
do), its server the client's name (or ``app``). The time between calls that no step covers is the
app's own (the person typing, the app thinking, a retry's back-off): ``agent.time_in_app_ms``, where
the chat has ttft's own work; the proxy does none between the app's calls, so its
``time_in_ttft_ms`` is 0. The parts add up to the session's span. ``max_steps`` is 0: the app's loop
has no cap the proxy knows of.

Where the app sent its own telemetry (``ttft proxy --otlp``: GenAI ``execute_tool`` spans, Claude Code's
tool events), :func:`rebuild` is given its tool spans and :mod:`telemetry.proxy.tool_join` matches them
to the tool steps: a step so matched runs for the span's time (``timing`` ``"span"``, with where the
span came from and how it was matched), and the rest of its gap is the app's own time, so
``time_in_tools_ms`` shrinks to what the tools took and ``time_in_app_ms`` grows by the rest. A step
nothing timed keeps its gap (``timing`` ``"gap"``). Every tool step says its gap (``gap_ms``).

The records' monotonic stamps are on the shapes' clock (the proxy's): where a record lacks its send
or its end (a call that failed before an answer), the shape's start and end stand in.
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from ..agent.steps import ToolStep, diagnose, join_turn
from ..duration import fmt_ms
from ..metrics import NS_PER_MS
from ..record import TurnRecord
from ..steps import AgentSummary, ModelStepRecord, StepRecord, Stopped, ToolStepRecord, of_kind
from .app_spans import AppToolSpan
from .shape import CallShape
from .tool_join import Gaps, Timed, join

APP_SERVER = "app"  # a tool step's server where the client did not name itself
APP_SHOWN_MS = 50.0  # the app's own time the diagnosis names, as it names ttft's own from 50 ms

Call = tuple[TurnRecord, CallShape]
_ListKey = tuple[str | None, str, int, str]  # session id, system digest, the list's length, its last digest
N = TypeVar("N", int, float)


@dataclass(frozen=True)
class ProxySession:
    """One conversation of the app, as one agent turn (see the module doc)."""

    key: str  # how it was grouped: the app's session header value, or a derived id
    client: str
    call_indices: tuple[int, ...]  # CallShape.call_index of each call, in order
    record: TurnRecord  # the session as one agent turn: ``steps`` and ``agent`` as join_turn makes them
    summary: str  # one line: where the session's time went
    trace_ids: tuple[str, ...] = ()  # the traces its calls carried (their traceparent), in order

    def to_dict(self) -> dict[str, Any]:
        """The session's turn record (``ttft.turn/2``), led by how it was grouped and its summary."""
        return {
            "key": self.key,
            "client": self.client,
            "call_indices": list(self.call_indices),
            "trace_ids": list(self.trace_ids),
            "summary": self.summary,
            **self.record.to_dict(),
        }


@dataclass(eq=False)
class _Conv:
    """A conversation being rebuilt: its calls so far and what the next call may continue."""

    hint: str | None
    system: str
    calls: list[tuple[TurnRecord, CallShape, bool]] = field(default_factory=list)  # (record, shape, retry)
    tools: list[ToolStep] = field(default_factory=list)
    last: CallShape | None = None
    last_key: _ListKey | None = None  # its place in the index of message lists
    asked: dict[str, str] = field(default_factory=dict)  # tool call id -> name, from the last answer
    asked_end: int = 0  # when that answer ended: the app's step begins there
    traces: dict[str, None] = field(default_factory=dict)  # its calls' trace ids, in order (an ordered set)


def _failed(shape: CallShape) -> bool:
    return shape.status is None or not 200 <= shape.status < 300


def _model_step(rec: TurnRecord) -> bool:
    """Not an Anthropic ``count_tokens`` call (the app asking a size): the proxy marks those in ``extra``."""
    return rec.extra.get("model_step") is not False


def _span(rec: TurnRecord, shape: CallShape) -> tuple[int, int]:
    """The call's model span on the proxy's clock: the record's send to its end, else the shape's."""
    ts = rec.timestamps
    if ts.sent is None:  # never sent: a stamp the record has (its finish) is on no clock of the call's
        return shape.start_ns, max(shape.end_ns, shape.start_ns)
    end = ts.end if ts.end is not None else shape.end_ns
    return ts.sent, max(end, ts.sent)


def _with_times(rec: TurnRecord, shape: CallShape) -> TurnRecord:
    """The record with a send and an end, so every call is a model step with a span."""
    ts = rec.timestamps
    if ts.sent is not None and ts.end is not None and ts.end >= ts.sent:
        return rec
    start, end = _span(rec, shape)
    return dataclasses.replace(rec, timestamps=dataclasses.replace(ts, sent=start, end=end))


class _Index:
    """Where each call may belong: by response id, by asked tool call id, by last message list."""

    def __init__(self) -> None:
        self.by_response: dict[str, _Conv] = {}
        self.by_asked: dict[tuple[str | None, str], _Conv] = {}
        self.by_answered: dict[tuple[str | None, str], _Conv] = {}  # results already carried: a retry's
        self.by_last: dict[_ListKey, dict[_Conv, None]] = {}  # by its last call's list: an ordered set
        self.lengths: dict[tuple[str | None, str], dict[int, int]] = {}  # those lists' lengths, counted
        self.per_hint: dict[str, list[_Conv]] = {}  # the conversations under each session id

    def find(self, shape: CallShape) -> tuple[_Conv | None, bool]:
        """The conversation this call continues (None: a new one), and whether the call retries a step."""
        hint = shape.session_hint
        prev = shape.previous_response_id
        if prev and (conv := self.by_response.get(prev)) is not None and conv.hint == hint:
            return conv, shape.retry_count > 0
        for cid in shape.tool_results:
            if (conv := self.by_asked.get((hint, cid))) is not None:
                return conv, shape.retry_count > 0
        for cid in shape.tool_results:
            conv = self.by_answered.get((hint, cid))
            if conv is not None and conv.last is not None and (shape.retry_count > 0 or _failed(conv.last)):
                return conv, True
        n = len(shape.message_digests)
        for k in self._lengths(shape):  # the longest list this one extends: the conversation's latest call
            conv = self._extended(shape, k)
            if conv is not None:
                last = conv.last
                assert last is not None
                return conv, shape.retry_count > 0 or (k == n == len(last.message_digests) and _failed(last))
        if hint is not None and n == 0 and not shape.tool_results and not prev:
            return self._latest(shape), shape.retry_count > 0  # unreadable body: the app's own id decides
        return None, False

    def _latest(self, shape: CallShape) -> _Conv | None:
        """The conversation under this call's session id whose last answer came last before it began."""
        before = [
            c for c in self.per_hint.get(shape.session_hint or "", ()) if c.last and c.last.end_ns <= shape.start_ns
        ]
        return max(before, key=lambda c: c.last.end_ns if c.last else 0, default=None)

    def _lengths(self, shape: CallShape) -> list[int]:
        """The lengths of list this call's may extend, longest first: those some conversation's last call
        sent (few: one per conversation at most), so a call costs no more than its list's length."""
        n = len(shape.message_digests)
        have = self.lengths.get((shape.session_hint, shape.system_digest), {})
        if len(have) >= n:
            return list(range(n, 0, -1))
        return sorted((k for k in have if 0 < k <= n), reverse=True)

    def _extended(self, shape: CallShape, k: int) -> _Conv | None:
        best: _Conv | None = None
        digests = shape.message_digests
        for conv in self.by_last.get((shape.session_hint, shape.system_digest, k, digests[k - 1]), ()):
            last = conv.last
            if last is None or last.message_digests != digests[:k]:
                continue  # the same length and last message, another list
            same = len(last.message_digests) == len(shape.message_digests)
            retry = shape.retry_count > 0 or (same and _failed(last))
            if not retry and last.end_ns > shape.start_ns:
                continue  # still running when this call began: a parallel conversation, not a next step
            if best is None or best.last is None or last.end_ns > best.last.end_ns:
                best = conv
        return best

    def add(self, conv: _Conv, rec: TurnRecord, shape: CallShape, retry: bool) -> None:
        """``shape``'s call joins ``conv``: the app's step it ends is kept, and the index moves on."""
        hint = shape.session_hint
        start, end = _span(rec, shape)
        answered = [(cid, conv.asked[cid]) for cid in shape.tool_results if cid in conv.asked]
        if answered:
            server = shape.client or APP_SERVER
            gap_end = max(start, conv.asked_end)
            conv.tools += [ToolStep(name, server, conv.asked_end, gap_end, "ok", call_id=cid) for cid, name in answered]
            for cid, _ in answered:
                self.by_answered[(hint, cid)] = conv
            for cid in conv.asked:
                self.by_asked.pop((hint, cid), None)
            conv.asked = {}
        if (old := conv.last_key) is not None:
            self.by_last[old].pop(conv, None)
            counts = self.lengths[old[:2]]
            counts[old[2]] -= 1
            if not counts[old[2]]:
                del counts[old[2]]
        conv.calls.append((rec, shape, retry))
        if shape.trace_id:
            conv.traces[shape.trace_id] = None
        conv.last = shape
        conv.last_key = None
        if digests := shape.message_digests:
            conv.last_key = (hint, shape.system_digest, len(digests), digests[-1])
            self.by_last.setdefault(conv.last_key, {})[conv] = None
            counts = self.lengths.setdefault((hint, shape.system_digest), {})
            counts[len(digests)] = counts.get(len(digests), 0) + 1
        if shape.response_id:
            self.by_response[shape.response_id] = conv
        if shape.tool_calls and not _failed(shape):
            for cid in conv.asked:  # an answer asked again: the earlier calls went unanswered
                self.by_asked.pop((hint, cid), None)
            conv.asked = {cid: name for cid, name in shape.tool_calls if cid}
            conv.asked_end = end
            for cid in conv.asked:
                self.by_asked[(hint, cid)] = conv
        if hint is not None and len(conv.calls) == 1:
            self.per_hint.setdefault(hint, []).append(conv)


def rebuild(calls: Sequence[Call], spans: Sequence[AppToolSpan] = ()) -> list[ProxySession]:
    """The app's sessions, in the order their first calls began (see the module doc). A ``count_tokens``
    call is in none: it is no model step. ``spans``: the app's own tool spans (``--otlp``), if any."""
    ordered = sorted(
        ((rec, shape) for rec, shape in calls if _model_step(rec)),
        key=lambda c: (c[1].start_ns, c[1].call_index),
    )
    index = _Index()
    convs: list[_Conv] = []
    for rec, shape in ordered:
        conv, retry = index.find(shape)
        if conv is None:
            conv = _Conv(shape.session_hint, shape.system_digest)
            convs.append(conv)
        index.add(conv, _with_times(rec, shape), shape, retry)
    timed = join([Gaps(frozenset(c.traces), c.tools) for c in convs], spans) if spans else None
    return _sessions(convs, timed)


def _sessions(convs: list[_Conv], timed: list[list[Timed | None]] | None) -> list[ProxySession]:
    out: list[ProxySession] = []
    per_hint: dict[str, int] = {}
    for k, conv in enumerate(convs):
        first_shape = conv.calls[0][1]
        if conv.hint is not None:
            n = per_hint.get(conv.hint, 0) + 1
            per_hint[conv.hint] = n
            key = conv.hint if n == 1 else f"{conv.hint}#{n}"  # a sub-agent under the same session id
        else:
            key = f"call-{first_shape.call_index}"
        out.append(_session(conv, key, timed[k] if timed is not None else None))
    return out


def _stopped(last: TurnRecord) -> Stopped:
    if last.status == "cancelled":
        return "cancelled"
    return "error" if last.status == "error" else "answer"


def _session(conv: _Conv, key: str, timed: Sequence[Timed | None] | None) -> ProxySession:
    # join_turn lists a model step per record in the order they began: the calls, in that same order
    calls = sorted(conv.calls, key=lambda c: (_span(c[0], c[1])[0], c[1].call_index))
    models = [rec for rec, _, _ in calls]
    row: Sequence[Timed | None] = timed if timed is not None else [None] * len(conv.tools)
    tools = [t.step if t is not None else gap for gap, t in zip(conv.tools, row, strict=True)]
    joined = join_turn(models, tools, stopped=_stopped(models[-1]), max_steps=0)
    assert joined.agent is not None  # join_turn's record always has its split
    agent = _split(joined.agent, models, tools)
    steps: list[StepRecord] = []
    marks = iter(calls)
    tool_marks = _tool_marks(conv.tools, tools, row)
    for st in joined.steps:
        if isinstance(st, ModelStepRecord):
            _, shape, retry = next(marks)
            st = dataclasses.replace(st, call_index=shape.call_index, retry=retry)
        elif isinstance(st, ToolStepRecord):
            st = dataclasses.replace(st, **next(tool_marks))
        steps.append(st)
    total = joined.metrics.total_ms
    own = joined.status == "error" or (not tools and len(models) == 1)  # as join_turn decides it
    diagnosis = joined.diagnosis if own else diagnose(agent, tools, total)
    app = agent.time_in_app_ms or 0.0
    if not own and app >= APP_SHOWN_MS:
        diagnosis += f" The app's own time between calls took {_d(app)}."
    # join_turn's record is new and this function's alone: set in place, as join_turn sets its diagnosis
    # (a replace() per session is a third of the time for thousands of one-call sessions)
    for name, value in (("steps", tuple(steps)), ("agent", agent), ("diagnosis", diagnosis)):
        object.__setattr__(joined, name, value)
    record = joined
    return ProxySession(
        key=key,
        client=calls[0][1].client,
        call_indices=tuple(shape.call_index for _, shape, _ in calls),
        record=record,
        summary=summarize(record),
        trace_ids=tuple(conv.traces),
    )


def _tool_marks(
    gaps: Sequence[ToolStep], tools: Sequence[ToolStep], row: Sequence[Timed | None]
) -> Iterator[dict[str, Any]]:
    """What each tool step adds, in the order join_turn lists them (by start, then as given): how it was
    timed, and its app step's gap."""
    for j in sorted(range(len(tools)), key=lambda j: (tools[j].start_ns, j)):
        gap_ms = round((gaps[j].end_ns - gaps[j].start_ns) / NS_PER_MS, 3)
        t = row[j]
        if t is None:
            yield {"timing": "gap", "gap_ms": gap_ms}
        else:
            yield {"timing": "span", "span_source": t.span.source, "matched_by": t.matched_by, "gap_ms": gap_ms}


def _split(joined: AgentSummary, models: Sequence[TurnRecord], tools: Sequence[ToolStep]) -> AgentSummary:
    """The session's span in the model, in the app's steps (tools) and in the app's own time. join_turn
    calls the rest ttft's; here it is the app's, as the proxy does nothing between calls. A model call
    that ran during a gap (traffic that does not follow the rules) counts as the model's: the parts add
    up to the span whatever the calls' times."""
    model_spans = [(r.timestamps.sent or 0, r.timestamps.end or 0) for r in models]  # set by _with_times
    every = model_spans + [(t.start_ns, t.end_ns) for t in tools]
    in_model, covered = _union(model_spans), _union(every)
    span = max(b for _, b in every) - min(a for a, _ in every)
    return dataclasses.replace(
        joined,
        time_in_model_ms=round(in_model / NS_PER_MS, 3),
        time_in_tools_ms=round((covered - in_model) / NS_PER_MS, 3),
        time_in_ttft_ms=0.0,
        time_in_app_ms=round((span - covered) / NS_PER_MS, 3),
    )


def _d(ms: float) -> str:
    """A duration as the summary says it: ``48 s`` from ten seconds on, ``1.9 s``, ``312 ms``."""
    return fmt_ms(ms, s_digits=0 if ms >= 10_000 else 1)


def _k(n: int) -> str:
    """Tokens as the summary says them: ``96k``, ``1.2k``, ``850``."""
    if n >= 10_000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def _union(spans: Sequence[tuple[N, N]]) -> N:
    """The time these spans cover, overlaps counted once."""
    total: Any = 0
    covered: Any = None
    for a, b in sorted(spans):
        if covered is None or a > covered:
            total, covered = total + b - a, b
        elif b > covered:
            total, covered = total + b - covered, b
    return cast(N, total)


def _by_tool(steps: Sequence[StepRecord]) -> list[tuple[str, float]]:
    """Each tool's time, longest first: the gaps it ran in, each counted once."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for s in of_kind(steps, ToolStepRecord):
        a, b = s.start_ms, s.end_ms
        if a is not None and b is not None:
            spans.setdefault(s.name, []).append((a, max(a, b)))
    return sorted(((name, _union(s)) for name, s in spans.items()), key=lambda kv: -kv[1])


def summarize(record: TurnRecord) -> str:
    """One line of where a session's time went: the whole, the model calls (TTFT p50, how the input grew,
    the share read from cache), the tools (the longest three by name) and the app's own time."""
    agent = record.agent or AgentSummary()
    in_model, in_tools, in_app = agent.time_in_model_ms, agent.time_in_tools_ms, agent.time_in_app_ms or 0.0
    total = in_model + in_tools + in_app + agent.time_in_ttft_ms
    models = of_kind(record.steps, ModelStepRecord)
    n = len(models)
    ttfts = [s.ttft_ms for s in models if s.ttft_ms is not None]
    # a failed call's counts are ttft's estimate of a request no model read: the answered calls' are the context
    answered = [t for s in models if s.status != "error" and (t := s.tokens) is not None]
    known = [t.input for t in answered if t.input is not None]
    cached = [(t.input, t.cached_input) for t in answered if t.input is not None and t.cached_input is not None]
    head: list[str] = []
    if ttfts:
        head.append(f"TTFT p50 {_d(statistics.median(ttfts))}")
    if len(known) >= 2 and known[-1] > known[0]:
        head.append(f"rising with the context from {_k(known[0])} to {_k(known[-1])} input tokens")
    elif len(known) >= 2 and known[-1] != known[0]:
        head.append(f"input from {_k(known[0])} to {_k(known[-1])} tokens")
    elif known:
        head.append(f"{_k(known[0])} input tokens" + (" each" if len(known) > 1 else ""))
    parts = [", ".join(head)] if head else []
    read = sum(i for i, _ in cached)
    if read:
        parts.append(f"{round(100 * sum(c for _, c in cached) / read)}% of input read from cache")
    failed = sum(1 for s in models if s.status == "error")
    retries = sum(1 for s in models if s.retry)
    if failed:
        parts.append(f"{failed} failed")
    if retries:
        parts.append(f"{retries} {'retry' if retries == 1 else 'retries'}")
    calls = f"{n} model call{'' if n == 1 else 's'}"
    text = f"Of {_d(total)}: {_d(in_model)} in {calls}" + (f" ({'; '.join(parts)})" if parts else "")
    if by_tool := _by_tool(record.steps):
        top = ", ".join(f"{name} {_d(ms)}" for name, ms in by_tool[:3])
        tool_steps = of_kind(record.steps, ToolStepRecord)
        if timed := sum(1 for s in tool_steps if s.timing == "span"):
            top += f"; {timed} of {len(tool_steps)} timed by the app's own telemetry"
        text += f", {_d(in_tools)} in tools ({top})"
    if n > 1 or in_app > 0:
        text += f", {_d(in_app)} in the app between calls"
    return text + "."
