"""A saved probe: stored per target with credentials masked, read back defensively, and used to split
a turn's server wait into the prefill expected for its prompt and the server's queue (hand-made turns
with hand-made wire steps, which give the turn its ``wait_ms``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from ttft.backends.base import ChatRequest, Message
from ttft.backends.turn import new_recorder
from ttft.telemetry import events as ev
from ttft.telemetry.diagnosis import diagnose_turn, probe_day
from ttft.telemetry.probe.result import CacheFit, Estimate, ProbeFit
from ttft.telemetry.probe.saved import SavedProbe
from ttft.telemetry.probe.store import probe_path, save_probe, saved_probe
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.wire import server_wait_ms, split_server_wait

from tests.support.turns import at, recorder

# 40 ms at no input, 38 ms more per 1k fresh input tokens.
FIT = ProbeFit(
    base_ttft_ms=Estimate(40.0, 35.0, 45.0),
    prefill_ms_per_1k_input_tokens=Estimate(38.0, 33.0, 43.0),
    tpot_ms=Estimate(11.0, 10.5, 11.5),
    output_ms_per_100_tokens=Estimate(1100.0, 1050.0, 1150.0),
    cache=CacheFit(True, 3968, Estimate(120.0, 100.0, 140.0)),
)
URL = "http://127.0.0.1:9/v1"


def _wait(server: float, first_token: float, network: float = 0.0) -> dict[str, float]:
    return {"retries": 0.0, "pool": 0.0, "dns": 0.0, "connect": network, "tls": 0.0, "send": 0.1,
            "server": server, "first_token": first_token}  # fmt: skip


@pytest.fixture
def data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


def test_split_is_the_fits_prefill_for_the_uncached_input_and_the_rest() -> None:
    # 3100 input, 100 cached: 40 + 38 x 3.0 = 154 ms expected of a 1.9 s server part.
    s = split_server_wait(_wait(1500.0, 400.0), 3100, 100, FIT)
    assert (
        s is not None and s.expected_prefill_ms == pytest.approx(154.0) and s.server_queue_ms == pytest.approx(1746.0)
    )
    assert s.expected_prefill_ms + s.server_queue_ms == pytest.approx(1900.0)
    # Both server phases count, whichever of them the server spent its prefill in.
    assert split_server_wait(_wait(0.5, 1899.5), 3100, 100, FIT) == s
    # Faster than at the probe: all of it was prefill, no queue, never negative.
    fast = split_server_wait(_wait(60.0, 20.0), 3100, 100, FIT)
    assert fast is not None and (fast.expected_prefill_ms, fast.server_queue_ms) == (80.0, 0.0)


def test_without_the_numbers_nothing_is_guessed() -> None:
    assert split_server_wait(None, 3100, 0, FIT) is None  # no wait split on this turn
    assert split_server_wait({"server": 10.0}, 3100, 0, FIT) is None  # a partial one
    assert split_server_wait({"server": "1", "first_token": 2}, 3100, 0, FIT) is None  # not numbers
    assert split_server_wait(_wait(100, 100), None, None, FIT) is None  # no input count
    no_slope = ProbeFit(None, None, None, None, CacheFit(False, None, None))
    assert split_server_wait(_wait(100, 100), 3100, 0, no_slope) is None
    assert server_wait_ms(SimpleNamespace()) is None


def test_saved_probe_round_trip_per_target_with_credentials_masked(data: Path) -> None:
    secret = "http://user:PASSWORD@127.0.0.1:9/v1?api-key=SECRET"
    when = datetime(2026, 12, 2, 9, 30, tzinfo=UTC)
    path = save_probe("compat", "m", secret, FIT, when=when)
    text = path.read_text()
    assert "PASSWORD" not in text and "SECRET" not in text and path.parent == data / "probes"
    got = saved_probe("compat", "m", secret)
    assert got is not None and got.date.startswith("2026-12-02") and got.fit.to_dict() == FIT.to_dict()
    assert got.base_url == "http://***@127.0.0.1:9/v1?api-key=***"
    # Another model, provider or server has no probe.
    assert saved_probe("compat", "other", secret) is None
    assert saved_probe("openai", "m", secret) is None
    assert saved_probe("compat", "m", URL) is None


@pytest.mark.parametrize(
    "content",
    [
        b"not json",
        b"\xff\xfe",
        b"[]",
        b'{"schema": "ttft.probe/9"}',
        b'{"schema": "ttft.probe/1", "provider": "compat", "model": "m", "base_url": "http://127.0.0.1:9/v1",'
        b' "fit": {"base_ttft_ms": {"value": "NaN", "low": 1, "high": 2}}}',
        b'{"schema": "ttft.probe/1", "provider": "compat", "model": "OTHER", "base_url": "http://127.0.0.1:9/v1",'
        b' "fit": {}}',
    ],
)
def test_a_broken_or_foreign_file_is_no_probe(data: Path, content: bytes) -> None:
    path = probe_path("compat", "m", URL)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(content)
    assert saved_probe("compat", "m", URL) is None


def test_new_recorder_picks_up_the_saved_probe_and_the_probe_itself_does_not(data: Path) -> None:
    backend = SimpleNamespace(provider="compat", api="chat.completions", model="m", base_url=URL)
    request = ChatRequest((Message("user", "hi"),))
    assert new_recorder(backend, request, session_id="s", turn_index=0).probe is None  # type: ignore[arg-type]
    save_probe("compat", "m", URL, FIT)
    rec = new_recorder(backend, request, session_id="s", turn_index=0)  # type: ignore[arg-type]
    assert rec.probe is not None and rec.probe.fit.to_dict() == FIT.to_dict()
    own = new_recorder(backend, request, session_id="s", turn_index=0, saved_probe=False)  # type: ignore[arg-type]
    assert own.probe is None


def test_the_local_engine_is_never_split_by_a_saved_probe(data: Path) -> None:
    # It reports its own prefill, and an in-process engine has no queue to name for the rest.
    local = SimpleNamespace(provider="local", api="llama.cpp", model="smollm2", base_url=None)
    save_probe("local", "smollm2", None, FIT)
    assert saved_probe("local", "smollm2", None) is not None
    rec = new_recorder(local, ChatRequest((Message("user", "hi"),)), session_id="s", turn_index=0)  # type: ignore[arg-type]
    assert rec.probe is None


def _turn(monkeypatch: pytest.MonkeyPatch, wait: dict[str, float] | None, probe: SavedProbe | None) -> dict[str, Any]:
    """A turn whose wire steps (when ``wait`` is given) tile its wait as ``wait`` says."""
    r = recorder(probe=probe)
    events: list[ev.Event] = [ev.AttemptSent(at(0), 1)]
    t = 0.0
    if wait is not None:
        for phase in ("pool", "dns", "connect", "tls", "send", "server", "first_token"):
            if wait[phase] > 0 or phase in ("pool", "server", "first_token"):
                events.append(ev.WireStep(at(t), 1, phase))
                if phase == "first_token":
                    events.append(ev.HeadersReceived(at(t), 1, 200))
            t += wait[phase]
    else:
        t = 2000.0
        events.append(ev.HeadersReceived(at(t / 2), 1, 200))
    events += [ev.TextDelta(at(t + 10 * i), "word", 1) for i in range(20)]
    events += [
        ev.Usage(at(t + 200), input=3100, cached_input=0, output=20, reasoning=0),
        ev.Finished(at(t + 201), "stop"),
    ]
    for e in events:
        r.feed(e)
    d = r.finish().to_dict()
    if wait is not None:
        assert d["metrics"]["wait_ms"]["server"] == pytest.approx(wait["server"])
        assert d["metrics"]["wait_ms"]["first_token"] == pytest.approx(wait["first_token"])
    return d


PROBE = SavedProbe("openai", "m", "http://127.0.0.1:1/v1", "2026-12-02T09:30:00+00:00", FIT)


def test_a_turn_with_a_probe_records_the_split_and_says_the_queue_dominated(monkeypatch: pytest.MonkeyPatch) -> None:
    d = _turn(monkeypatch, _wait(1200.0, 700.0, network=20.0), PROBE)
    m = d["metrics"]
    assert m["expected_prefill_ms"] == pytest.approx(40 + 38 * 3.1)
    assert m["server_queue_ms"] == pytest.approx(1900 - (40 + 38 * 3.1))
    assert d["extra"]["probe"]["date"].startswith("2026-12-02")
    assert d["diagnosis"] == (
        "3.1k input tokens should prefill in about 158 ms on this model (probe of 2 Dec); "
        "the other 1.7 s was the server's queue."
    )
    json.dumps(d)  # the record stays plain JSON


def test_a_long_prompt_is_named_when_prefill_dominated(monkeypatch: pytest.MonkeyPatch) -> None:
    big = ProbeFit(Estimate(40, 35, 45), Estimate(500, 450, 550), None, None, CacheFit(False, None, None))
    d = _turn(monkeypatch, _wait(1500.0, 200.0), SavedProbe("openai", "m", None, "2026-12-02T09:30:00+00:00", big))
    assert d["metrics"]["server_queue_ms"] == pytest.approx(1700 - 1590)
    assert d["diagnosis"].startswith("3.1k input tokens should prefill in about 1.6 s on this model (probe of 2 Dec)")
    assert "the prompt's length, not a queue" in d["diagnosis"]


def test_without_a_probe_or_a_first_token_nothing_is_added(monkeypatch: pytest.MonkeyPatch) -> None:
    # Without a trace the whole send -> headers is the server's part, and the split still holds.
    untraced = _turn(monkeypatch, None, PROBE)
    assert untraced["metrics"]["expected_prefill_ms"] == pytest.approx(40 + 38 * 3.1)
    # A turn that never got a first token has no wait to split.
    r = recorder(probe=PROBE)
    for e in (ev.AttemptSent(at(0), 1), ev.HeadersReceived(at(100), 1, 200), ev.Cancelled(at(3000))):
        r.feed(e)
    none = r.finish().to_dict()
    assert none["metrics"]["expected_prefill_ms"] is None and none["metrics"]["server_queue_ms"] is None
    assert "probe" not in none["extra"] and "probe of" not in none["diagnosis"]
    plain = _turn(monkeypatch, _wait(1200.0, 700.0), None)
    assert plain["metrics"]["expected_prefill_ms"] is None and "probe of" not in plain["diagnosis"]
    # Logged records are re-diagnosed the same way: the sentence comes from the record alone.
    probed = _turn(monkeypatch, _wait(1200.0, 700.0), PROBE)
    assert diagnose_turn(TurnRecord.from_dict(probed)) == probed["diagnosis"]


def test_a_saved_date_that_is_no_date_reaches_the_sentence_printable() -> None:
    # a hand-edited probe file or old log: its "date" lands in the diagnosis, printed on a terminal
    assert probe_day("2026-12-02T10:00:00+00:00") == "2 Dec"
    assert probe_day("yesterday\x1b[2J\x1b]0;x\x07") == "yesterday[2J]0;x"
    assert probe_day("\x1b\x07") == "an earlier probe"
