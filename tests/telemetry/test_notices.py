"""The record's ``notices``: what a backend did differently from what was asked, and why."""

from __future__ import annotations

import json

from ttft.telemetry import events as ev

from tests.support.turns import at, play, recorder, stream


def test_no_notice_is_an_empty_dict() -> None:
    rec = play(stream(visible=3))
    assert rec["notices"] == {}


def test_notices_are_collected_by_key_and_the_last_wins() -> None:
    events = stream(visible=3)
    events[1:1] = [ev.Notice(at(1), "stream_options", "first"), ev.Notice(at(2), "other", {"n": 1})]
    events.insert(-1, ev.Notice(at(3), "stream_options", "second"))
    rec = play(events)
    assert rec["notices"] == {"stream_options": "second", "other": {"n": 1}}
    assert json.loads(json.dumps(rec))["notices"] == rec["notices"]
    # A notice is no token and no phase: the metrics are those of the same turn without it.
    plain = play(stream(visible=3))
    assert rec["metrics"] == plain["metrics"] and rec["chunks"] == plain["chunks"]


def test_notices_survive_a_failed_turn_and_late_ones_are_ignored() -> None:
    r = recorder()
    for e in (
        ev.AttemptSent(at(0), 1),
        ev.HeadersReceived(at(5), 1, 400),
        ev.Notice(at(6), "stream_options", "rejected"),
        ev.AttemptSent(at(7), 2),
        ev.Failed(at(9), "server_error", "HTTP 500.", 500, "retry"),
        ev.Notice(at(10), "late", "ignored"),
    ):
        r.feed(e)
    rec = r.finish().to_dict()
    assert rec["status"] == "error" and rec["notices"] == {"stream_options": "rejected"}
    assert r.notices == {"stream_options": "rejected"}  # the live recorder shows it too
