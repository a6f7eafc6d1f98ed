"""Invariants that must hold for any event sequence a backend could produce."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st
from pytest import approx
from ttft.telemetry import events as ev
from ttft.telemetry.metrics import percentiles

from tests.support.turns import MS, T0, play, recorder

chunk_kind = st.sampled_from(["reasoning", "text", "tool"])


@st.composite
def turns(draw: st.DrawFn) -> list[ev.Event]:
    t = T0
    out: list[ev.Event] = []
    attempts = draw(st.integers(1, 3))
    for a in range(1, attempts + 1):
        out.append(ev.AttemptSent(t, a))
        t += draw(st.integers(0, 500)) * MS
        out.append(ev.HeadersReceived(t, a, 200 if a == attempts else 429))
        t += draw(st.integers(0, 500)) * MS
    for kind in draw(st.lists(chunk_kind, max_size=40)):
        t += draw(st.integers(0, 300)) * MS
        n = draw(st.one_of(st.none(), st.integers(1, 8)))
        text = draw(st.text(min_size=1, max_size=12))
        if kind == "reasoning":
            out.append(ev.ReasoningDelta(t, text, n))
        elif kind == "text":
            out.append(ev.TextDelta(t, text, n))
        else:
            out.append(ev.ToolCallDelta(t, "f", text, n))
    if draw(st.booleans()):
        out.append(ev.Usage(t, draw(st.integers(0, 99)), 0, draw(st.integers(0, 400)), draw(st.integers(0, 100))))
    t += draw(st.integers(0, 50)) * MS
    end = draw(st.sampled_from(["ok", "error", "cancelled"]))
    out.append(ev.Finished(t) if end == "ok" else ev.Failed(t, "x", "boom") if end == "error" else ev.Cancelled(t))
    return out


@settings(max_examples=300, deadline=None)
@given(turns())
def test_turn_invariants(events: list[ev.Event]) -> None:
    rec = play(events)
    m = rec["metrics"]
    ttft, ttfvt, e2e = m["ttft_ms"], m["ttfvt_ms"], m["e2e_ms"]
    eps = 1e-6
    if ttft is not None:
        assert e2e is not None and ttft <= e2e + eps
        if ttfvt is not None:
            assert ttft <= ttfvt + eps <= e2e + 2 * eps
        # The phases of the timeline add up to E2E.
        assert abs(sum(m["phases_ms"].values()) - e2e) < 1e-3
    else:
        assert ttfvt is None and e2e is None
    assert all(v >= 0 for v in m["phases_ms"].values())
    itl = [m["itl_ms"][k] for k in ("p50", "p90", "p95", "p99", "max")]
    if itl[0] is not None:
        assert itl == sorted(itl)
    assert m["retry_ms"] >= 0
    # Token counts come from one source, never mixed.
    tok = rec["tokens"]
    assert tok["source"] in ("usage", "estimated")
    had_usage = any(isinstance(e, ev.Usage) for e in events)
    assert (tok["source"] == "usage") == had_usage
    if tok["source"] == "estimated":
        assert tok["output"] == sum(c["tokens"] for c in rec["chunks"])
        assert tok["cached_input"] is None
    if m["reasoning_delay_estimated"]:
        assert tok["source"] == "usage" and not any(c["kind"] == "reasoning" for c in rec["chunks"])


@settings(deadline=None)  # no per-example time limit: a loaded CI machine would trip it (Flaky)
@given(st.lists(st.floats(0, 1e6, allow_nan=False), min_size=1, max_size=200))
def test_percentiles_are_ordered(values: list[float]) -> None:
    p = percentiles(values)
    ordered = [p.min, p.p50, p.p90, p.p95, p.p99, p.max]
    assert all(a <= b + 1e-9 for a, b in pairwise(ordered))


@settings(max_examples=200, deadline=None)
@given(turns(), st.integers(0, 12_000))
def test_live_snapshot_equals_a_pass_over_every_chunk(events: list[ev.Event], at_ms: int) -> None:
    """The snapshot (taken every frame) keeps running totals; at any moment of a turn they equal
    what a pass over every chunk so far gives."""
    from ttft.telemetry.recorder import SPEED_WINDOW_NS

    now = T0 + at_ms * MS
    rec = recorder()
    for e in events:
        if e.t_ns > now or isinstance(e, ev.Finished | ev.Failed | ev.Cancelled):
            break
        rec.feed(e)
    snap = rec.snapshot(now)
    chunks = rec.chunks
    first_visible = next((c.t_ns for c in chunks if c.kind != "reasoning"), None)
    assert snap.ttfvt_ms == (None if first_visible is None else (first_visible - T0) / 1e6)
    recent = [c for c in chunks if c.t_ns >= now - SPEED_WINDOW_NS]
    span_s = (recent[-1].t_ns - recent[0].t_ns) / 1e9 if len(recent) > 1 else 0
    n = sum(c.tokens for c in recent[1:])
    if span_s > 0 and n:
        assert snap.tokens_per_s == approx(n / span_s)
    else:
        assert snap.tokens_per_s is None
