"""ITL percentiles computed for a batch of turns are the ones each turn computes alone, bit for bit."""

from __future__ import annotations

import copy
import math
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ttft.backends.finish import finish_turn, finish_turns
from ttft.telemetry import events as ev
from ttft.telemetry.log.turns import SessionLog, read_records
from ttft.telemetry.metrics import (
    Chunk,
    Percentiles,
    Timestamps,
    TokenCounts,
    compute,
    itl_gaps,
    percentiles,
    percentiles_many,
)
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.recorder import TurnRecorder

from tests.support.turns import at, recorder, stream


def same(a: Percentiles, b: Percentiles) -> bool:
    """Equal figures, with == on the floats (so 0.1 + 0.2 != 0.3 fails), and their JSON forms in the same order."""
    da, db = a.to_dict(), b.to_dict()
    return list(da) == list(db) and all(da[k] == db[k] for k in da)


def test_rows_of_every_kind_match_one_by_one() -> None:
    rows: list[list[float]] = [
        [],
        [3.25],
        [10.0, 10.0, 10.0],  # equal values
        [0.1, 0.2, 0.30000000000000004],
        [5.0, 1.0, 3.0],  # same length as the two above: one group of three
        [1e-9, 1e9, 7.5, 7.5],
        [],
        [2.0, 4.0],
    ]
    got = percentiles_many(rows)
    assert len(got) == len(rows)
    for row, batched in zip(rows, got, strict=True):
        assert same(batched, percentiles(row)), row
    assert got[0] == got[6] == Percentiles()
    assert got[0].to_dict() == dict.fromkeys(("p50", "p90", "p95", "p99", "mean", "min", "max"))
    assert percentiles_many([]) == []


def test_a_group_of_one_length_gives_each_row_its_own_figures() -> None:
    rows = [[float(i + j) for j in range(31)] for i in range(64)]
    got = percentiles_many(rows)
    assert [p.min for p in got] == [float(i) for i in range(64)]
    assert [p.p50 for p in got] == [i + 15.0 for i in range(64)]


# Gaps as a stream gives them (ns differences / 1e6), plus arbitrary finite floats and a few
# values drawn often, so rows have ties and repeated values.
GAP = st.one_of(
    st.integers(0, 10**10).map(lambda ns: ns / 1_000_000),
    st.floats(-1e12, 1e12, allow_nan=False, allow_infinity=False),
    st.sampled_from([0.0, 1.0, 10.0, 33.3]),
)


@st.composite
def batches(draw: st.DrawFn) -> list[list[float]]:
    lengths = draw(st.lists(st.integers(0, 200), min_size=1, max_size=4))
    picks = draw(st.lists(st.sampled_from(lengths), min_size=1, max_size=8))  # lengths repeat: real groups
    return [draw(st.lists(GAP, min_size=n, max_size=n)) for n in picks]


# Rows of up to 200 floats are big examples; a loaded CI machine must not fail them for being slow.
SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]


@settings(max_examples=100, deadline=None, suppress_health_check=SLOW_OK)
@given(batches())
def test_batched_equals_one_by_one_bit_for_bit(rows: list[list[float]]) -> None:
    for row, batched in zip(rows, percentiles_many(rows), strict=True):
        alone = percentiles(row)
        assert same(batched, alone)
        pairs = zip(batched.to_dict().values(), alone.to_dict().values(), strict=True)
        assert all(v is None or (w is not None and math.copysign(1, v) == math.copysign(1, w)) for v, w in pairs)


def test_compute_uses_the_figures_it_is_given_and_itl_gaps_are_its_own() -> None:
    chunks = [Chunk(at(t), "text", 1) for t in (100, 110, 125, 165)]
    assert itl_gaps(chunks) == [10.0, 15.0, 40.0]
    assert itl_gaps(chunks[:1]) == [] and itl_gaps([]) == []
    ts = Timestamps(sent=at(0), first_token=chunks[0].t_ns, first_visible=chunks[0].t_ns, last_token=chunks[-1].t_ns)
    tokens = TokenCounts(None, None, 4, None, "estimated")
    assert compute(ts, chunks, tokens).itl_ms == percentiles([10.0, 15.0, 40.0])
    given_itl: dict[str, float | None] = {
        "p50": 1.0,
        "p90": 2.0,
        "p95": 3.0,
        "p99": 4.0,
        "mean": 5.0,
        "min": 6.0,
        "max": 7.0,
    }
    assert compute(ts, chunks, tokens, itl_ms=given_itl).itl_ms is given_itl


# --- finish_turns: the batch twin of finish_turn ---------------------------------------------


def fed(events: list[ev.Event], turn_index: int = 0) -> TurnRecorder:
    r = recorder()
    r.turn_index = turn_index
    for e in events:
        r.feed(e)
    return r


def variety() -> list[TurnRecorder]:
    """Turns of every ending and shape; several share a chunk count, so the batch has real groups."""
    jittery = [ev.AttemptSent(at(0), 1), ev.HeadersReceived(at(40), 1, 200)]
    jittery += [ev.TextDelta(at(90 + t), "w") for t in (0, 7.5, 8, 31.25, 31.25, 60, 61.001)]
    jittery.append(ev.Finished(at(70 + 61.001), "stop"))
    failed = stream(first_ms=100, gap_ms=10, visible=4, usage=False)[:-1]
    failed.append(ev.Failed(at(200), "overloaded", "Overloaded", 529))
    cancelled = stream(first_ms=100, gap_ms=10, reasoning=5, visible=0, usage=False)[:-1]
    cancelled.append(ev.Cancelled(at(300)))
    turns = [
        stream(first_ms=200, gap_ms=10, visible=11),
        stream(first_ms=150, gap_ms=12.5, visible=11),  # same length as the first: one group
        stream(first_ms=100, gap_ms=20, reasoning=5, visible=6),  # reasoning chunks, also 11 chunks
        stream(first_ms=1000, gap_ms=20, visible=11, hidden_reasoning_tokens=40),
        stream(first_ms=150, visible=1),  # one chunk: no gaps
        [ev.AttemptSent(at(0)), ev.HeadersReceived(at(50)), ev.Finished(at(400), "length")],  # no chunks
        [ev.AttemptSent(at(0)), ev.HeadersReceived(at(30), 1, 401), ev.Failed(at(31), "authentication", "no")],
        failed,
        cancelled,
        stream(first_ms=100, gap_ms=40, visible=5, tokens_per_chunk=4),
        jittery,
        stream(first_ms=80, gap_ms=3, visible=64),
    ]
    return [fed(events, i) for i, events in enumerate(turns)]


def test_finish_turns_gives_the_records_finish_turn_gives(tmp_path: Path, sunk: list[TurnRecord]) -> None:
    alone_turns = variety()
    batch_turns = copy.deepcopy(alone_turns)  # the same recorders: same stamps, same wall clock
    alone_log = SessionLog("s", directory=tmp_path / "alone")
    batch_log = SessionLog("s", directory=tmp_path / "batch")
    alone = [finish_turn(r, alone_log) for r in alone_turns]
    n_alone = len(sunk)
    batched = finish_turns(batch_turns, batch_log)
    assert [r.status for r in batched] == ["ok"] * 6 + ["error", "error", "cancelled", "ok", "ok", "ok"]
    assert batched == alone
    assert [r.to_dict() for r in batched] == [r.to_dict() for r in alone]
    for b, a in zip(batched, alone, strict=True):
        assert same(b.metrics.itl_ms, a.metrics.itl_ms)
    assert sunk[n_alone:] == batched  # each sunk once, in order
    assert [r.delivered for r in batch_turns] == batched
    assert list(read_records(batch_log.path)) == list(read_records(alone_log.path))


def test_finish_turns_is_idempotent_and_delivers_what_finish_already_made(
    tmp_path: Path, sunk: list[TurnRecord]
) -> None:
    log = SessionLog("s", directory=tmp_path)
    delivered, finished, fresh = variety()[:3]
    first = finish_turn(delivered, log)
    made = finished.finish()  # finished by hand, not yet logged or sunk
    sunk.clear()
    got = finish_turns([delivered, finished, fresh, fresh], log)
    assert got[0] is first  # not logged or sunk again
    assert got[1] is made
    assert got[2] is got[3] is fresh.delivered
    assert sunk == [made, got[2]]
    assert [d["turn_index"] for d in read_records(log.path)] == [0, 1, 2]
    assert finish_turns([delivered, finished, fresh], log) == got[:3]
    assert len(sunk) == 2 and len(list(read_records(log.path))) == 3


def test_an_open_turn_in_a_batch_still_ends_as_cancelled() -> None:
    still_open = fed(stream(first_ms=100, gap_ms=10, visible=6)[:-2])  # no usage, no end
    ended = fed(stream(first_ms=100, gap_ms=10, visible=6))
    rec_open, rec_ended = finish_turns([still_open, ended])
    assert rec_open.status == "cancelled" and rec_ended.status == "ok"
    assert same(rec_open.metrics.itl_ms, percentiles(itl_gaps(still_open.chunks)))
    assert same(rec_ended.metrics.itl_ms, percentiles([10.0] * 5))
