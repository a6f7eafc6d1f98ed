"""The chat a person keeps open all day: the draft is never lost, the history outlives the chat,
an edited prompt makes a new branch, code blocks copy, and ``/attach`` lists files until they go."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.command import CommandPalette
from ttft.telemetry.log import drafts
from ttft.telemetry.record import TurnRecord
from ttft.tui.chat.app import ChatApp
from ttft.tui.chat.prompt import ChatPrompt
from ttft.tui.screens.history_search import HistorySearch
from ttft.tui.widgets.attachments import AttachedFile, AttachmentTray
from ttft.tui.widgets.code_blocks import CodeFence
from ttft.tui.widgets.transcript import CompactTurn, UserMessage

from tests.support.tui_support import TimedBackend, factory_for, said, wait_until

SIZE = (140, 44)
CODE_ANSWER = "Here:\n\n```python\ndef f():\n\treturn '\x1b[31m'  \n```\n\nand\n\n```sh\nls -la\n```\n"


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


def box(app: ChatApp) -> ChatPrompt:
    return app.query_one("#prompt", ChatPrompt)


async def turn(pilot, app: ChatApp, text: str, n: int) -> TurnRecord:  # type: ignore[no-untyped-def]
    box(app).value = text
    await pilot.press("enter")
    await wait_until(pilot, lambda: len(app.chat.session.records) == n and not app.chat.busy)
    return app.chat.session.records[-1]


async def test_esc_during_a_turn_cancels_the_turn_never_the_draft() -> None:
    backend = TimedBackend(first_ms=5, token_ms=30, reasoning=0, visible=2000)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    async with app.run_test(size=SIZE) as pilot:
        box(app).value = "the question"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.chat.drawn.answer is not None)
        await pilot.press("n", "e", "x", "t", "ctrl+j", "l", "i", "n", "e")
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == 1)
        assert app.chat.session.records[0].status == "cancelled"
        assert box(app).value == "next\nline"
        await pilot.press("escape")  # nothing in flight: still not the draft's
        assert box(app).value == "next\nline"


async def test_a_draft_left_at_quit_is_back_on_resume_with_its_files(data_dir: Path) -> None:
    notes = data_dir / "notes.txt"
    notes.write_text("some notes\n")
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=5, token_ms=1, visible=3)))
    async with app.run_test(size=SIZE) as pilot:
        await turn(pilot, app, "first", 1)
        box(app).value = f"/attach {notes}"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.pending) == 1)
        box(app).value = "half typed\n\twith a tab"
        log = app.chat.session.log.path
    saved = drafts.load(log.stem)
    assert saved == drafts.Draft("half typed\n\twith a tab", (str(notes),))
    assert "some notes" not in (data_dir / "drafts" / f"{log.stem}.json").read_text()  # paths, not contents
    again = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=5, token_ms=1, visible=3)), resume=log)
    async with again.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: box(again).value == "half typed\n\twith a tab" and len(again.chat.pending) == 1)
        # heard, not the toasts on screen: late in a full run this is read after the toast's 5 s are over
        await wait_until(pilot, lambda: said(again, "unsent prompt is back"))
        rec = await turn(pilot, again, box(again).value, 2)
        assert rec.prompt == "half typed\n\twith a tab" and [a.name for a in rec.attachments] == ["notes.txt"]
    assert drafts.load(log.stem) is None  # sent: nothing left to keep


async def test_a_draft_in_a_chat_that_never_sent_comes_back_in_the_resumed_one(data_dir: Path) -> None:
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=5, token_ms=1, visible=3)))
    async with app.run_test(size=SIZE) as pilot:
        await turn(pilot, app, "logged", 1)
        log = app.chat.session.log.path
    fresh = ChatApp("fake:timed", factory=factory_for(TimedBackend()))
    async with fresh.run_test(size=SIZE) as pilot:
        await pilot.press("u", "n", "s", "e", "n", "t")
        orphan = fresh.chat.session.log.session_id
    assert drafts.load(orphan) == drafts.Draft("unsent")
    back = ChatApp("fake:timed", factory=factory_for(TimedBackend()), resume=log)
    async with back.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: box(back).value == "unsent")
    assert drafts.load(orphan) is None  # it moved to the resumed chat


async def test_a_new_chat_process_recalls_the_last_prompt_with_up_and_ctrl_r_searches() -> None:
    backend = TimedBackend(first_ms=5, token_ms=1, visible=3)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    async with app.run_test(size=SIZE) as pilot:
        await turn(pilot, app, "explain the KV cache", 1)
        await turn(pilot, app, "why is\nTTFT high?", 2)
    second = ChatApp("fake:timed", factory=factory_for(backend))
    async with second.run_test(size=SIZE) as pilot:
        await pilot.press("up")
        assert box(second).value == "why is\nTTFT high?"
        await pilot.press("ctrl+r")
        await wait_until(pilot, lambda: isinstance(second.screen, HistorySearch))
        await pilot.press(*"kv")
        await wait_until(pilot, lambda: second.screen.matches == ["explain the KV cache"])  # type: ignore[attr-defined]
        await pilot.press("enter")
        await wait_until(pilot, lambda: second.screen is second.chat)
        assert box(second).value == "explain the KV cache"
        await pilot.press("ctrl+z")  # what the pick replaced comes back
        assert box(second).value == "why is\nTTFT high?"


async def test_f5_regenerates_as_a_branch_of_the_last_turn() -> None:
    backend = TimedBackend(first_ms=5, token_ms=1, visible=3)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    async with app.run_test(size=SIZE) as pilot:
        await turn(pilot, app, "q", 1)
        await pilot.press("f5")
        await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == 2)
        assert app.chat.session.records[-1].branch_of == 0 and len(app.query(UserMessage)) == 1


async def test_f5_sends_the_files_again_and_says_so_when_a_log_kept_none(data_dir: Path) -> None:
    notes = data_dir / "notes.md"
    notes.write_text("# notes\n")
    backend = TimedBackend(first_ms=5, token_ms=1, visible=3)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    async with app.run_test(size=SIZE) as pilot:
        box(app).value = f"/attach {notes}"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.pending) == 1)
        await turn(pilot, app, "read it", 1)
        await pilot.press("f5")
        await wait_until(pilot, lambda: not app.chat.busy and len(app.chat.session.records) == 2)
        again = app.chat.session.records[-1]
        assert again.branch_of == 0 and [a.name for a in again.attachments] == ["notes.md"]
        assert backend.requests[-1].attachments[0].text == "# notes\n"
        assert not said(app, "Regenerating without")
        log = app.chat.session.log.path
    # the same prompt from the log: its file's contents were never kept, and F5 says it goes without them
    resumed = ChatApp("fake:timed", factory=factory_for(backend), resume=log)
    async with resumed.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: len(resumed.chat.session.records) == 2)
        await pilot.press("f5")
        await wait_until(pilot, lambda: not resumed.chat.busy and len(resumed.chat.session.records) == 3)
        assert said(resumed, "Regenerating without the 1 file the prompt was sent with")
        assert resumed.chat.session.records[-1].attachments == () and backend.requests[-1].attachments == ()


async def test_edit_and_resend_makes_a_new_branch_the_old_one_stays_in_the_log() -> None:
    backend = TimedBackend(first_ms=5, token_ms=1, visible=3)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    async with app.run_test(size=SIZE) as pilot:
        for i, p in enumerate(("zero", "one", "two")):
            await turn(pilot, app, p, i + 1)
        box(app).value = "a draft I was typing"
        await pilot.pause()
        app.chat.transcript.scroll_home(animate=False)
        await pilot.pause()
        target = next(u for u in app.query(UserMessage) if u.turn_index == 1)
        await pilot.click(target)
        await wait_until(pilot, lambda: app.chat.editing == 1 and box(app).value == "one")
        assert not app.query_one("#edit-bar").has_class("-empty")
        box(app).value = "one, said better"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.session.records) == 4 and not app.chat.busy)
        rec = app.chat.session.records[-1]
        assert rec.branch_of == 1 and rec.prompt == "one, said better"
        sent = [m.content for m in backend.requests[-1].messages]
        assert sent[::2] == ["zero", "one, said better"]  # the old branch is not in the context
        shown = [u.prompt for u in app.query(UserMessage)] + [c.prompt for c in app.query(CompactTurn)]
        assert sorted(shown) == ["one, said better", "zero"]
        await wait_until(pilot, lambda: box(app).value == "a draft I was typing")  # the draft is back
        pane = app.chat.pane
        assert not pane.query_one("#branches").has_class("-empty")
        table = pane.query_one("#branches").render()
        assert table is not None
        logged = [json.loads(x) for x in app.chat.session.log.path.read_text().splitlines()]
        assert [(r["prompt"], r["branch_of"]) for r in logged] == [
            ("zero", None),
            ("one", None),
            ("two", None),
            ("one, said better", 1),
        ]
        await turn(pilot, app, "and then?", 5)
        assert [m.content for m in backend.requests[-1].messages][::2] == ["zero", "one, said better", "and then?"]
        path = app.chat.session.log.path
    # the resumed chat sends the branch the log ended on
    backend2 = TimedBackend(first_ms=5, token_ms=1, visible=3)
    again = ChatApp("fake:timed", factory=factory_for(backend2), resume=path)
    async with again.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: len(again.chat.session.records) == 5)
        await turn(pilot, again, "resumed", 6)
        assert [m.content for m in backend2.requests[-1].messages][::2] == [
            "zero",
            "one, said better",
            "and then?",
            "resumed",
        ]


async def test_the_palette_offers_edit_prompt_n_and_esc_stops_editing() -> None:
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend(first_ms=5, token_ms=1, visible=3)))
    async with app.run_test(size=SIZE) as pilot:
        await turn(pilot, app, "first prompt", 1)
        titles = [c.title for c in app.chat.system_commands()]
        assert "Edit prompt 1: first prompt" in titles
        box(app).value = "kept"
        await app.chat.action_edit_prompt(0)
        assert box(app).value == "first prompt"
        await pilot.press("escape")
        assert app.chat.editing is None and box(app).value == "kept"


async def test_a_code_blocks_header_and_the_palette_copy_it_exactly() -> None:
    backend = TimedBackend(first_ms=5, token_ms=1, reasoning=0, visible=1, text=lambda i: CODE_ANSWER)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    async with app.run_test(size=SIZE) as pilot:
        await turn(pilot, app, "code please", 1)
        await pilot.pause()
        fences = list(app.query(CodeFence))
        assert [f.number for f in fences] == [1, 2]
        assert "python, 2 lines · code 1 · click to copy" in str(fences[0].header.render())
        await pilot.click(fences[1].header)
        assert app.clipboard == "ls -la"
        assert said(app, "Copied code block 2 (sh, 1 line")
        titles = [c.title for c in app.chat.system_commands()]
        assert "Copy code block 1 (python, 2 lines)" in titles
        app.chat.action_copy_code(1)
        assert app.clipboard == "def f():\n\treturn '\x1b[31m'  "  # the model's text, exact
        await turn(pilot, app, "more", 2)
        assert [f.number for f in app.query(CodeFence)][-2:] == [3, 4]  # numbered through the transcript


async def test_attach_lists_files_until_sent_and_says_refusals_first(data_dir: Path) -> None:
    notes = data_dir / "notes.md"
    notes.write_text("# notes\n")
    pic = data_dir / "pic.png"
    pic.write_bytes(
        b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + (2).to_bytes(4, "big") * 2 + b"\x08\x02" + b"\0" * 40
    )
    backend = TimedBackend(first_ms=5, token_ms=1, visible=3)
    app = ChatApp("fake:timed", factory=factory_for(backend))
    async with app.run_test(size=SIZE) as pilot:
        box(app).value = f"/attach {data_dir}/nope.txt"
        await pilot.press("enter")
        await wait_until(pilot, lambda: said(app, "nope.txt: no such file"))
        assert app.chat.pending == [] and box(app).value == ""
        box(app).value = f"/attach {notes} {pic}"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.query(AttachedFile)) == 2)
        tray = app.query_one(AttachmentTray)
        assert not tray.has_class("-empty") and "notes.md" in str(app.query(AttachedFile)[0].render())
        await pilot.click(app.query(AttachedFile)[1])  # a click removes it
        await wait_until(pilot, lambda: [p.file.name for p in app.chat.pending] == ["notes.md"])
        rec = await turn(pilot, app, "read it", 1)
        assert [a.name for a in rec.attachments] == ["notes.md"]
        assert backend.requests[-1].attachments[0].text == "# notes\n"
        await wait_until(pilot, lambda: tray.has_class("-empty"))
        assert "notes.md" in str(app.query(UserMessage)[-1].render())  # the prompt shows its files


async def test_an_image_for_the_local_engine_is_refused_before_sending(data_dir: Path) -> None:
    pic = data_dir / "pic.png"
    pic.write_bytes(
        b"\x89PNG\r\n\x1a\n" + b"\x00\x00\x00\rIHDR" + (2).to_bytes(4, "big") * 2 + b"\x08\x02" + b"\0" * 40
    )

    class LocalLike(TimedBackend):
        provider, api = "local", "llama.cpp"

    backend = LocalLike(first_ms=5, token_ms=1, visible=3)
    app = ChatApp("local", factory=factory_for(backend), warm_up=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_until(pilot, lambda: app.chat.session.backend is not None)
        box(app).value = f"/attach {pic}"
        await pilot.press("enter")
        await wait_until(pilot, lambda: said(app, "the local engine takes text only"))
        assert app.chat.pending == [] and backend.requests == []


async def test_tab_completes_an_attach_path(data_dir: Path) -> None:
    (data_dir / "report-2026.txt").write_text("x")
    (data_dir / "reports").mkdir()
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend()))
    async with app.run_test(size=SIZE) as pilot:
        box(app).value = f"/attach {data_dir}/rep"
        await pilot.press("tab")
        assert box(app).value == f"/attach {data_dir}/report"
        assert said(app, "report-2026.txt") and said(app, "reports/")
        await pilot.press("s", "tab")
        assert box(app).value == f"/attach {data_dir}/reports/"


async def test_the_palette_lists_attached_files_to_remove(data_dir: Path) -> None:
    (data_dir / "a.txt").write_text("a")
    app = ChatApp("fake:timed", factory=factory_for(TimedBackend()))
    async with app.run_test(size=SIZE) as pilot:
        box(app).value = f"/attach {data_dir}/a.txt"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.pending) == 1)
        assert "Remove attached file 1: a.txt" in [c.title for c in app.chat.system_commands()]
        box(app).value = "/detach 1"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.chat.pending == [])
        await pilot.press("ctrl+p")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette))


async def test_the_full_render_starts_when_the_stream_ends_before_the_record_and_is_drawn_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ttft.telemetry import events as ev
    from ttft.tui.widgets.code_blocks import CodeMarkdown

    from tests.support.tui_support import ScriptedBackend, script

    updates: list[str] = []
    update = CodeMarkdown.update

    def counting(self: CodeMarkdown, markdown: str):  # type: ignore[no-untyped-def]
        if self.has_class("answer") and markdown:
            updates.append(markdown)
        return update(self, markdown)

    monkeypatch.setattr(CodeMarkdown, "update", counting)
    events = script(visible=30, first_ms=5, token_ms=1)
    events.append(ev.Finished(events[-1].t_ns + 1, "stop"))  # the stream's end event, then the stream hangs
    app = ChatApp("fake:scripted", factory=factory_for(ScriptedBackend(events, block=True)), fps=1e-4)
    async with app.run_test(size=SIZE) as pilot:
        box(app).value = "q"
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.chat.drawn.answer is not None and app.chat.live is not None)
        await wait_until(pilot, lambda: app.chat.live.recorder.snapshot().phase == "ok")
        app.chat.frame()
        msg = app.chat.drawn.answer
        await wait_until(pilot, lambda: msg.answer.display and not msg.stream.display)
        assert app.chat.session.records == []  # drawn whole while the record is not even made
        assert updates == ["".join(f"word{i} " for i in range(30))]
        app.chat.turns.cancel()  # the stream never closes by itself
        await wait_until(pilot, lambda: len(app.chat.session.records) == 1 and not app.chat.busy)
        assert len(updates) == 1  # the record's text is the one drawn: not drawn again
