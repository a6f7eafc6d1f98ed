"""A turn's phases on its own time axis, for drawing timelines (the drawing itself is the UI's job).

Works on typed records (a logged turn is read with ``TurnRecord.from_dict``, so it redraws as it
was drawn) and on live snapshots. Times are ms from the first send, as the record's dict form
writes them; what came before it has a negative start: a local model
load, and before that ttft's own delay (``client``: the user's submit -> the send, shown once
it is at least ``OWN_DELAY_SHOWN_MS``).

A turn whose wait was split on the wire (``metrics.wait_ms`` with a network part) draws its
waiting as three parts on the same axis: ``waiting`` (earlier attempts and the pool),
``network`` (dns + connect + tls + send) and ``server`` (request written -> first token).

A tool-using turn (its record's ``steps``) draws each step as its own segments: a model step as its
wait, reasoning and answer (from its own TTFT and TTFVT), a tool call as ``tool``, a wait for the
person's approval as ``approval``, and the time between steps that none of them covers as ``ttft``
(ttft's own work: reading the calls, sending the next request), or as ``app`` in a session ``ttft
proxy`` rebuilt from another app's calls (``agent.time_in_app_ms``: that app's own time, not ttft's).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from ..diagnosis import STALL_FACTOR
from ..metrics import OWN_DELAY_SHOWN_MS, TurnMetrics
from ..record import TurnRecord
from ..recorder import Snapshot
from ..steps import ModelStepRecord, StepRecord
from ..wire import WaitSplit

STALL_MIN_MS = 100.0  # a gap a person can see; below it a 10x jump is jitter, not a stall


@dataclass(frozen=True, slots=True)
class Segment:
    phase: str  # client | loading | waiting | network | server | reasoning | streaming | tool | approval | ttft | app
    start_ms: float
    end_ms: float


@dataclass(frozen=True, slots=True)
class Marker:
    kind: str  # retry | stall
    at_ms: float
    label: str


@dataclass(frozen=True, slots=True)
class Timeline:
    segments: tuple[Segment, ...]
    markers: tuple[Marker, ...]
    start_ms: float  # <= 0 when ttft's own delay or a model load came first
    end_ms: float
    status: str  # ok | error | cancelled | live phase

    @property
    def span_ms(self) -> float:
        return self.end_ms - self.start_ms


def stalls(chunk_times_ms: Sequence[float], factor: float = STALL_FACTOR, min_ms: float = STALL_MIN_MS) -> list[Marker]:
    """Gaps far above the median gap (``factor`` x median and at least ``min_ms``), marked where they start."""
    gaps = [(a, b - a) for a, b in pairwise(chunk_times_ms)]
    if len(gaps) < 2:
        return []
    median = statistics.median(g for _, g in gaps)
    limit = max(factor * median, min_ms)
    return [Marker("stall", at, f"stall {gap:.0f} ms") for at, gap in gaps if gap >= limit]


def _seg(phase: str, a: float | None, b: float | None) -> list[Segment]:
    if a is None or b is None or b <= a:
        return []
    return [Segment(phase, a, b)]


def _client(own_ms: float | None, before_ms: float) -> list[Segment]:
    """ttft's own delay, drawn just before ``before_ms`` (the load's start, else the send)."""
    if own_ms is None or own_ms < OWN_DELAY_SHOWN_MS:
        return []
    return _seg("client", before_ms - own_ms, before_ms)


def step_segments(steps: Sequence[StepRecord], rest: str = "ttft") -> list[Segment]:
    """A tool-using turn's steps (the record's ``steps``, or a live turn's so far) as segments, with the
    gaps no step covers as ``rest`` (``ttft``; ``app`` for a proxied app's session). A step without its
    times (a hand-edited line) is left out."""
    segs: list[Segment] = []
    spans: list[tuple[float, float]] = []
    for st in steps:
        a, b = st.start_ms, st.end_ms
        if a is None or b is None or b < a:
            continue
        spans.append((a, b))
        if isinstance(st, ModelStepRecord):
            first = a + st.ttft_ms if st.ttft_ms is not None else None
            shown = a + st.ttfvt_ms if st.ttfvt_ms is not None else None
            segs += _seg("waiting", a, min(first, b) if first is not None else b)
            if first is not None:
                segs += _seg("reasoning", first, min(shown, b) if shown is not None else b)
            if shown is not None:
                segs += _seg("streaming", max(shown, a), b)
        else:
            segs += _seg(st.kind, a, max(b, a))
    covered: float | None = None
    for a, b in sorted(spans):
        if covered is not None and a > covered:
            segs += _seg(rest, covered, a)
        covered = b if covered is None else max(covered, b)
    return segs


def turn_timeline(rec: TurnRecord) -> Timeline:
    if rec.steps:
        return _steps_timeline(rec)
    ev = rec.timestamps.relative_ms()  # the record's events_ms
    m = rec.metrics
    status = rec.status or "ok"
    first, vis, last, end = ev["first_token"], ev["first_visible"], ev["last_token"], ev["end"]
    stop = last if last is not None else end if end is not None else 0.0
    load = m.load_ms
    segs: list[Segment] = []
    start = 0.0
    if load:
        start = -float(load)
        segs += _seg("loading", start, 0.0)
    client = _client(m.own_delay_ms, start)
    if client:
        start = client[0].start_ms
    segs = client + segs
    # the split as logged (to the us), so a live record and its log line draw the same boundaries
    wait = WaitSplit.from_dict(m.wait_ms.to_dict()) if m.wait_ms is not None else None
    if first is not None and wait is not None and wait.network_ms > 0:
        segs += _wait_parts(wait, float(first))
    else:
        segs += _seg("waiting", 0.0, first if first is not None else (end or 0.0))
    if first is not None:
        segs += _seg("reasoning", first, vis if vis is not None else stop)
    if vis is not None:
        segs += _seg("streaming", vis, stop)
    t0 = _origin_ns(rec)
    markers: list[Marker] = []
    for prev, cur in pairwise(rec.attempts):
        why = f"after {prev.status}" if prev.status else "after an error"
        markers.append(Marker("retry", (cur.sent_ns - t0) / 1e6, f"attempt {cur.attempt} {why}"))
    # the chunk stamps as the log writes them (to the us), so a logged turn marks the same stalls
    markers += stalls([round((c.t_ns - t0) / 1e6, 3) for c in rec.chunks])
    end_ms = max([s.end_ms for s in segs] + [end or 0.0, stop or 0.0, 0.0])
    return Timeline(tuple(segs), tuple(markers), start, end_ms, status)


def _steps_timeline(rec: TurnRecord) -> Timeline:
    """A tool-using turn: ttft's own delay before the first send, then each step (``step_segments``)."""
    segs = step_segments(rec.steps, rec.agent.between_steps[0] if rec.agent is not None else "ttft")
    client = _client(rec.metrics.own_delay_ms, 0.0)
    start = client[0].start_ms if client else 0.0
    end = rec.timestamps.relative_ms()["end"]
    end_ms = max([s.end_ms for s in segs] + [end or 0.0, 0.0])
    return Timeline(tuple(client + segs), (), start, end_ms, rec.status or "ok")


def live_steps_timeline(steps: Sequence[StepRecord], own_delay_ms: float | None, phase: str) -> Timeline:
    """A tool-using turn in flight, from its steps so far (``telemetry.agent.steps.live_steps``)."""
    segs = step_segments(steps)
    client = _client(own_delay_ms, 0.0)
    start = client[0].start_ms if client else 0.0
    end_ms = max([s.end_ms for s in segs] + [0.0])
    return Timeline(tuple(client + segs), (), start, end_ms, phase)


def _origin_ns(rec: TurnRecord) -> int:
    """The record's time zero: its first send, else its first chunk (as its dict form counts)."""
    sent = rec.timestamps.sent
    return sent if sent is not None else (rec.chunks[0].t_ns if rec.chunks else 0)


def _wait_parts(wait: WaitSplit, first_ms: float) -> list[Segment]:
    """The wait as waiting (retries, pool) -> network -> server -> client (ttft's own loop lag, where the
    split names it), ending exactly at the first token."""
    a = min(wait.retries + wait.pool, first_ms)
    b = min(a + wait.network_ms, first_ms)
    c = max(b, first_ms - wait.client_lag)
    return _seg("waiting", 0.0, a) + _seg("network", a, b) + _seg("server", b, c) + _seg("client", c, first_ms)


def live_timeline(snap: Snapshot, attempts: Sequence[Any] = ()) -> Timeline:
    """The turn in flight, from a recorder snapshot (``attempts``: the recorder's Attempt list, for retry marks)."""
    now = snap.elapsed_ms
    segs: list[Segment] = []
    start = 0.0
    if snap.load_ms:
        start = -snap.load_ms if snap.phase != "loading" else 0.0
        segs += _seg("loading", start, start + snap.load_ms)
    client = _client(snap.own_delay_ms, start)
    if client:
        start = client[0].start_ms
    segs = client + segs
    if snap.phase not in ("loading", "queued", "starting"):
        wait_end = snap.ttft_ms if snap.ttft_ms is not None else now
        if snap.wait_ms is not None and snap.wait_ms.network_ms > 0:  # split live, as the record will be
            segs += _wait_parts(snap.wait_ms, wait_end)
        else:
            segs += _seg("waiting", 0.0, wait_end)
        if snap.ttft_ms is not None:
            segs += _seg("reasoning", snap.ttft_ms, snap.ttfvt_ms if snap.ttfvt_ms is not None else now)
        if snap.ttfvt_ms is not None:
            segs += _seg("streaming", snap.ttfvt_ms, now)
    markers: list[Marker] = []
    if len(attempts) > 1:
        t0 = attempts[0].sent_ns
        for prev, cur in pairwise(attempts):
            why = f"after {prev.status}" if prev.status else "after an error"
            markers.append(Marker("retry", (cur.sent_ns - t0) / 1e6, f"attempt {cur.attempt} {why}"))
    return Timeline(tuple(segs), tuple(markers), start, max(now, 0.0), snap.phase)


PHASE_ORDER = ("waiting", "reasoning", "streaming")


def phase_spans(metrics: TurnMetrics) -> list[Segment]:
    """A turn's ``phases_ms`` laid end to end from its send (waiting, then reasoning, then streaming):
    one bar per turn in a report's timeline. A phase that took no time is left out."""
    out: list[Segment] = []
    t = 0.0
    for name in PHASE_ORDER:
        d = float(metrics.phases_ms.get(name) or 0.0)
        if d > 0:
            out.append(Segment(name, t, t + d))
            t += d
    return out
