"""The diagnosis and the timeline read the wait's split, and say no more than it supports."""

from __future__ import annotations

from ttft.telemetry import events as ev
from ttft.telemetry.diagnosis import diagnose_session, diagnose_turn
from ttft.telemetry.record import TurnRecord, typed_records
from ttft.telemetry.view.timeline import turn_timeline
from ttft.telemetry.wire import HttpInfo

from tests.support.turns import at, play, stream


def wired(
    *, connect: float = 0.0, tls: float = 0.0, send: float = 1.0, server: float, first_token: float, new: bool = False
) -> dict:
    """One traced turn: pool 1 ms, then the given phases (ms), then ten tokens 10 ms apart."""
    t = 1.0
    events: list[ev.Event] = [ev.AttemptSent(at(0), 1), ev.WireStep(at(0), 1, "pool")]
    for phase, ms in (("connect", connect), ("tls", tls), ("send", send), ("server", server)):
        if ms or phase in ("send", "server"):
            events.append(ev.WireStep(at(t), 1, phase))
            t += ms
    info = HttpInfo(connection="new" if new else "reused", http_version="HTTP/1.1", request_id="req_1")
    events += [ev.HttpResponse(at(t), 1, info), ev.HeadersReceived(at(t), 1, 200)]
    t += first_token
    for i in range(10):
        events.append(ev.TextDelta(at(t + 10 * i), "word"))
    events.append(ev.Finished(at(t + 100)))
    return play(events)


def test_a_costly_new_tls_connection_is_named() -> None:
    d = wired(connect=60, tls=120, server=200, first_token=39, new=True)
    assert (
        d["diagnosis"]
        == "A new TLS connection cost 180 ms of the 421 ms wait; later turns reuse it while it stays open."
    )


def test_a_cheap_new_connection_is_not_blamed() -> None:
    d = wired(connect=2, tls=5, server=200, first_token=40, new=True)
    assert "connection" not in d["diagnosis"] and d["diagnosis"].startswith("Responsive")


def test_a_server_that_holds_its_headers_is_a_queue_or_a_prefill_not_the_network() -> None:
    d = wired(send=33, server=1900, first_token=20)
    assert d["diagnosis"] == (
        "The server took 1.9 s after the request arrived, before its headers: "
        "a queue or a long prefill, not the network (33 ms)."
    )


def test_headers_at_once_then_a_late_first_token() -> None:
    d = wired(send=3, server=2, first_token=2500)
    assert d["diagnosis"].startswith("The server sent its headers, then its first token 2.5 s later")


def test_a_slow_network_is_said_to_be_the_network() -> None:
    d = wired(send=1400, server=100, first_token=50)  # a reused connection, a slow upload
    assert d["diagnosis"].startswith("The network took 1.4 s of the 1.6 s wait (dns 0 ms, connect 0 ms, TLS 0 ms")


def test_without_a_wire_split_the_old_sentence_stays() -> None:
    d = play(stream(first_ms=4000, gap_ms=10, visible=20))
    assert d["http"] is None and d["metrics"]["wait_ms"]["server"] > 0  # untraced: all of it is the server's
    assert "shorten the prompt" in d["diagnosis"]
    assert [s.phase for s in turn_timeline(TurnRecord.from_dict(d)).segments] == ["waiting", "streaming"]


def test_the_timeline_splits_the_wait_on_the_shared_axis() -> None:
    d = wired(connect=10, tls=20, send=5, server=300, first_token=100, new=True)
    segs = turn_timeline(TurnRecord.from_dict(d)).segments
    assert [s.phase for s in segs] == ["waiting", "network", "server", "streaming"]
    assert segs[0].end_ms == segs[1].start_ms == 1.0  # the pool
    assert segs[1].end_ms == segs[2].start_ms == 36.0  # + connect, tls, send
    assert segs[2].end_ms == segs[3].start_ms == d["metrics"]["ttft_ms"] == 436.0


def test_old_records_without_the_fields_still_draw_and_diagnose() -> None:
    d = wired(server=1900, first_token=20)
    del d["metrics"]["wait_ms"], d["http"]
    assert "shorten the prompt" in diagnose_turn(TurnRecord.from_dict(d))  # an older line, read back
    assert turn_timeline(TurnRecord.from_dict(d)).segments[0].phase == "waiting"


def test_the_session_verdict_names_the_server_when_its_part_dominates() -> None:
    recs = [wired(send=5, server=3000, first_token=40) for _ in range(3)]
    v = diagnose_session(typed_records(recs))
    assert "before the first token: the server's part (100% of it)" in v and "not the network" in v
    old = [play(stream(first_ms=4000, gap_ms=10, visible=20)) for _ in range(3)]
    assert "prompt length, queueing or retries dominate" in diagnose_session(typed_records(old))
