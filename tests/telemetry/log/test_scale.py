"""Long sessions: resume, listing and export read what they need, not the whole log up front.

Behaviour, not timing: how many records are parsed before the resumed chat draws, how many
lines a second listing parses, that the context of every turn still reaches the next request,
and that an export holds no list of the session. Figures: tests/benchmarks/resume_scale.py.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import pytest
import ttft.telemetry.export.formats as export_mod
import ttft.telemetry.log.sessions as index_mod
import ttft.telemetry.log.turns as log_mod
from ttft.telemetry.log.json_line import encode_line
from ttft.telemetry.log.sessions import list_sessions
from ttft.telemetry.log.turns import SessionLog, Skipped, read_records, tail_records
from ttft.tui.chat.app import ChatApp
from ttft.tui.cli import main
from ttft.tui.session import RESUME_TURNS
from ttft.tui.widgets.transcript import AssistantMessage, NoteMessage, UserMessage

from tests.support.tui_support import TimedBackend, factory_for, wait_until
from tests.support.turns import play, stream

TURNS = 2000


@pytest.fixture(autouse=True)
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    return tmp_path


def _write_log(path: Path, turns: int, *, damaged_at: int | None = None) -> list[dict[str, Any]]:
    template = play(stream(visible=4))
    recs = []
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        for i in range(turns):
            rec = dict(template, session_id=path.stem, turn_index=i, prompt=f"question {i}", answer=f"answer {i}")
            rec["status"] = "error" if i % 10 == 0 else "ok"
            rec["metrics"] = {**template["metrics"], "ttft_ms": float(i % 97), "tpot_ms": float(i % 13)}
            recs.append(rec)
            f.write(encode_line(rec))
            if i == damaged_at:
                f.write(b'{"schema": "ttft.turn/1", "torn\n')
    return recs


@pytest.fixture
def long_log(data_dir: Path) -> Path:
    path = data_dir / "sessions" / "20260101-000000-long.jsonl"
    _write_log(path, TURNS)
    return path


class _Parsed:
    """Counts the log lines parsed (parse_line, where the reader and the session index call it), on every thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.n = 0
        real = log_mod.parse_line

        def spy(raw: bytes) -> Any:
            self.n += 1
            return real(raw)

        for mod in (log_mod, index_mod):
            monkeypatch.setattr(mod, "parse_line", spy)


def test_tail_records_reads_only_the_end(long_log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    parsed = _Parsed(monkeypatch)
    last = tail_records(long_log, 5)
    assert [r["turn_index"] for r in last] == list(range(TURNS - 5, TURNS))
    assert parsed.n <= 6


def test_tail_records_skips_and_counts_damaged_lines_across_blocks(data_dir: Path, monkeypatch) -> None:
    path = data_dir / "s.jsonl"
    recs = _write_log(path, 300, damaged_at=290)
    monkeypatch.setattr(log_mod, "TAIL_BLOCK", 1000)  # lines cut at many block boundaries
    skipped = Skipped()
    got = tail_records(path, 20, skipped)
    assert got == list(read_records(path))[-20:] and got[-1]["answer"] == recs[-1]["answer"]
    assert skipped.lines == {path: 1}
    assert tail_records(path, 10_000) == list(read_records(path))  # more than there are: all of them


async def test_resume_of_a_2000_turn_log_draws_the_last_turn_from_a_bounded_read(
    long_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = _Parsed(monkeypatch)
    backend = TimedBackend(first_ms=5, token_ms=1, visible=2)
    app = ChatApp("fake:timed", factory=factory_for(backend), resume=long_log)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: any("resumed session" in str(n.content) for n in app.query(NoteMessage)))
        up_front = parsed.n
        notes = " ".join(str(n.content) for n in app.query(NoteMessage))
        assert f"{TURNS} turns" in notes
        users = [str(m.content) for m in app.query(UserMessage)]
        assert users[-1] == f"question {TURNS - 1}" and len(users) < 100  # the last turns, not 2,000 widgets
        assert app.query(AssistantMessage)
        assert app.chat.session.records[-1].answer == f"answer {TURNS - 1}"
        assert up_front <= RESUME_TURNS + 5, up_front  # read backwards from the end, not all 2,000 lines
        assert app.query_one("#history-table").row_count == RESUME_TURNS
        # the next turn still carries the whole conversation as context (read meanwhile, in a thread)
        app.query_one("#prompt").value = "and now?"
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.chat.session.records) == RESUME_TURNS + 1, timeout=30)
        sent = backend.requests[-1].messages
        assert len(sent) == 2 * TURNS + 1
        assert sent[0].content == "question 0" and sent[1].content == "answer 0"
        assert sent[-2].content == f"answer {TURNS - 1}" and sent[-1].content == "and now?"
        assert app.chat.session.records[-1].turn_index == TURNS


def _medians(path: Path) -> tuple[int, int, float, float]:
    recs = list(read_records(path))
    return (
        len(recs),
        sum(r["status"] == "error" for r in recs),
        statistics.median(r["metrics"]["ttft_ms"] for r in recs),
        statistics.median(r["metrics"]["tpot_ms"] for r in recs),
    )


def test_listing_reads_a_large_log_once_then_only_what_was_appended(
    long_log: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (info,) = list_sessions()
    assert (info.turns, info.errors, info.median_ttft_ms, info.median_tpot_ms) == _medians(long_log)
    parsed = _Parsed(monkeypatch)
    (info,) = list_sessions()
    assert parsed.n == 0 and info.turns == TURNS  # nothing new: the index answers
    rec = play(stream(visible=2))
    SessionLog(long_log.stem).append(dict(rec, status="error"))
    (info,) = list_sessions()
    assert parsed.n == 1  # the one appended line
    assert (info.turns, info.errors, info.median_ttft_ms, info.median_tpot_ms) == _medians(long_log)
    assert info.started_at == next(read_records(long_log))["started_at"]


def test_listing_notices_a_replaced_log_and_a_torn_last_line(long_log: Path) -> None:
    list_sessions()
    _write_log(long_log, 7)  # the same name, other contents
    with long_log.open("ab") as f:
        f.write(b'{"schema": "ttft.turn/1", "tor')  # a turn being written, or torn by a crash
    skipped = Skipped()
    (info,) = list_sessions(skipped=skipped)
    assert info.turns == 7 and skipped.lines == {long_log: 1}
    index = json.loads((long_log.parent / ".index" / f"{long_log.stem}.json").read_text())
    assert index["offset"] < long_log.stat().st_size  # the unfinished line is read again next time
    assert main(["sessions"]) == 0


def test_listing_without_a_writable_index_still_lists(long_log: Path) -> None:
    (long_log.parent / ".index").write_text("not a folder")  # the index cannot be written there
    (info,) = list_sessions()
    assert info.turns == TURNS


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "otel"])
def test_export_streams_the_log(
    fmt: str, long_log: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = export_mod.WRITERS[fmt]
    seen: list[Any] = []

    def spy(records: Any, out: Path) -> int:
        seen.append(records)
        return real(records, out)

    monkeypatch.setitem(export_mod.WRITERS, fmt, spy)
    out = tmp_path / f"out.{fmt}"
    assert main(["export", str(long_log), "-f", fmt, "-o", str(out)]) == 0
    assert f"wrote {TURNS} turns" in capsys.readouterr().err
    assert seen and not isinstance(seen[0], list | tuple)  # a stream (or a function of one), never a list
    if fmt == "jsonl":
        lines = out.read_text().splitlines()
        assert len(lines) == TURNS and json.loads(lines[-1])["answer"] == f"answer {TURNS - 1}"
    if fmt == "csv":
        assert len(out.read_text().splitlines()) == TURNS + 1


def test_report_of_a_long_log(long_log: Path, tmp_path: Path) -> None:
    assert main(["report", str(long_log)]) == 0
