"""The prompt history file: 0600, capped, read as untrusted data, shared by several chats."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from ttft.telemetry.log import drafts
from ttft.telemetry.log.prompt_history import MAX_ENTRY_CHARS, PromptHistory


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


# --- a cut last line (D5) ----------------------------------------------------------------------
def test_an_append_after_a_cut_last_line_starts_a_line_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    whole = json.dumps({"text": "kept"}) + "\n"
    path.write_text(whole + '{"at": "2026-01-01T00:00:00+00:00", "text": "cut sh')  # no newline: a crash
    h = PromptHistory(path).load()
    assert h.entries == ["kept"] and h.skipped == 1  # the cut line skipped, nothing raised
    assert h.add("the next prompt")
    again = PromptHistory(path).load()
    assert again.entries == ["kept", "the next prompt"] and again.skipped == 1  # survives a restart
    assert path.read_text().endswith('"cut sh\n' + path.read_text().splitlines()[-1] + "\n")


def test_an_append_cut_inside_a_multibyte_character_still_keeps_the_next_prompt(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(json.dumps({"text": "漢字"}, ensure_ascii=False).encode()[:-4])  # cut in the middle of 字
    h = PromptHistory(path).load()
    assert h.entries == [] and h.skipped == 1
    h.add("after")
    assert PromptHistory(path).load().entries == ["after"]


def test_a_failed_append_leaves_no_fragment(tmp_path: Path, monkeypatch) -> None:
    from ttft.telemetry.log import private_files

    path = tmp_path / "h.jsonl"
    h = PromptHistory(path).load()
    h.add("first")
    size = path.stat().st_size
    real_write = os.write

    def half_then_full(fd: int, data) -> int:  # half the line goes out, then the disk is full
        if len(data) > 10:
            return real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(private_files.os, "write", half_then_full)
    assert not h.add("a long enough second prompt") and "could not be written" in (h.error or "")
    monkeypatch.undo()
    assert path.stat().st_size == size  # cut back: the next append is not glued onto half a line
    h.add("third")
    assert PromptHistory(path).load().entries == ["first", "third"]


# --- secrets (D4) --------------------------------------------------------------------------------
SECRET_COMMAND = "/compare compat:m@http://user:PASSWORD@host/v1?api-key=K3YVALUE"
MASKED_COMMAND = "/compare compat:m@http://***@host/v1?api-key=***"


def test_url_credentials_and_query_values_never_reach_the_history_file(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    h = PromptHistory(path).load()
    assert h.add(SECRET_COMMAND)
    assert h.recent()[0] == SECRET_COMMAND  # this chat recalls what it typed, from memory
    on_disk = path.read_text()
    assert "PASSWORD" not in on_disk and "K3YVALUE" not in on_disk and "user" not in on_disk
    assert PromptHistory(path).load().entries == [MASKED_COMMAND]  # the next chat gets the masked form


def test_a_history_written_before_masking_is_rewritten_masked_on_load(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps({"text": SECRET_COMMAND}) + "\n" + json.dumps({"text": "plain"}) + "\n")
    h = PromptHistory(path).load()
    assert h.entries == [MASKED_COMMAND, "plain"]
    assert "PASSWORD" not in path.read_text() and mode(path) == 0o600


def test_a_draft_is_kept_masked_even_half_typed(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("TTFT_DATA_DIR", str(tmp_path))
    sid = "20260101-000000-aaaa"
    for typed in (SECRET_COMMAND, "/compare compat:m@http://user:PASSW"):  # saved as it is typed
        drafts.save(sid, drafts.Draft(typed))
        text = (tmp_path / "drafts" / f"{sid}.json").read_text()
        assert "PASSW" not in text and "K3YVALUE" not in text
    assert drafts.load(sid) == drafts.Draft("/compare compat:m@http://***@")
