"""The chat shows where the wait goes: the wire phase live, the network/server split in the timeline and after it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from ttft.telemetry import events as ev
from ttft.telemetry.view.timeline import live_timeline, turn_timeline
from ttft.tui.chat.app import ChatApp

from tests.fakes import Schedule
from tests.fakes.tls_server import TLSFakeServer
from tests.support.tui_support import wait_until
from tests.support.turns import at, play, recorder
from tests.tui.chat.test_loopback import send, spy_pane


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "config"))
    return tmp_path


@pytest.fixture
def tls(monkeypatch: pytest.MonkeyPatch) -> Any:
    with TLSFakeServer(Schedule(headers_ms=600, first_token_ms=1000, token_ms=5, visible_tokens=5)) as srv:
        srv.response_headers["x-request-id"] = "req_pilot_1"
        monkeypatch.setenv("SSL_CERT_FILE", srv.ca_file)
        yield srv


async def test_the_chat_names_the_wire_phase_live_and_splits_the_timeline(tls: TLSFakeServer) -> None:
    app = ChatApp("compat:fake-model", base_url=tls.openai_base_url)
    async with app.run_test(size=(140, 44)) as pilot:
        shown = spy_pane(app)
        await send(pilot, app, "hi")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy, timeout=20)
        rec = app.chat.session.records[0]
        assert rec.status == "ok", rec.error
        assert any("sent, server working" in s for s in shown), shown[:8]
        assert any("headers in, waiting for the first token" in s for s in shown), shown[:8]
        i = next(i for i, s in enumerate(shown) if "sent, server working" in s)
        j = next(i for i, s in enumerate(shown) if "headers in" in s)
        assert i < j  # in the order they happen
        pane = str(app.chat.pane.query_one("#live").content)
        assert "request id     req_pilot_1" in pane
        held = re.search(r"server (\d+) ms · first token (\d+) ms", pane)
        assert held is not None, pane
        # 600 ms held, then 400 ms (wide, for loaded CI: a late server thread moves time from one to the other)
        assert 450 <= int(held[1]) <= 1800 and 200 <= int(held[2]) <= 1200, pane
        assert "new · HTTP/1.1" in pane
        tl = app.chat.pane.query_one("#timeline").render().plain
        assert "network" in tl and "server" in tl  # the legend names both parts
        segs = {s.phase: s for s in turn_timeline(rec).segments}
        assert segs["server"].end_ms == pytest.approx(rec.metrics.ttft_ms)
        assert segs["server"].end_ms - segs["server"].start_ms >= 800  # held headers + first token (1 s)
        assert segs["network"].start_ms < segs["server"].start_ms


def test_snapshot_names_the_phase_the_attempt_is_in() -> None:
    rec = recorder()
    for e in [
        ev.AttemptSent(at(0), 1),
        ev.WireStep(at(0), 1, "pool"),
        ev.WireStep(at(1), 1, "connect"),
        ev.WireStep(at(3), 1, "tls"),
    ]:
        rec.feed(e)
    snap = rec.snapshot(at(10))
    assert snap.phase == "waiting" and snap.wait_phase == "tls" and snap.wait_phase_ms == pytest.approx(7)
    rec.feed(ev.WireStep(at(12), 1, "send"))
    rec.feed(ev.WireStep(at(13), 1, "server"))
    assert rec.snapshot(at(1213)).wait_phase == "server"
    rec.feed(ev.HeadersReceived(at(1300), 1, 200))
    snap = rec.snapshot(at(1350))
    assert snap.wait_phase == "first_token" and snap.wait_phase_ms == pytest.approx(50)
    rec.feed(ev.TextDelta(at(1400), "hello"))
    assert rec.snapshot(at(1401)).wait_phase is None
    rec.feed(ev.Finished(at(1500)))
    w = rec.finish().to_dict()["metrics"]["wait_ms"]
    assert w == {
        "retries": 0.0,
        "pool": 1.0,
        "dns": 0.0,
        "connect": 2.0,
        "tls": 9.0,
        "send": 1.0,
        "server": 1287.0,
        "first_token": 100.0,
        "client_lag": 0.0,  # no loop watched: nothing of the wait is ttft's own
    }


def test_the_live_timeline_splits_the_wait_as_it_happens() -> None:
    rec = recorder()
    for e in [
        ev.AttemptSent(at(0), 1),
        ev.WireStep(at(0), 1, "pool"),
        ev.WireStep(at(1), 1, "connect"),
        ev.WireStep(at(3), 1, "tls"),
        ev.WireStep(at(12), 1, "send"),
        ev.WireStep(at(13), 1, "server"),
    ]:
        rec.feed(e)
    snap = rec.snapshot(at(500))  # the server has had the request for 487 ms, no headers yet
    assert snap.wait_ms is not None and snap.wait_ms.server == pytest.approx(487)
    assert snap.wait_ms.total_ms == pytest.approx(snap.elapsed_ms)
    segs = {s.phase: (s.start_ms, s.end_ms) for s in live_timeline(snap).segments}
    assert segs["network"] == pytest.approx((1.0, 13.0)) and segs["server"] == pytest.approx((13.0, 500.0))
    rec.feed(ev.HeadersReceived(at(600), 1, 200))
    rec.feed(ev.TextDelta(at(650), "hi"))
    live = {s.phase: (s.start_ms, s.end_ms) for s in live_timeline(rec.snapshot(at(700))).segments}
    rec.feed(ev.Finished(at(700)))
    done = {s.phase: (s.start_ms, s.end_ms) for s in turn_timeline(rec.finish()).segments}
    assert live["network"] == pytest.approx(done["network"]) and live["server"] == pytest.approx(done["server"])


def test_a_later_attempt_starts_its_steps_afresh() -> None:
    rec = play(
        [
            ev.AttemptSent(at(0), 1),
            ev.WireStep(at(0), 1, "pool"),
            ev.WireStep(at(1), 1, "connect"),
            ev.WireStep(at(5), 1, "send"),
            ev.WireStep(at(6), 1, "server"),
            ev.HeadersReceived(at(50), 1, 429),
            ev.AttemptSent(at(550), 2),
            ev.WireStep(at(550), 2, "pool"),
            ev.WireStep(at(551), 2, "send"),
            ev.WireStep(at(552), 2, "server"),
            ev.HeadersReceived(at(700), 2, 200),
            ev.TextDelta(at(750), "hi"),
            ev.Finished(at(800)),
        ]
    )
    w = rec["metrics"]["wait_ms"]
    assert w["retries"] == 550 and w["connect"] == 0 and w["server"] == 148 and w["first_token"] == 50
    assert sum(w.values()) == pytest.approx(rec["metrics"]["ttft_ms"])


def test_a_local_engine_waits_in_prefill_and_its_wait_is_the_server_part() -> None:
    rec = recorder()
    rec.api = "llama.cpp"
    rec.feed(ev.AttemptSent(at(0), 1))
    snap = rec.snapshot(at(300))
    assert snap.wait_phase == "prefill" and snap.wait_phase_ms == pytest.approx(300)
    rec.feed(ev.TextDelta(at(420), "hi"))
    rec.feed(ev.Finished(at(430)))
    d = rec.finish().to_dict()
    assert d["metrics"]["wait_ms"]["server"] == pytest.approx(420) and d["http"] is None
    assert sum(d["metrics"]["wait_ms"].values()) == pytest.approx(d["metrics"]["ttft_ms"])


def test_an_error_response_waits_to_retry_not_for_a_token() -> None:
    rec = recorder()
    for e in [ev.AttemptSent(at(0), 1), ev.WireStep(at(0), 1, "pool"), ev.HeadersReceived(at(40), 1, 429)]:
        rec.feed(e)
    assert rec.snapshot(at(100)).wait_phase == "backoff"
    rec.feed(ev.AttemptSent(at(540), 2))
    rec.feed(ev.WireStep(at(540), 2, "pool"))
    rec.feed(ev.WireStep(at(541), 2, "send"))
    assert rec.snapshot(at(545)).wait_phase == "send"
