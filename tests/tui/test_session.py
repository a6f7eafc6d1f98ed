"""The chat's session: one request builder with a compare pane, and its past turns typed, a resumed log's too."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ttft.backends.base import Message, build_request
from ttft.backends.compare.runner import ComparePane, CompareRunner
from ttft.telemetry.log.turns import SessionLog, Skipped
from ttft.telemetry.record import TurnRecord
from ttft.telemetry.settings import TurnSettings
from ttft.telemetry.typed_read import RecordError
from ttft.tui.session import ChatSession

from tests.support.compare_fakes import ScheduledBackend
from tests.support.turns import play, recorder, stream

HISTORY = [Message("user", "first"), Message("assistant", "one")]
SETTINGS = TurnSettings(max_output_tokens=32, temperature=0.1)


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


def test_system_then_history_then_the_prompt() -> None:
    req = build_request("second", system="be brief", history=HISTORY, settings=SETTINGS)
    assert [(m.role, m.content) for m in req.messages] == [
        ("system", "be brief"),
        ("user", "first"),
        ("assistant", "one"),
        ("user", "second"),
    ]
    assert req.settings is SETTINGS and req.prompt == "second"


@pytest.mark.parametrize("system", [None, ""])
def test_no_system_message_without_a_system_prompt(system: str | None) -> None:
    req = build_request("hi", system=system)
    assert [m.role for m in req.messages] == ["user"] and req.settings == TurnSettings()


@pytest.mark.parametrize("system", [None, "be brief"])
def test_the_chat_and_compare_build_the_same_request(system: str | None) -> None:
    session = ChatSession(runner=None, spec="x:y", settings=SETTINGS, log=SessionLog("s"), system_prompt=system)  # type: ignore[arg-type]
    session.messages = list(HISTORY)
    pane = ComparePane(ScheduledBackend("p"), "A", history=list(HISTORY), settings=SETTINGS)
    runner = CompareRunner([pane], system=system)
    expected = build_request("second", system=system, history=HISTORY, settings=SETTINGS)
    assert session.build_request("second") == runner._request(pane, "second") == expected


def _log(path: Path, *records: dict[str, Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_a_resumed_session_holds_typed_records_and_its_context(tmp_path: Path) -> None:
    first = {**play(stream(visible=3), recorder("first question")), "turn_index": 0}
    second = {**play(stream(visible=2), recorder("second question")), "turn_index": 1}
    session = ChatSession(runner=None, spec="x:y")  # type: ignore[arg-type]
    records = session.resume(_log(tmp_path / "s-typed.jsonl", first, second))
    assert all(isinstance(r, TurnRecord) for r in records) and session.records == records
    assert [r.prompt for r in records] == ["first question", "second question"]
    assert [m.content for m in session.messages] == [
        "first question",
        first["answer"],
        "second question",
        second["answer"],
    ]
    assert session.turn_index == 2 and session.log.session_id == "s-typed"


def test_a_logged_line_that_is_no_record_is_counted_as_skipped_and_keeps_its_context(tmp_path: Path) -> None:
    # well formed JSON of the right shape, but a setting that is no number: it does not read as a TurnRecord
    good = {**play(stream(visible=3), recorder("kept")), "turn_index": 0}
    odd = {**play(stream(visible=2), recorder("hand-edited")), "turn_index": 1}
    odd["settings"] = {**odd["settings"], "max_output_tokens": "\x1b[2Jlots"}
    with pytest.raises(RecordError):
        TurnRecord.from_dict(odd)
    path = _log(tmp_path / "s-odd.jsonl", good, odd)
    skipped = Skipped()
    session = ChatSession(runner=None, spec="x:y")  # type: ignore[arg-type]
    records = session.resume(path, skipped)
    assert [r.prompt for r in records] == ["kept"]  # only what reads is drawn (pane, history, transcript)
    assert skipped.lines == {path: 1} and skipped.message() == f"skipped 1 unreadable line in {path}"
    # nothing of the conversation is lost: its prompt and answer stay in the context, its index counts
    assert [m.content for m in session.messages][2:] == ["hand-edited", odd["answer"]]
    assert session.turn_index == 2


async def test_a_resumed_sessions_earlier_context_is_read_once_the_chat_asks_or_the_next_turn_needs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    turns = [{**play(stream(visible=2), recorder(f"q{i}")), "turn_index": i} for i in range(6)]
    path = _log(tmp_path / "s-long.jsonl", *turns)
    started: list[str] = []
    real = threading.Thread.start

    def spy(self: threading.Thread) -> None:
        started.append(self.name)
        real(self)

    monkeypatch.setattr(threading.Thread, "start", spy)
    for asked in (True, False):
        session = ChatSession(runner=None, spec="x:y")  # type: ignore[arg-type]
        session.resume(path, turns=2)
        assert [m.content for m in session.messages][::2] == ["q4", "q5"] and started == []  # not read yet
        if asked:
            session.read_earlier()  # the chat, once the transcript is drawn
            session.read_earlier()  # once only
            assert started == ["ttft-resume-context"]
        await session._take_earlier()  # what the next turn waits for (starts the read if not begun)
        assert started == ["ttft-resume-context"]
        assert [m.content for m in session.messages][::2] == [f"q{i}" for i in range(6)]
        started.clear()


def test_a_finished_turn_is_folded_in_typed_and_regenerate_takes_it_back() -> None:
    session = ChatSession(runner=None, spec="x:y")  # type: ignore[arg-type]
    answered = TurnRecord.from_dict({**play(stream(visible=3), recorder("q")), "turn_index": 4})
    session.complete(answered)
    assert session.records == [answered] and session.turn_index == 5
    assert [(m.role, m.content) for m in session.messages] == [("user", "q"), ("assistant", answered.answer)]
    assert session.pop_last_exchange() == "q" and session.messages == []
    empty = TurnRecord.from_dict({**play(stream(visible=0), recorder("nothing")), "turn_index": 5})
    session.complete(empty)  # no answer text: the context is unchanged
    assert session.messages == [] and session.turn_index == 6


async def test_a_turns_files_stay_in_the_context_of_the_next_turn_and_never_in_its_record(tmp_path: Path) -> None:
    from ttft.backends.attachments import Attachment, read_attachment
    from ttft.tui.runner import LoopThread

    from tests.support import files

    (tmp_path / "pic.png").write_bytes(files.png(8, 8))
    pic = read_attachment(tmp_path / "pic.png")
    assert isinstance(pic, Attachment)
    backend = ScheduledBackend("ok", ttft_s=0.001, gap_s=0.001, tokens=2)
    runner = LoopThread()
    try:
        session = ChatSession(runner=runner, spec="x:y", factory=lambda spec, url: backend, log=SessionLog("s"))
        live = await session.start("what is this?", attachments=(pic,))
        record = await live.wait()
        assert [a.name for a in record.attachments] == ["pic.png"] and record.prompt == "what is this?"
        session.complete(record)
        second = session.build_request("and its colour?")
        assert second.messages[0] == Message("user", "what is this?", (pic,))  # the model still sees the image
        assert second.attachments == ()  # the new turn sends no new file
        session.new_chat()
        logged = TurnRecord.from_dict({**record.to_dict(), "turn_index": 0})  # a logged turn holds no file:
        session.complete(logged)  # its prompt alone is context
        assert session.build_request("again").messages[0] == Message("user", "what is this?")
    finally:
        runner.close()


async def test_through_the_chats_backend_process_files_go_out_and_the_turn_is_priced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chat's backend runs in its own process: the files cross the pipe to it, and its price back."""
    from ttft.backends.attachments import Attachment, read_attachment
    from ttft.tui.runner import LoopThread

    from tests.fakes import FakeServer, Schedule
    from tests.support import files

    monkeypatch.delenv("TTFT_IN_PROCESS", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("TTFT_CONFIG_DIR", str(tmp_path / "conf"))
    (tmp_path / "pic.png").write_bytes(files.png(16, 16))
    pic = read_attachment(tmp_path / "pic.png")
    assert isinstance(pic, Attachment)
    runner = LoopThread()
    with FakeServer(Schedule(visible_tokens=3, input_tokens=900)) as srv:
        session = ChatSession(
            runner=runner, spec="openai:gpt-4o-mini", base_url=srv.openai_base_url, log=SessionLog("s")
        )
        try:
            live = await session.start("what is it?", attachments=(pic,))
            kind = type(session.backend).__name__
            record = await live.wait()
        finally:
            await session.close_backend()
            runner.close()
        part = srv.requests[-1].body["messages"][-1]["content"][0]
    assert kind == "ProcessBackend" and record.status == "ok", record.error
    assert part == {"type": "image_url", "image_url": {"url": pic.data_url()}}
    assert record.cost is not None and record.cost.priced_as == "openai:gpt-4o-mini"
