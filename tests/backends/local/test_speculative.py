"""Speculative decoding's figures: the prompt-lookup drafter, the normalized record field for both sources
(the local engine and llama-server), the live snapshot, and the pane line. No model needed."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from ttft.backends.local.models import LocalModelError
from ttft.backends.local.speculative import SPEC_MIN_MATCH, SPEC_NUM_PRED, PromptLookup, SpecSettings
from ttft.telemetry import events as ev
from ttft.telemetry.metrics import draft_stats, speculative_summary
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.recorder import TurnRecorder
from ttft.telemetry.settings import TurnSettings
from ttft.tui.chat.app import ChatApp
from ttft.tui.widgets.telemetry_pane import live_text, record_text

from tests.fakes import FakeServer, Schedule, fake_server_fixture  # noqa: F401
from tests.support.backend_util import backend_for, make_request
from tests.support.tui_support import MS, T0, ScriptedBackend, factory_for, script, wait_until


@pytest.fixture(autouse=True)
def _data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))


# --- the drafter ---------------------------------------------------------------------------------
def test_lookup_drafts_what_followed_the_longest_earlier_match() -> None:
    #                 0  1  2  3  4  5  6  7  8  9
    lk = PromptLookup([1, 2, 3, 9, 5, 2, 3, 4, 7, 8], min_match=2)
    for t in (1, 2, 3):  # the tail 1 2 3 matches 1 2 3 at 0 (3 tokens) better than 2 3 at 5 (2 tokens)
        lk.append(t)
    assert lk.draft(4) == [9, 5]  # a match of 3 over min_match 2 drafts 2 tokens
    lk.append(4)  # the tail ... 2 3 4 matches 2 3 4 at 5: what followed was 7 8
    assert lk.draft(4) == [7, 8]
    assert lk.draft(1) == [7]  # never more than the room


def test_lookup_prefers_the_latest_of_equal_matches_and_drafts_from_its_own_answer() -> None:
    lk = PromptLookup([5, 6, 1, 5, 6, 2], min_match=2)
    lk.append(5)
    lk.append(6)
    assert lk.draft(3) == [2]  # 5 6 occurs twice, equally long: the nearer one
    lk.append(7)  # the answer goes its own way: 6 7 never occurred
    assert lk.draft(3) == []
    for t in (8, 5, 6, 7):  # ... then repeats itself: 5 6 7 matches its own earlier text
        lk.append(t)
    assert lk.draft(3) == [8, 5]


def test_lookup_drafts_nothing_below_the_minimum_match() -> None:
    lk = PromptLookup([1, 2, 3, 4], min_match=3)
    lk.append(9)
    lk.append(3)  # the tail 9 3 shares only 1 token (3) with the prompt
    assert lk.draft(4) == []
    lk.append(4)
    assert lk.draft(4) == []  # 3 4 matches 2 tokens: still under 3
    assert PromptLookup([], min_match=2).draft(4) == []


# --- the settings ------------------------------------------------------------------------------
def test_speculative_settings_are_read_once_into_a_frozen_record() -> None:
    assert SpecSettings.parse(None) is None and SpecSettings.parse({}) is None
    s = SpecSettings.parse({"kind": "prompt-lookup"})
    assert s is not None
    assert (s.num_pred_tokens, s.min_match, s.verify_batch) == (SPEC_NUM_PRED, SPEC_MIN_MATCH, None)
    assert s.verify_threads >= 1
    t = SpecSettings.parse({"num_pred_tokens": "0", "min_match": -3, "verify_threads": 2, "verify_batch": "3"})
    assert t == SpecSettings("prompt-lookup", 1, 1, 2, 3)  # floors of 1; strings from a config file read as ints
    with pytest.raises(AttributeError):
        t.verify_batch = 5  # type: ignore[misc]
    # logged as before: the same keys in the same order
    assert list(t.as_dict()) == ["kind", "num_pred_tokens", "min_match", "verify_threads", "verify_batch"]
    with pytest.raises(LocalModelError) as err:
        SpecSettings.parse({"kind": "medusa"})
    assert err.value.kind == "bad_setting" and "medusa" in err.value.message


# --- the normalized field -------------------------------------------------------------------------
def test_summary_from_the_local_engine() -> None:
    server = {
        "llama.cpp": {
            "decode_steps": 50,
            "speculative": {"kind": "prompt-lookup", "drafted": 80, "accepted": 60, "verify_batch": 5},
        },
        "model": {"n_ctx": 4096},
    }
    s = speculative_summary(server)
    assert s == {
        "source": "llama.cpp",
        "drafted": 80,
        "accepted": 60,
        "acceptance_rate": 0.75,
        "steps": 50,
        "tokens_per_step": 2.2,  # 50 steps kept 50 + 60 tokens
    }


def test_summary_from_llama_server_timings() -> None:
    timings = {"predicted_n": 101, "predicted_ms": 900.0, "draft_n": 64, "draft_n_accepted": 48}
    s = speculative_summary({"llama-server": timings})
    # 100 tokens after the first; each step kept one plus those it accepted: 100 - 48 = 52 steps
    assert s == {
        "source": "llama-server",
        "drafted": 64,
        "accepted": 48,
        "acceptance_rate": 0.75,
        "steps": 52,
        "tokens_per_step": round(100 / 52, 3),
    }


@pytest.mark.parametrize(
    "server",
    [
        None,
        {},
        {"llama-server": {"predicted_n": 10, "predicted_ms": 80.0}},  # no draft_n: it did not draft
        {"llama.cpp": {"decode_steps": 9, "speculative": None}},  # speculation off
        {"llama.cpp": {"decode_steps": 9, "speculative": {"drafted": 0, "accepted": 0, "verify_batch": 1}}},
        {"ollama": {"eval_count": 3}},
    ],
)
def test_summary_is_none_without_drafting(server: dict | None) -> None:
    assert speculative_summary(server) is None


def recorder() -> TurnRecorder:
    return TurnRecorder("s", 0, "local", "llama.cpp", "m", None, TurnSettings(), "hi")


def test_recorder_keeps_the_latest_progress_live_and_the_record_carries_the_summary() -> None:
    rec = recorder()
    for e in script(visible=3):
        rec.feed(e)
    assert rec.snapshot().draft is None
    rec.feed(ev.DraftProgress(T0 + 450 * MS, drafted=4, accepted=2, steps=3))
    rec.feed(ev.DraftProgress(T0 + 460 * MS, drafted=10, accepted=8, steps=5))
    assert rec.snapshot().draft == draft_stats(10, 8, 5) and rec.snapshot().draft["tokens_per_step"] == 2.6
    engine = {"decode_steps": 6, "speculative": {"drafted": 12, "accepted": 9}}
    rec.feed(ev.ServerTimings(T0 + 470 * MS, "llama.cpp", engine))
    rec.feed(ev.Finished(T0 + 480 * MS, "stop"))
    d = rec.finish().to_dict()
    assert d["metrics"]["speculative"] == draft_stats(12, 9, 6)
    plain = recorder()
    for e in script(visible=3):
        plain.feed(e)
    plain.feed(ev.Finished(T0 + 480 * MS, "stop"))
    assert plain.finish().to_dict()["metrics"]["speculative"] is None


# --- llama-server over the wire: the real openai SDK against the loopback fake ------------------------
async def test_llama_server_drafting_reaches_the_record_and_the_live_snapshot(fake_server: FakeServer) -> None:
    from ttft.backends.turn import new_recorder, run_turn

    fake_server.schedule = Schedule(
        visible_tokens=40, token_ms=3, timings="llama", timings_per_chunk=True, draft=(24, 18)
    )
    b = backend_for("compat", fake_server)
    request = make_request()
    rec = new_recorder(b, request, session_id="t", turn_index=0)
    live: list[dict | None] = []

    def on_event(e: ev.Event) -> None:
        if isinstance(e, ev.TextDelta):
            live.append(rec.snapshot().draft)

    try:
        d = (await run_turn(b, request, rec, on_event=on_event)).to_dict()
    finally:
        await b.aclose()
    assert d["status"] == "ok"
    assert d["server"]["llama-server"]["draft_n"] == 24  # kept under the server's own names
    s = d["metrics"]["speculative"]
    assert s["source"] == "llama-server" and (s["drafted"], s["accepted"], s["acceptance_rate"]) == (24, 18, 0.75)
    assert (s["steps"], s["tokens_per_step"]) == (21, round(39 / 21, 3))  # 39 tokens after the first, in 21 steps
    # while streaming, the snapshot followed the server's per-chunk timings
    mid = [x for x in live if x]
    assert len(mid) >= 10 and mid[0]["drafted"] < 24
    assert all(a["drafted"] <= b["drafted"] for a, b in pairwise(mid))
    assert "75% accepted (18/24) · 1.9 tok/step" in record_text(TurnRecord.from_dict(d)).plain


async def test_llama_server_without_drafting_has_no_speculative_figures(fake_server: FakeServer) -> None:
    from tests.support.backend_util import one_turn

    fake_server.schedule = Schedule(visible_tokens=6, timings="llama")
    b = backend_for("compat", fake_server)
    try:
        d = await one_turn(b)
    finally:
        await b.aclose()
    assert d["metrics"]["speculative"] is None and "draft" not in record_text(TurnRecord.from_dict(d)).plain


# --- the pane -----------------------------------------------------------------------------------
def test_pane_line_for_a_finished_turn_and_for_an_old_record() -> None:
    rec = recorder()
    for e in script(visible=3):
        rec.feed(e)
    rec.feed(
        ev.ServerTimings(
            T0 + 470 * MS, "llama.cpp", {"decode_steps": 40, "speculative": {"drafted": 50, "accepted": 31}}
        )
    )
    rec.feed(ev.Finished(T0 + 480 * MS, "stop"))
    d = rec.finish().to_dict()
    assert "62% accepted (31/50) · 1.8 tok/step" in record_text(TurnRecord.from_dict(d)).plain
    old = {**d, "metrics": {k: v for k, v in d["metrics"].items() if k != "speculative"}}
    assert (
        "62% accepted (31/50) · 1.8 tok/step" in record_text(TurnRecord.from_dict(old)).plain
    )  # logged before the field existed
    off = {"drafted": 0, "accepted": 0, "verify_batch": 1}
    refused = {"llama.cpp": {"decode_ms": 300.0, "decode_steps": 9, "speculative": off}}
    text = record_text(
        TurnRecord.from_dict({**d, "metrics": {**d["metrics"], "speculative": None}, "server": refused})
    ).plain
    assert "not bit-identical" in text and "accepted" not in text


async def test_pane_shows_acceptance_while_the_turn_streams() -> None:
    events = [*script(visible=6), ev.DraftProgress(T0 + 500 * MS, drafted=8, accepted=5, steps=4)]
    backend = ScriptedBackend(events)  # blocks after its events: the turn stays in flight
    app = ChatApp("fake:scripted", factory=factory_for(backend))
    async with app.run_test(size=(120, 40)) as pilot:
        app.query_one("#prompt").value = "rename it"
        await pilot.press("enter")
        await wait_until(pilot, lambda: "accepted" in str(app.chat.pane.query_one("#live").content))
        pane = str(app.chat.pane.query_one("#live").content)
        assert pane.lstrip().startswith("STREAMING") and "62% accepted (5/8) · 2.2 tok/step" in pane
        assert "draft" in live_text(app.chat.live.recorder.snapshot()).plain
