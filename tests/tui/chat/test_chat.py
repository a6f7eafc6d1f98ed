"""Pilot tests of the chat: a turn through every phase, cancel, errors, settings, export, resume."""

from __future__ import annotations

import csv
import itertools
import json
from pathlib import Path

import pytest
from textual.widgets import DataTable
from ttft.telemetry import events as ev
from ttft.telemetry.record import TurnRecord
from ttft.tui.chat.app import ChatApp
from ttft.tui.screens.help import HelpScreen
from ttft.tui.screens.sessions import SessionsScreen
from ttft.tui.screens.settings import SettingsScreen
from ttft.tui.widgets.error_card import ErrorCard
from ttft.tui.widgets.transcript import AssistantMessage, NoteMessage, UserMessage

from tests.support.tui_support import TimedBackend, factory_for, wait_until


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


async def send(pilot, app: ChatApp, text: str) -> None:
    app.query_one("#prompt").value = text
    await pilot.press("enter")


async def test_turn_goes_through_phases_and_is_logged() -> None:
    backend = TimedBackend(first_ms=150, token_ms=15, reasoning=8, visible=30)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    shown: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        show_live = app.chat.pane.show_live

        def spy(snap, *a, **k):  # what the pane was asked to draw, frame by frame
            show_live(snap, *a, **k)
            shown.append(str(app.chat.pane.query_one("#live").content).split()[0])

        app.chat.pane.show_live = spy
        await send(pilot, app, "hello")
        await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == 1)
        rec = app.chat.session.records[0]
        assert rec.status == "ok"
        # STARTING: Enter -> send, if a frame saw it; OK: a frame between the stream's end and the record
        # (the record's figures replace the live ones at once: the last frame does not draw the pane)
        order = [p for p in dict.fromkeys(shown) if p not in ("STARTING", "OK")]
        assert order == ["WAITING", "REASONING", "STREAMING"], order
        assert rec.answer.startswith("w00 w01")
        pane = str(app.chat.pane.query_one("#live").content)
        assert pane.startswith(" OK ") and "TTFT" in pane and "TPOT" in pane and "render lag" in pane
        assert rec.diagnosis[:30] in pane
        lines = app.chat.session.log.path.read_text().splitlines()
        assert json.loads(lines[0])["prompt"] == "hello"
        assert app.chat.drawn.lag_by_turn[0]["paints"] >= 1
        msg = app.query_one(AssistantMessage)
        assert msg.reasoning.collapsed and "thought for" in str(msg.reasoning.title)


async def run_turn_and_wait(pilot, app: ChatApp, text: str, n: int) -> TurnRecord:
    await send(pilot, app, text)
    await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == n)
    return app.chat.session.records[-1]


async def test_escape_cancels_mid_stream_and_keeps_partial_answer() -> None:
    backend = TimedBackend(first_ms=20, token_ms=40, reasoning=0, visible=200)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    async with app.run_test(size=(100, 30)) as pilot:
        await send(pilot, app, "long one")
        await wait_until(
            pilot, lambda: app.chat.live is not None and app.chat.live.recorder.snapshot().visible_tokens >= 5
        )
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == 1)
        rec = app.chat.session.records[0]
        assert rec.status == "cancelled"
        assert rec.answer.startswith("w00 w01 w02 w03 w04")
        assert len(rec.answer) < 200 * 4
        notes = [str(n.content) for n in app.query(NoteMessage)]
        assert any("cancelled" in n and "partial answer is kept" in n for n in notes)
        # what arrived stays in the conversation, and the log has the turn
        assert app.chat.session.messages[-1].content == rec.answer
        assert json.loads(app.chat.session.log.path.read_text().splitlines()[0])["status"] == "cancelled"


async def test_error_card_then_the_chat_goes_on() -> None:
    failing = TimedBackend(first_ms=10, fail_status=429)
    app = ChatApp("fake:timed", factory=factory_for(failing))
    async with app.run_test(size=(100, 30)) as pilot:
        rec = await run_turn_and_wait(pilot, app, "hi", 1)
        assert rec.status == "error"
        card = app.query_one(ErrorCard)
        text = str(card.content)
        assert "HTTP 429" in text and "Rate limit reached" in text and "Try:" in text
        assert "No answer text arrived" in text
        assert "failed" in str(app.chat.pane.query_one("#live").content)
        assert app.chat.session.messages == []  # a failed turn leaves the context unchanged
        app.chat.session.backend = TimedBackend(first_ms=5, token_ms=1, visible=3)
        rec2 = await run_turn_and_wait(pilot, app, "again", 2)
        assert rec2.status == "ok" and rec2.turn_index == 1


class ExplodingBackend(TimedBackend):
    async def stream(self, request):  # a backend bug mid-stream
        yield ev.AttemptSent(ev.now_ns(), 1)
        yield ev.TextDelta(ev.now_ns(), "partial ")
        raise RuntimeError("backend bug: unexpected payload")


async def test_backend_bugs_never_crash_the_app() -> None:
    app = ChatApp("fake:x", factory=factory_for(ExplodingBackend()))
    async with app.run_test(size=(100, 30)) as pilot:
        rec = await run_turn_and_wait(pilot, app, "hi", 1)
        assert rec.status == "error" and rec.answer == "partial "
        assert "partial answer above is kept" in str(app.query_one(ErrorCard).content)

    def broken_factory(spec, base_url):
        raise ValueError("unknown provider 'nope'")

    app2 = ChatApp("nope:model", factory=broken_factory)
    async with app2.run_test(size=(100, 30)) as pilot:
        await send(pilot, app2, "hi")
        await wait_until(pilot, lambda: len(app2.query(ErrorCard)) == 1)
        assert "unknown provider" in str(app2.query_one(ErrorCard).content)
        assert not app2.chat.busy


async def test_settings_screen_applies_to_next_turn_and_is_recorded() -> None:
    backend = TimedBackend(first_ms=5, token_ms=1, reasoning=0, visible=3)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen))
        screen = app.screen
        screen.query_one("#max_tokens").value = "64"
        screen.query_one("#temperature").value = "0.2"
        screen.query_one("#effort").value = "high"
        screen.query_one("#stream").value = False
        screen.query_one("#max_tokens").value = "64"
        await pilot.click("#apply")
        await wait_until(pilot, lambda: not isinstance(app.screen, SettingsScreen))
        assert "max 64 tok" in str(app.query_one("#header").content)
        rec = await run_turn_and_wait(pilot, app, "hi", 1)
        s = rec.settings
        assert (s.max_output_tokens, s.temperature, s.reasoning_effort, s.stream) == (
            64,
            0.2,
            "high",
            False,
        )
        assert backend.requests[-1].settings.max_output_tokens == 64
        # quick keys: stream back on, next effort level; recorded with the next turn
        await pilot.press("ctrl+t")
        await pilot.press("ctrl+o")
        rec = await run_turn_and_wait(pilot, app, "again", 2)
        assert rec.settings.stream is True and rec.settings.reasoning_effort is None


async def test_bad_settings_are_refused_with_a_message() -> None:
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend()))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen))
        app.screen.query_one("#max_tokens").value = "lots"
        await pilot.click("#apply")
        await pilot.pause()
        assert isinstance(app.screen, SettingsScreen)
        assert "whole number" in str(app.screen.query_one("#settings-error").content)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, SettingsScreen))
        assert app.chat.session.settings.max_output_tokens is None


async def test_model_switch_applies_to_next_turn() -> None:
    made: list[str] = []

    def factory(spec, base_url):
        made.append(spec)
        return TimedBackend(first_ms=5, token_ms=1, visible=2, model=spec.split(":")[-1])

    app = ChatApp("fake:one", factory=factory)
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn_and_wait(pilot, app, "a", 1)
        await pilot.press("ctrl+l")
        await wait_until(pilot, lambda: isinstance(app.screen, SettingsScreen))
        app.screen.query_one("#model").value = "fake:two"
        await pilot.click("#apply")
        rec = await run_turn_and_wait(pilot, app, "b", 2)
        assert made == ["fake:one", "fake:two"] and rec.model == "two"
        assert [r.model for r in app.chat.session.records] == ["one", "two"]


async def test_export_writes_jsonl_and_csv_and_shows_paths(data_dir: Path) -> None:
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=5, token_ms=1, visible=4)))
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn_and_wait(pilot, app, "one", 1)
        await run_turn_and_wait(pilot, app, "two", 2)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: bool(app.chat.last_export))
        jsonl, csv_path = app.chat.last_export
        assert jsonl.parent == data_dir / "exports"
        rows = [json.loads(x) for x in jsonl.read_text().splitlines()]
        assert [r["prompt"] for r in rows] == ["one", "two"]
        with csv_path.open() as f:
            table = list(csv.DictReader(f))
        assert len(table) == 2 and "metrics.ttft_ms" in table[0]
        notes = " ".join(str(n.content) for n in app.query(NoteMessage))
        assert str(jsonl) in notes and str(csv_path) in notes


async def test_resume_reloads_transcript_and_continues_the_log() -> None:
    backend = TimedBackend(first_ms=5, token_ms=1, reasoning=2, visible=4)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn_and_wait(pilot, app, "first question", 1)
        await run_turn_and_wait(pilot, app, "second question", 2)
        path = app.chat.session.log.path
    backend2 = TimedBackend(first_ms=5, token_ms=1, visible=4)
    app2 = ChatApp("fake:timed", factory=factory_for(backend2), resume=path)
    async with app2.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: len(app2.query(UserMessage)) == 2)
        assert [str(m.content) for m in app2.query(UserMessage)] == ["first question", "second question"]
        assert app2.query_one("#history-table").row_count == 2
        assert app2.chat.session.log.session_id == path.stem
        rec = await run_turn_and_wait(pilot, app2, "third", 3)
        assert rec.turn_index == 2
        sent = backend2.requests[-1].messages
        assert [m.content for m in sent[::2]] == ["first question", "second question", "third"]
        assert len(path.read_text().splitlines()) == 3


async def test_sessions_screen_reopens_a_past_session() -> None:
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=5, token_ms=1, visible=3)))
    async with app.run_test(size=(120, 40)) as pilot:
        await run_turn_and_wait(pilot, app, "old chat", 1)
        old = app.chat.session.log.session_id
        await pilot.press("ctrl+n")
        await wait_until(pilot, lambda: app.chat.session.log.session_id != old and not app.query(UserMessage))
        await pilot.press("f3")
        await wait_until(pilot, lambda: isinstance(app.screen, SessionsScreen))
        assert app.screen.query_one(DataTable).row_count == 1
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.chat.session.log.session_id == old and len(app.query(UserMessage)) == 1)
        assert str(app.query_one(UserMessage).content) == "old chat"


async def test_regenerate_copy_help_and_pane_toggle() -> None:
    backend = TimedBackend(first_ms=5, token_ms=1, visible=3)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    copied: list[str] = []
    async with app.run_test(size=(80, 24)) as pilot:
        app.copy_to_clipboard = copied.append  # type: ignore[method-assign]
        await run_turn_and_wait(pilot, app, "q", 1)
        await pilot.press("f5")
        await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == 2)
        assert [r.prompt for r in app.chat.session.records] == ["q", "q"]
        assert len(backend.requests[-1].messages) == 1  # the first answer is not in the context
        await pilot.press("ctrl+y")
        assert copied == [app.chat.session.records[-1].answer]
        await pilot.press("f4")
        assert not app.chat.pane.display or app.chat.pane.has_class("-hidden")
        await pilot.press("f1")
        await wait_until(pilot, lambda: isinstance(app.screen, HelpScreen))
        await pilot.press("escape")
        await wait_until(pilot, lambda: not isinstance(app.screen, HelpScreen))


def test_chat_command_parses_and_builds_settings() -> None:
    from ttft.tui.cli import build_parser
    from ttft.tui.commands.args import chat_args

    args = chat_args(
        build_parser().parse_args(["chat", "-m", "openai:gpt-x", "--effort", "low", "--max-tokens", "9", "--no-stream"])
    )
    s = args.settings
    assert (args.model, s.reasoning_effort, s.max_output_tokens, s.stream) == ("openai:gpt-x", "low", 9, False)
    assert build_parser().parse_args(["chat", "--resume"]).resume == ""


def test_pane_shows_the_engines_own_split_for_each_server_format() -> None:
    from ttft.tui.widgets.telemetry_pane import record_text

    base = {"status": "ok", "turn_index": 0, "provider": "p", "model": "m", "metrics": {}, "tokens": {}}
    llama_server = {
        "llama": {"prompt_n": 120, "prompt_ms": 80.0, "predicted_n": 50, "predicted_ms": 900.0, "cache_n": 64}
    }
    text = record_text(TurnRecord.from_dict({**base, "server": llama_server})).plain
    assert "llama prefill" in text and "120 tok in 80 ms" in text and "64 prompt tokens from cache" in text
    ollama = {
        "ollama": {"prompt_eval_count": 30, "prompt_eval_duration": 50_000_000, "eval_count": 9, "eval_duration": 2e9}
    }
    text = record_text(TurnRecord.from_dict({**base, "server": ollama})).plain
    assert "30 tok in 50 ms" in text and "9 tok in 2.0 s" in text
    engine = {
        "llama.cpp": {
            "prompt_eval_tokens": 27,
            "prompt_eval_ms": 260.5,
            "prompt_tokens_reused": 135,
            "decode_tokens": 119,
            "decode_ms": 4743.0,
            "kv_used_tokens": 282,
            "kv_used_bytes": 3 * 2**20,
            "n_ctx": 4096,
            "speculative": {"drafted": 40, "accepted": 31},
        },
        "model": {"n_ctx": 4096},
    }
    text = record_text(TurnRecord.from_dict({**base, "server": engine})).plain
    assert "engine prefill" in text and "135 reused from cache" in text and "119 tok in 4.7 s" in text
    assert "282 tokens = 3.0 MiB of n_ctx 4,096" in text and "78% accepted (31/40)" in text
    assert "n_ctx 4096" not in text  # the load info is not dumped raw


async def test_the_panes_graphs_redraw_slower_than_its_figures_but_at_once_on_a_phase_change() -> None:
    """The figures at PANE_FPS, the sparkline and the live timeline at PANE_GRAPH_FPS (each costs a
    compositor pass), and both on every change of phase, so no phase is missed by the timeline."""
    from ttft.tui.chat.paint import PANE_GRAPH_FPS

    backend = TimedBackend(first_ms=100, token_ms=10, reasoning=20, visible=100)  # ~1.3 s of stream
    app = ChatApp("fake:timed", factory=factory_for(backend))
    frames: list[tuple[int, str, bool]] = []  # (when, phase, graphs redrawn) per pane frame
    async with app.run_test(size=(120, 40)) as pilot:
        show_live = app.chat.pane.show_live

        def spy(snap, *a, **k):
            # the painter's own clock for this frame (set just before the call): a clock read here would
            # also count the answer's paint in between, which a loaded machine stretches past any slack
            frames.append((app.chat.painter._pane_ns, snap.phase, k.get("graphs", True)))
            show_live(snap, *a, **k)

        app.chat.pane.show_live = spy
        await send(pilot, app, "hello")
        await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == 1)
    assert app.chat.session.records[0].status == "ok"
    period_ns, slack_ns = 1e9 / PANE_GRAPH_FPS, 20e6
    last_graphs = frames[0][0]
    for (_, before, _), (t, phase, graphs) in itertools.pairwise(frames):
        if phase != before:
            assert graphs, frames  # a new phase is drawn in the timeline at once
        elif graphs:
            assert t - last_graphs >= period_ns - slack_ns, frames
        else:
            assert t - last_graphs < period_ns + slack_ns, frames
        if graphs:
            last_graphs = t
    streaming = [g for _, phase, g in frames if phase == "streaming"]
    assert True in streaming and False in streaming, frames  # the figures went on between the graphs' redraws
