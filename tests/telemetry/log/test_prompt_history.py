"""The prompt history file: 0600, capped, read as untrusted data, shared by several chats."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from telemetry.log import drafts
from telemetry.log.prompt_history import MAX_ENTRY_CHARS, PromptHistory


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_prompts_are_kept_0600_and_read_back_by_the_next_chat(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    h = PromptHistory(path).load()
    assert h.entries == [] and h.error is None  # no file yet: an empty history, nothing said
    assert h.add("first") and h.add("second\n\twith a tab and ünïcødé")
    assert not h.add("second\n\twith a tab and ünïcødé")  # a repeat of the last one
    assert not h.add("   \n") and not h.add("x" * (MAX_ENTRY_CHARS + 1))
    assert mode(path) == 0o600
    again = PromptHistory(path).load()
    assert again.entries == ["first", "second\n\twith a tab and ünïcødé"]
    assert again.recent()[0].startswith("second")


def test_a_wider_file_is_tightened_and_a_full_one_compacted(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps({"text": f"p{i}"}) + "\n" for i in range(25)))
    os.chmod(path, 0o644)
    h = PromptHistory(path, cap=10).load()
    assert h.entries == [f"p{i}" for i in range(15, 25)]  # past twice the cap: the newest cap kept
    assert len(path.read_text().splitlines()) == 10 and mode(path) == 0o600
    h.add("new")
    assert mode(path) == 0o600 and PromptHistory(path, cap=10).load().entries[-1] == "new"


def test_untrusted_lines_are_skipped_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(
        b"not json\n"
        b'["a list"]\n'
        b'{"text": 42}\n'
        b'{"text": "lone \\ud800 surrogate"}\n'
        b"\xff\xfe\n"
        + json.dumps({"text": "y" * (MAX_ENTRY_CHARS + 1)}).encode()
        + b"\n"
        + b'{"text": "ok", "extra": {"deep": [1, 2]}}\n'
        + b'{"text": "\\u001b[31mred\\u001b[0m"}\n'
    )
    h = PromptHistory(path).load()
    assert h.entries == ["lone \ufffd surrogate", "ok", "\x1b[31mred\x1b[0m"]  # kept as typed; shown made visible
    assert h.skipped == 5 and h.error is None
    path.unlink()
    path.mkdir()  # a folder where the file should be
    broken = PromptHistory(path).load()
    assert broken.entries == [] and "could not be read" in (broken.error or "")


def test_another_chats_prompts_show_up_and_search_finds_words_in_any_order(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    a, b = PromptHistory(path).load(), PromptHistory(path).load()
    a.add("explain the KV cache")
    b.refresh()
    assert b.entries == ["explain the KV cache"]
    b.add("why is TTFT high")
    a.add("explain prefill")
    a.refresh()
    assert a.recent() == ["explain prefill", "why is TTFT high", "explain the KV cache"]
    assert a.search("cache EXPLAIN") == ["explain the KV cache"]
    assert a.search("") == a.recent()


def test_a_draft_keeps_text_and_paths_never_contents(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    drafts.save("20260101-000000-aaaa", drafts.Draft("half typed\r\n\tline", ("~/notes.txt",)))
    path = tmp_path / "drafts" / "20260101-000000-aaaa.json"
    assert mode(path) == 0o600 and "notes.txt" in path.read_text()
    assert drafts.load("20260101-000000-aaaa") == drafts.Draft("half typed\r\n\tline", ("~/notes.txt",))
    drafts.save("20260101-000000-aaaa", drafts.Draft(""))  # emptied: gone
    assert not path.exists() and drafts.load("20260101-000000-aaaa") is None
    assert drafts.load("../../etc/passwd") is None  # not a session id: no file outside the folder is read
    path.write_text('{"text": ["not", "text"]}')
    assert drafts.load("20260101-000000-aaaa") is None


def test_the_newest_draft_of_a_chat_without_a_log_is_the_orphan(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    drafts.save("20260101-000000-aaaa", drafts.Draft("older"))
    drafts.save("20260101-000001-bbbb", drafts.Draft("newest, but its chat has a log"))
    (tmp_path / "sessions").mkdir()
    (tmp_path / "sessions" / "20260101-000001-bbbb.jsonl").write_text("")
    os.utime(tmp_path / "drafts" / "20260101-000000-aaaa.json", (1000, 1000))
    os.utime(tmp_path / "drafts" / "20260101-000001-bbbb.json", (2000, 2000))
    assert drafts.orphan() == ("20260101-000000-aaaa", drafts.Draft("older"))
    assert drafts.orphan(newer_than=1500) is None  # older than the log being resumed: not this chat's
