"""Pilot tests of the compare screen with fake providers on different schedules."""

from __future__ import annotations

import asyncio
import csv
import io
from pathlib import Path

import pytest
from rich.console import Console
from textual.pilot import Pilot
from textual.widgets import Static
from ttft.telemetry.log.turns import read_records
from ttft.tui.compare.app import CompareApp, PaneView
from ttft.tui.widgets.error_card import ErrorCard
from ttft.tui.widgets.timeline import TimelineView

from tests.support.compare_fakes import ScheduledBackend
from tests.support.tui_support import heard, wait_until

SIZE = (160, 48)


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def quick_start(**kw: object) -> ScheduledBackend:
    """Fast to the first token, slow to decode."""
    return ScheduledBackend("quick-start", ttft_s=0.02, gap_s=0.015, tokens=12, word="alpha", **kw)  # type: ignore[arg-type]


def quick_decode(**kw: object) -> ScheduledBackend:
    """Slow to the first token, fast to decode."""
    return ScheduledBackend("quick-decode", ttft_s=0.2, gap_s=0.001, tokens=12, word="beta", **kw)  # type: ignore[arg-type]


def broken() -> ScheduledBackend:
    return ScheduledBackend("broken", fail_status=503)


async def finish(pilot: Pilot, app: CompareApp, timeout_s: float = 15.0) -> None:
    for _ in range(int(timeout_s / 0.05)):
        await pilot.pause(0.05)
        if not app.in_flight:
            await pilot.pause(0.1)
            return
    raise AssertionError("the prompt did not finish")


async def send(pilot: Pilot, app: CompareApp, text: str) -> None:
    app.query_one("#prompt").value = text  # type: ignore[attr-defined]
    await pilot.press("enter")
    await pilot.pause()


def plain(app: CompareApp, selector: str) -> str:
    """The text a Static shows (its content rendered without styles)."""
    console = Console(width=200, file=io.StringIO(), record=True)
    console.print(app.query_one(selector, Static).content)
    return console.export_text()


def pane_text(app: CompareApp, label: str) -> str:
    view = app.query_one(f"#pane-{label}", PaneView)
    out = []
    for w in view.query(Static):
        console = Console(width=200, file=io.StringIO(), record=True)
        console.print(w.content)
        out.append(console.export_text())
    return " ".join(out)


async def test_one_prompt_every_pane_ranked_failure_kept_apart(data_dir: Path) -> None:
    a, b, c = quick_start(), quick_decode(), broken()
    app = CompareApp([a, b, c], session_id="s1", comparison_id="cmp-1")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "hello there")
        await finish(pilot, app)
        result, comp = app.results[-1]
        # Every pane got the prompt, at the same instant.
        assert [len(bk.requests) for bk in (a, b, c)] == [1, 1, 1]
        assert result.mode == "parallel" and result.start_skew_ms[0] < 50
        # The ranking follows the schedules, and the winners are marked in the panes.
        assert comp.rankings["ttft"].winners == ("A",)
        assert comp.rankings["tpot"].winners == ("B",)
        assert "★ TTFT" in str(app.query_one("#pane-A", PaneView).border_title)
        assert "★ TPOT" in str(app.query_one("#pane-B", PaneView).border_title)
        assert "TTFT" in plain(app, "#pane-A .pane-status")
        # The failure stays in its own pane: C has the error card, A and B their answers.
        assert len(app.query_one("#pane-C").query(ErrorCard)) == 1
        assert not app.query_one("#pane-A").query(ErrorCard) and not app.query_one("#pane-B").query(ErrorCard)
        assert comp.stats["C"].failed == 1 and comp.stats["A"].ok == 1
        assert "C: 1 failed of 1" in plain(app, "#summary")
        # The race view has one row per pane on the shared axis.
        race = app.query_one("#race", TimelineView)
        assert [label for label, _ in race.rows] == ["A", "B", "C"]
        assert race.rows[2][1].status == "error"
    recs = list(read_records(data_dir / "sessions" / "s1.jsonl"))
    assert sorted((r["extra"]["pane"], r["status"]) for r in recs) == [(0, "ok"), (1, "ok"), (2, "error")]
    assert {r["extra"]["comparison_id"] for r in recs} == {"cmp-1"}
    assert a.closed and b.closed and c.closed


async def test_trials_give_verdicts_and_one_answer_per_prompt() -> None:
    app = CompareApp([quick_start(), quick_decode()], comparison_id="cmp-2")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "/repeat 4")
        assert app.repeat == 4
        await send(pilot, app, "compare me")
        await finish(pilot, app)
        result, comp = app.results[-1]
        assert [len(r) for r in result.records] == [4, 4]
        ttft = next(v for v in comp.verdicts if v.metric == "ttft")
        assert ttft.clear and ttft.better == "A"
        assert ttft.text.startswith("A reaches the first token") and "(95% interval" in ttft.text
        tpot = next(v for v in comp.verdicts if v.metric == "tpot")
        assert tpot.clear and tpot.better == "B"
        summary = plain(app, "#summary")
        assert "95% bootstrap" in summary and "4 trials" in summary
        # Trials replace each other in the transcript: one answer for the prompt.
        assert pane_text(app, "A").count("compare me") == 1
        assert len(app.query_one("#pane-A").query("AssistantMessage")) == 1


async def test_repeat_is_bounded_and_says_so() -> None:
    from ttft.tui.compare.commands import MAX_TRIALS

    a, b = quick_start(), quick_decode()
    app = CompareApp([a, b], comparison_id="cmp-r")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, f"/repeat {MAX_TRIALS}")
        assert app.repeat == MAX_TRIALS  # the ceiling itself is allowed
        await send(pilot, app, "/repeat 3")
        await send(pilot, app, f"/repeat {MAX_TRIALS + 1}")
        assert app.repeat == 3  # past it: refused, the previous count kept
        notices = heard(app)
        assert any(f"at most {MAX_TRIALS} trials" in m for m in notices), notices
        await send(pilot, app, "/repeat 99999999999999999999")
        assert app.repeat == 3
        await send(pilot, app, "/again")  # nothing sent yet: the bound sent nothing either
        assert not app.results


async def test_blind_mode_hides_and_reveals_names() -> None:
    backends = [quick_start(), quick_decode(), ScheduledBackend("third", ttft_s=0.05, gap_s=0.002, tokens=5)]
    app = CompareApp(backends, blind=True, seed=3)
    async with app.run_test(size=SIZE) as pilot:
        order = [p.backend.model for p in app.runner.panes]
        assert order != ["quick-start", "quick-decode", "third"]  # shuffled, so A is not simply the first -m
        titles = [str(v.border_title) for v in app.query(PaneView)]
        assert all("model hidden" in t for t in titles)
        assert not any(name in t for t in titles for name in order)
        await send(pilot, app, "who are you")
        await finish(pilot, app)
        summary = plain(app, "#summary")
        assert not any(name in summary for name in order) and "hidden" in summary
        await pilot.press("f5")
        titles = [str(v.border_title) for v in app.query(PaneView)]
        assert [order[i] in titles[i] for i in range(3)] == [True, True, True]
        summary = plain(app, "#summary")
        assert all(name in summary for name in order)


async def test_keep_continues_with_one_pane(data_dir: Path) -> None:
    a, b = quick_start(), quick_decode()
    app = CompareApp([a, b], session_id="s4")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "first")
        await finish(pilot, app)
        await send(pilot, app, "/keep b")
        await wait_until(pilot, lambda: [v.label for v in app.query(PaneView)] == ["B"])
        assert "kept B" in plain(app, "#header")
        await send(pilot, app, "second")
        await finish(pilot, app)
        assert len(a.requests) == 1 and len(b.requests) == 2
        assert [m.content for m in b.requests[-1].messages] == ["first", b.requests[-1].messages[1].content, "second"]
        assert a.closed
    last = list(read_records(data_dir / "sessions" / "s4.jsonl"))[-1]
    assert last["extra"]["pane"] == 1 and last["extra"]["kept"] is True and last["model"] == "quick-decode"


async def test_export_writes_jsonl_and_csv_summary(tmp_path: Path) -> None:
    out = tmp_path / "exports"
    app = CompareApp([quick_start(), broken()], out_dir=out, comparison_id="cmp-x")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "one")
        await finish(pilot, app)
        await send(pilot, app, "two")
        await finish(pilot, app)
        await pilot.press("ctrl+s")
        await wait_until(pilot, lambda: bool(app.last_export))
        assert [p.name for p in app.last_export] == ["cmp-x.jsonl", "cmp-x-summary.csv", "cmp-x-verdicts.csv"]
    assert len((out / "cmp-x.jsonl").read_text().splitlines()) == 4
    rows = list(csv.DictReader((out / "cmp-x-summary.csv").open()))
    assert [(r["prompt_index"], r["pane"], r["ok"], r["failed"]) for r in rows] == [
        ("0", "A", "1", "0"),
        ("0", "B", "0", "1"),
        ("1", "A", "1", "0"),
        ("1", "B", "0", "1"),
    ]


async def test_escape_cancels_every_pane_and_keeps_partial_answers() -> None:
    slow = [ScheduledBackend(f"slow{i}", ttft_s=0.01, gap_s=0.05, tokens=200) for i in range(2)]
    app = CompareApp(slow)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "long answer please")
        # until both panes stream (not a fixed pause, which a loaded machine can outlast)
        await wait_until(pilot, lambda: all(v.message is not None and v.message.stream.tail.text for v in app.views))
        await pilot.press("escape")
        await finish(pilot, app)
        result, comp = app.results[-1]
        assert [r[0].status for r in result.records] == ["cancelled", "cancelled"]
        assert all(r[0].answer.startswith("tok0") for r in result.records)
        assert comp.stats["A"].cancelled == 1
        assert "cancelled" in pane_text(app, "A")


async def test_sequential_toggle_and_add_remove(data_dir: Path) -> None:
    made: list[str] = []

    def factory(spec: str, base_url: str | None) -> ScheduledBackend:
        made.append(spec)
        return ScheduledBackend(spec.split(":")[1], ttft_s=0.01, gap_s=0.001, tokens=4)

    app = CompareApp([quick_start(), quick_decode()], factory=factory, session_id="s7")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("f6")
        assert app.runner.mode == "sequential"
        await send(pilot, app, "/add fake:newcomer")
        await wait_until(pilot, lambda: [v.label for v in app.query(PaneView)] == ["A", "B", "C"])
        assert made == ["fake:newcomer"]
        await send(pilot, app, "/remove A")
        await wait_until(pilot, lambda: [v.label for v in app.query(PaneView)] == ["B", "C"])
        await send(pilot, app, "go")
        await finish(pilot, app)
        _, comp = app.results[-1]
        assert comp.panes == ("B", "C")
        assert "sequential" in plain(app, "#summary")
    recs = list(read_records(data_dir / "sessions" / "s7.jsonl"))
    assert sorted(r["extra"]["pane"] for r in recs) == [1, 2]
    assert {r["extra"]["mode"] for r in recs} == {"sequential"}


@pytest.mark.parametrize("mode", ["parallel", "sequential"])
async def test_nothing_moves_while_the_panes_stream(mode: str) -> None:
    """Every change of a widget's height mid-stream is a layout pass of the whole screen: while the
    panes stream, no pane, status line, answer room or race view changes height, the prompt stays
    in view above its answer, and the newest line is on screen once the answer pages."""
    from textual.widgets._markdown import MarkdownFence
    from ttft.tui.widgets.transcript import AssistantMessage, UserMessage

    scale = 1 if mode == "parallel" else 2  # one pane after another: shorter answers, the same test time
    backends = [
        ScheduledBackend(f"m{i}", ttft_s=0.05 + 0.05 * i, gap_s=0.004, tokens=400 // scale, word="word")
        for i in range(2)
    ]  # ... and one whose answer is Markdown blocks: a paragraph, a code block, a heading, again and again
    md_word = "para\n\n```\ncode\n```\n# h"
    backends.append(ScheduledBackend("md", ttft_s=0.15, gap_s=0.03, tokens=60 // scale, word=md_word))
    app = CompareApp(backends, mode=mode)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, app, "first prompt")  # a summary below, older turns above: the usual second prompt
        await finish(pilot, app)
        # Sent directly: pilot.press waits for an idle screen, which it is not until the panes are done.
        await app.compare.send("a long answer please")
        seen: dict[str, set[tuple[int, ...]]] = {v.label: set() for v in app.views}
        paged = set()
        while app.in_flight:
            await asyncio.sleep(0.02)  # not pilot.pause: it waits for an idle screen, rare while panes stream
            for v in app.views:
                msg = v.message
                if v.recorder is None or msg is None or not msg.stream.tail.text:
                    continue  # not streaming (yet, or any more)
                tail = msg.stream.tail
                assert not msg.stream.segments, "a Markdown block was mounted mid-stream"
                seen[v.label].add(
                    (v.size.height, v.status.size.height, tail.size.height, app.query_one("#race").size.height)
                )
                user = v.transcript.query(UserMessage).last()
                assert v.transcript.region.contains_region(user.region), "the prompt scrolled out of view"
                n, top = len(tail._lines), tail.first_shown
                assert top <= n - 1 < top + tail.size.height  # the newest line is drawn
                paged.add(v.label) if top > 0 else None
        assert all(len(s) == 1 for s in seen.values()), seen
        assert paged == {"A", "B", "C"}  # 400 words do not fit the room: each answer paged within it
        assert all(v.status.size.height == 2 for v in app.views)
        # When the prompt has ended, every answer is rendered as Markdown in full.
        md = app.query_one("#pane-C").query_one(AssistantMessage)
        assert md.answer.display and "```" in md.answer.source and len(md.answer.query(MarkdownFence)) == 60 // scale


async def test_closing_mid_stream_drops_pane_updates_quietly(data_dir: Path) -> None:
    """Quitting while panes stream: the turns are recorded as cancelled, and the pane updates that
    land while the screen is being taken down raise nothing (no 'Task exception was never retrieved')."""
    import gc

    loop = asyncio.get_running_loop()
    errors: list[dict] = []
    loop.set_exception_handler(lambda _loop, ctx: errors.append(ctx))
    try:
        slow = [ScheduledBackend(f"slow{i}", ttft_s=0.02, gap_s=0.01, tokens=300) for i in range(2)]
        app = CompareApp(slow, session_id="s-quit")
        async with app.run_test(size=SIZE):
            await app.compare.send("stop me")
            for _ in range(100):
                await asyncio.sleep(0.01)
                if all(v.message is not None and v.message.stream.tail.text for v in app.views):
                    break
        for _ in range(5):
            await asyncio.sleep(0.02)
        gc.collect()
        await asyncio.sleep(0)
    finally:
        loop.set_exception_handler(None)
    assert not errors, [e.get("message") for e in errors]
    statuses = [r["status"] for r in read_records(data_dir / "sessions" / "s-quit.jsonl")]
    assert statuses == ["cancelled", "cancelled"]
